// Poll mode under load: model folders are added, changed, given new versions, broken and
// removed while a load generator keeps calling a model that stays; not one of its requests may
// fail. Explicit mode's repository API is driven the same way.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { get, inferJson, postJson } from '../helpers/http.js';
import { pendingRequests } from '../helpers/metrics.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { simpleJsonInputs } from '../helpers/simple.js';
import { range } from '../helpers/tensors.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Calls `simple` from `workers` loops until stopped; every answer is checked. */
function loadGenerator(url: string, workers = 4) {
  let running = true;
  let ok = 0;
  const failures: string[] = [];
  const loops = Array.from({ length: workers }, async (_, w) => {
    let i = 0;
    while (running) {
      const a = range(16, (k) => w * 1000 + i + k);
      const b = range(16);
      i++;
      try {
        const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs(a, b) });
        if (res.status !== 200) failures.push(`${res.status} ${res.text()}`);
        else {
          const out = res.json().outputs.find((o: { name: string }) => o.name === 'OUTPUT0').data as number[];
          if (out.some((v, k) => v !== a[k]! + b[k]!)) failures.push('wrong result');
          else ok++;
        }
      } catch (e) {
        failures.push(String(e));
      }
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return { ok, failures };
    },
  };
}

async function waitFor(what: string, cond: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe('poll mode under load', () => {
  let repo: string;
  let server: ServerHandle;
  const source = (): string => inject('modelRepository');

  beforeAll(async () => {
    repo = mkdtempSync(path.join(os.tmpdir(), 'serval-poll-'));
    cpSync(path.join(source(), 'simple'), path.join(repo, 'simple'), { recursive: true });
    server = await startServer(repo, ['--model-control-mode', 'poll', '--repository-poll-secs', '1']);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(repo, { recursive: true, force: true });
  });

  it('adds, reloads, versions, survives a broken config, and removes models with zero failed requests', async () => {
    const load = loadGenerator(server.url);
    const ready = async (m: string, v = '') => (await get(server.url, `/v2/models/${m}${v ? `/versions/${v}` : ''}/ready`)).status === 200;

    // A folder copied in becomes callable within the poll period.
    cpSync(path.join(source(), 'identity_int32'), path.join(repo, 'identity_int32'), { recursive: true });
    await waitFor('identity_int32 ready', () => ready('identity_int32'));
    const id = await inferJson(server.url, 'identity_int32', {
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 3], data: [7, 8, 9] }],
    });
    expect(id.json().outputs[0].data).toEqual([7, 8, 9]);

    // A changed config rolls the model over while it serves.
    const cfgFile = path.join(repo, 'simple', 'config.pbtxt');
    writeFileSync(cfgFile, `${readFileSync(cfgFile, 'utf8')}\ndynamic_batching { max_queue_delay_microseconds: 100 }\n`);
    await waitFor('simple reloaded with dynamic batching', async () => {
      const cfg = (await get(server.url, '/v2/models/simple/config')).json();
      return cfg.dynamic_batching !== undefined;
    });

    // A new version folder: the latest policy moves to it.
    cpSync(path.join(repo, 'simple', '1'), path.join(repo, 'simple', '2'), { recursive: true });
    await waitFor('simple version 2 ready', () => ready('simple', '2'));
    await waitFor('version 1 retired', async () => !(await ready('simple', '1')));

    // A broken config leaves the serving version in place and reports why.
    const good = readFileSync(cfgFile, 'utf8');
    writeFileSync(cfgFile, `${good}\nthis is { not a config\n`);
    await waitFor('the failure is reported in the index', async () => {
      const idx = (await postJson(server.url, '/v2/repository/index', {})).json() as { name: string; reason?: string }[];
      return idx.some((r) => r.name === 'simple' && /reload failed/.test(r.reason ?? ''));
    });
    expect(await ready('simple', '2')).toBe(true);
    writeFileSync(cfgFile, `${good}\n# fixed\n`);

    // A removed folder is unloaded.
    rmSync(path.join(repo, 'identity_int32'), { recursive: true, force: true });
    await waitFor('identity_int32 gone', async () => (await get(server.url, '/v2/models/identity_int32')).status === 404);

    await sleep(1500); // one more poll with the fixed config under load
    const { ok, failures } = await load.stop();
    expect(failures).toEqual([]);
    expect(ok).toBeGreaterThan(50);
    expect(await ready('simple')).toBe(true);
  });
});

describe('explicit mode', () => {
  let server: ServerHandle;
  beforeAll(async () => {
    server = await startServer(inject('modelRepository'), ['--model-control-mode', 'explicit', '--load-model', 'simple']);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('loads only the named models at start, then loads, reloads with a config and unloads on request, under load', async () => {
    const load = loadGenerator(server.url, 2);
    const index = async () => (await postJson(server.url, '/v2/repository/index', {})).json() as { name: string; state?: string }[];
    expect((await index()).find((r) => r.name === 'ranker_mlp')?.state).toBeUndefined();
    expect((await get(server.url, '/v2/models/ranker_mlp/ready')).status).toBe(400);

    expect((await postJson(server.url, '/v2/repository/models/ranker_mlp/load', {})).status).toBe(200);
    expect((await get(server.url, '/v2/models/ranker_mlp/ready')).status).toBe(200);

    // Reload `simple` with a config override while the load generator calls it.
    const cfg = (await get(server.url, '/v2/models/simple/config')).json();
    cfg.max_batch_size = 4;
    const r = await postJson(server.url, '/v2/repository/models/simple/load', { parameters: { config: JSON.stringify(cfg) } });
    expect(r.status, r.text()).toBe(200);
    expect((await get(server.url, '/v2/models/simple/config')).json().max_batch_size).toBe(4);

    expect((await postJson(server.url, '/v2/repository/models/ranker_mlp/unload', {})).status).toBe(200);
    expect((await get(server.url, '/v2/models/ranker_mlp/ready')).status).toBe(400);
    expect((await index()).find((r) => r.name === 'ranker_mlp')?.state).toBe('UNAVAILABLE');

    // A name that is no folder of the repository: Triton's answer (tritonserver 2.51: INTERNAL).
    const bad = await postJson(server.url, '/v2/repository/models/..%2Fetc/load', {});
    expect(bad.status).toBe(500);
    expect(bad.json().error).toBe("failed to load '../etc', failed to poll from model repository");
    const { ok, failures } = await load.stop();
    expect(failures).toEqual([]);
    expect(ok).toBeGreaterThan(10);
  });
});

describe('none mode refuses repository load/unload', () => {
  it("answers 503 with Triton's message", async () => {
    const server = await startServer(inject('modelRepository'));
    try {
      const r = await postJson(server.url, '/v2/repository/models/simple/unload', {});
      expect(r.status).toBe(503);
      expect(r.json().error).toBe('explicit model load / unload is not allowed if polling is enabled');
    } finally {
      await server.stop();
    }
  });
});

describe('graceful shutdown under load', () => {
  it('SIGTERM: every accepted request, executing or queued, over HTTP and gRPC, completes; then exit 0', async () => {
    const { makeRepo, slowClassifier } = await import('../helpers/repo.js');
    const { buildImageClassifier } = await import('../../tools/onnx/models.js');
    const { inferBinary } = await import('../helpers/http.js');
    const { grpcClient } = await import('../helpers/grpc.js');
    const repo = makeRepo([slowClassifier('slow', buildImageClassifier().onnx)]);
    const server = await startServer(repo.dir);
    const client = grpcClient(server.grpcAddress);
    try {
      const image = (n: number) => Buffer.from(new Float32Array(n * 3 * 224 * 224).fill(0.5).buffer);
      const pending = (): Promise<number> => pendingRequests(server, 'slow');
      const httpCalls = Array.from({ length: 3 }, () =>
        inferBinary(server.url, 'slow', [{ name: 'INPUT', datatype: 'FP32', shape: [8, 3, 224, 224], raw: image(8) }], {
          binaryOutput: true,
        }),
      );
      const grpcCalls = Array.from({ length: 2 }, () =>
        client.call('ModelInfer', {
          model_name: 'slow',
          inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224] }],
          raw_input_contents: [image(1)],
        }),
      );
      // All five accepted (queued, executing or already answered) and some still in flight.
      const answered = async (): Promise<number> =>
        (await get(server.url, '/v2/models/slow/stats')).json().model_stats[0].inference_stats.success.count as number;
      // Answered first, then pending: a request answered in between is counted once at most.
      await waitFor('five requests accepted, some still in flight', async () => {
        const a = await answered();
        const p = await pending();
        return p > 0 && a + p === 5;
      });
      const stopped = server.stop(20_000);
      const results = await Promise.allSettled([...httpCalls, ...grpcCalls]);
      for (const [i, r] of results.entries())
        expect(r.status, `request ${i}: ${String((r as PromiseRejectedResult).reason)}`).toBe('fulfilled');
      for (const r of results.slice(0, 3)) expect((r as PromiseFulfilledResult<{ status: number }>).value.status).toBe(200);
      for (const r of results.slice(3)) {
        expect((r as PromiseFulfilledResult<{ outputs: { shape: (string | number)[] }[] }>).value.outputs[0]!.shape.map(Number)).toEqual([
          1, 11,
        ]);
      }
      expect(await stopped).toBe(0);
    } finally {
      client.close();
      await server.stop();
      repo.cleanup();
    }
  });
});
