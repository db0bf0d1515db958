// Concurrency: many requests in flight each get their own results (with and without dynamic
// batching, over HTTP and gRPC), and a long inference never blocks the event loop.

import http from 'node:http';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildIdentity, buildImageClassifier } from '../../tools/onnx/models.js';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { binaryBody, decodeResponse, get, inferBinary } from '../helpers/http.js';
import { waitPending as waitPendingOn } from '../helpers/metrics.js';
import { makeRepo, type Repo, slowClassifier } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { ALL_TYPES, bytesRaw, type Dt, identityModel, randomRaw, range, rawOf, rng, splitBytesRaw, valuesOf } from '../helpers/tensors.js';

describe('concurrent requests on the example models', () => {
  let server: ServerHandle;
  let client: GrpcClient;
  beforeAll(async () => {
    server = await startServer(inject('modelRepository'));
    client = grpcClient(server.grpcAddress);
  });
  afterAll(async () => {
    client?.close();
    await server?.stop();
  });

  it('200 concurrent simple requests over HTTP and gRPC each get their own sums', async () => {
    const r = rng(99);
    const jobs = range(200, (i) => {
      const batch = 1 + (i % 4);
      const a = range(batch * 16, () => Math.floor(r() * 2e6) - 1e6);
      const b = range(batch * 16, () => Math.floor(r() * 2e6) - 1e6);
      return { i, batch, a, b };
    });
    await Promise.all(
      jobs.map(async ({ i, batch, a, b }) => {
        let sum: number[];
        let diff: number[];
        if (i % 2 === 0) {
          const res = await inferBinary(
            server.url,
            'simple',
            [
              { name: 'INPUT0', datatype: 'INT32', shape: [batch, 16], raw: rawOf('INT32', a) },
              { name: 'INPUT1', datatype: 'INT32', shape: [batch, 16], json: b },
            ],
            { id: `http-${i}`, binaryOutput: i % 4 === 0 },
          );
          expect(res.status, res.text()).toBe(200);
          const d = decodeResponse(res);
          expect(d.id).toBe(`http-${i}`);
          const o = d.outputs;
          sum = o[0]!.raw ? (valuesOf('INT32', o[0]!.raw) as number[]) : (o[0]!.data as number[]);
          diff = o[1]!.raw ? (valuesOf('INT32', o[1]!.raw) as number[]) : (o[1]!.data as number[]);
          expect(o[0]!.shape).toEqual([batch, 16]);
        } else {
          const res = await client.call('ModelInfer', {
            model_name: 'simple',
            id: `grpc-${i}`,
            inputs: [
              { name: 'INPUT0', datatype: 'INT32', shape: [batch, 16] },
              { name: 'INPUT1', datatype: 'INT32', shape: [batch, 16] },
            ],
            raw_input_contents: [rawOf('INT32', a), rawOf('INT32', b)],
          });
          expect(res.id).toBe(`grpc-${i}`);
          sum = valuesOf('INT32', res.raw_output_contents[0]) as number[];
          diff = valuesOf('INT32', res.raw_output_contents[1]) as number[];
        }
        expect(sum).toEqual(a.map((x, k) => x + b[k]!));
        expect(diff).toEqual(a.map((x, k) => x - b[k]!));
      }),
    );
  });

  it('concurrent requests to every identity model return their own data', async () => {
    const types = ALL_TYPES.filter((t) => t !== 'BYTES') as Exclude<Dt, 'BYTES'>[];
    await Promise.all(
      range(5).flatMap((rep) =>
        types.map(async (dt, ti) => {
          const n = 3 + rep + ti;
          const raw = randomRaw(dt, n, rng(rep * 1000 + ti));
          const res = await inferBinary(server.url, identityModel(dt), [{ name: 'INPUT0', datatype: dt, shape: [1, n], raw }], {
            binaryOutput: true,
          });
          expect(res.status).toBe(200);
          expect(decodeResponse(res).outputs[0]!.raw!.equals(raw)).toBe(true);
        }),
      ),
    );
  });

  it('dynamic batching (ranker_mlp) merges concurrent requests and gives each exactly its own rows', async () => {
    const r = rng(4242);
    const requests = range(40, (i) => {
      const batch = 1 + (i % 3);
      return { batch, x: new Float32Array(batch * 512).map(() => r() * 2 - 1) };
    });
    const run = async (batch: number, x: Float32Array): Promise<number[]> => {
      const res = await inferBinary(
        server.url,
        'ranker_mlp',
        [{ name: 'INPUT', datatype: 'FP32', shape: [batch, 512], raw: Buffer.from(x.buffer) }],
        {
          binaryOutput: true,
        },
      );
      expect(res.status, res.text()).toBe(200);
      const o = decodeResponse(res).outputs[0]!;
      expect(o.shape).toEqual([batch, 1]);
      return valuesOf('FP32', o.raw!) as number[];
    };
    // References: every request alone.
    const alone: number[][] = [];
    for (const q of requests) alone.push(await run(q.batch, q.x));

    const stats = async () => (await get(server.url, '/v2/models/ranker_mlp/stats')).json().model_stats[0];
    const before = await stats();
    const together = await Promise.all(requests.map((q) => run(q.batch, q.x)));
    const after = await stats();

    together.forEach((got, i) => {
      expect(got).toHaveLength(requests[i]!.batch);
      for (const [k, v] of got.entries()) expect(v).toBeCloseTo(alone[i]![k]!, 5);
    });
    // Rows from different requests differ, so a mix-up could not pass the check above.
    expect(new Set(alone.flat().map((v) => v.toFixed(6))).size).toBeGreaterThan(alone.flat().length * 0.9);

    const items = requests.reduce((s, q) => s + q.batch, 0);
    expect(after.inference_count - before.inference_count).toBe(items);
    const executions = after.execution_count - before.execution_count;
    expect(executions).toBeLessThan(requests.length);
    const rowsIn = (s: { batch_stats: { batch_size: number; compute_infer: { count: number } }[] }) =>
      s.batch_stats.reduce((sum, b) => sum + b.batch_size * b.compute_infer.count, 0);
    expect(rowsIn(after) - rowsIn(before)).toBe(items);
    for (const b of after.batch_stats) expect(b.batch_size).toBeLessThanOrEqual(64);
  });
});

describe('the event loop stays free during a long inference', () => {
  let repo: Repo;
  let server: ServerHandle;
  beforeAll(async () => {
    const ic = buildImageClassifier();
    repo = makeRepo([
      slowClassifier('slow', ic.onnx, '', 2),
      {
        name: 'strings_batched',
        config: `name: "strings_batched"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
`,
        versions: { 1: buildIdentity('string', 'string', 'TYPE_STRING').onnx },
      },
    ]);
    server = await startServer(repo.dir);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  it('dynamic batching of BYTES: merged requests each get exactly their own strings', async () => {
    const r = rng(31337);
    const word = () => 'x'.repeat(Math.floor(r() * 40)) + String(Math.floor(r() * 1e6)) + (r() < 0.2 ? 'ünï' : '');
    const requests = range(30, (i) => ({ batch: 1 + (i % 3), strings: range((1 + (i % 3)) * 3, word) }));
    const stats = async () => (await get(server.url, '/v2/models/strings_batched/stats')).json().model_stats[0];
    const before = await stats();
    await Promise.all(
      requests.map(async ({ batch, strings }) => {
        const raw = bytesRaw(strings);
        const res = await inferBinary(server.url, 'strings_batched', [{ name: 'INPUT0', datatype: 'BYTES', shape: [batch, 3], raw }], {
          binaryOutput: true,
        });
        expect(res.status, res.text()).toBe(200);
        const o = decodeResponse(res).outputs[0]!;
        expect(o.shape).toEqual([batch, 3]);
        expect(splitBytesRaw(o.raw!).map(String)).toEqual(strings);
      }),
    );
    const after = await stats();
    expect(after.inference_count - before.inference_count).toBe(requests.reduce((s, q) => s + q.batch, 0));
    expect(after.execution_count - before.execution_count).toBeLessThan(requests.length);
  });

  it('health checks answer within 50 ms and a second instance serves a short request meanwhile', async () => {
    const image = (n: number) => Buffer.from(new Float32Array(n * 3 * 224 * 224).fill(0.25).buffer);
    const big = image(16);
    const small = image(1);
    // Warm up both instances.
    await Promise.all(
      [0, 1].map(() => inferBinary(server.url, 'slow', [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], raw: small }])),
    );

    const t0 = performance.now();
    let longDone = 0;
    const long = inferBinary(server.url, 'slow', [{ name: 'INPUT', datatype: 'FP32', shape: [16, 3, 224, 224], raw: big }], {
      binaryOutput: true,
    }).then((res) => {
      longDone = performance.now();
      return res;
    });

    // Health checks for as long as the long inference runs.
    const latencies: { at: number; ms: number }[] = [];
    const polling = (async () => {
      while (!longDone) {
        const s = performance.now();
        const res = await get(server.url, '/v2/health/ready');
        expect(res.status).toBe(200);
        latencies.push({ at: Math.round(s - t0), ms: +(performance.now() - s).toFixed(1) });
        await new Promise((r) => setTimeout(r, 5));
      }
    })();

    // A short request on the other instance finishes while the long one still runs.
    await new Promise((r) => setTimeout(r, 30));
    const shortRes = await inferBinary(server.url, 'slow', [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], raw: small }], {
      binaryOutput: true,
    });
    const longFinishedFirst = longDone !== 0;
    expect(shortRes.status).toBe(200);
    await polling;
    const longRes = await long;
    expect(longRes.status).toBe(200);
    const longMs = longDone - t0;

    // The long inference really was long, and the short one did not wait for it.
    expect(longMs).toBeGreaterThan(100);
    expect(longFinishedFirst).toBe(false);
    // Per-row results of the long batch are all the same image, so all rows must match the short one.
    const rows = valuesOf('FP32', decodeResponse(longRes).outputs[0]!.raw!) as number[];
    const one = valuesOf('FP32', decodeResponse(shortRes).outputs[0]!.raw!) as number[];
    for (let b = 0; b < 16; b++) for (const [k, v] of rows.slice(b * 11, b * 11 + 11).entries()) expect(v).toBeCloseTo(one[k]!, 5);

    expect(latencies.length, JSON.stringify(latencies)).toBeGreaterThanOrEqual(3);
    // A blocked event loop would hold a health check for the rest of the inference. Allow for
    // scheduling noise on a loaded 2-core machine, but not for anything near that.
    const sorted = latencies.map((l) => l.ms).sort((x, y) => x - y);
    const detail = `health latencies during a ${longMs.toFixed(0)} ms inference: ${JSON.stringify(latencies)}`;
    expect(sorted[Math.floor(sorted.length / 2)]!, detail).toBeLessThan(20);
    expect(sorted[sorted.length - 1]!, detail).toBeLessThan(Math.max(50, longMs / 4));
  });
});

describe('cancellation and shutdown with a busy single-instance model', () => {
  // Uses its own server: the last test stops it. Progress is observed through the
  // nv_inference_pending_request_count metric (queued + executing), so no step depends on timing.
  let repo: Repo;
  let server: ServerHandle;
  let client: GrpcClient;
  const image = (n: number) => Buffer.from(new Float32Array(n * 3 * 224 * 224).fill(0.5).buffer);
  const stats = async () => (await get(server.url, '/v2/models/slow1/stats')).json().model_stats[0];
  const long = () =>
    inferBinary(server.url, 'slow1', [{ name: 'INPUT', datatype: 'FP32', shape: [16, 3, 224, 224], raw: image(16) }], {
      binaryOutput: true,
    });

  const waitPending = (n: number, what: string): Promise<void> => waitPendingOn(server, 'slow1', n, what);

  beforeAll(async () => {
    repo = makeRepo([slowClassifier('slow1', buildImageClassifier().onnx)]);
    server = await startServer(repo.dir);
    client = grpcClient(server.grpcAddress);
    await inferBinary(server.url, 'slow1', [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], raw: image(1) }]);
  });
  afterAll(async () => {
    client?.close();
    await server?.stop();
    repo?.cleanup();
  });

  it('an HTTP client that disconnects while its request is queued: the request is dropped, not executed', async () => {
    const before = await stats();
    const running = long();
    await waitPending(1, 'the long request executing');
    // A second request queues behind the running one; then its client goes away.
    const { body, headerLength } = binaryBody([{ name: 'INPUT', datatype: 'FP32', shape: [2, 3, 224, 224], raw: image(2) }]);
    const agent = new http.Agent({ keepAlive: false });
    const req = http.request({
      host: '127.0.0.1',
      port: server.httpPort,
      path: '/v2/models/slow1/infer',
      method: 'POST',
      agent,
      headers: { 'inference-header-content-length': headerLength, 'content-length': body.byteLength },
    });
    const outcome = new Promise<string>((resolve) => {
      req.on('response', () => resolve('response'));
      req.on('error', () => resolve('aborted'));
    });
    req.end(body);
    await waitPending(2, 'the second request queued behind the long one');
    req.destroy();
    expect(await outcome).toBe('aborted');
    await waitPending(1, 'the queued request dropped while the long one still runs');
    expect((await running).status).toBe(200);
    await waitPending(0, 'all done');
    const after = await stats();
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_count - before.inference_count).toBe(16);
    expect(after.inference_stats.fail.count - before.inference_stats.fail.count).toBe(1);
  });

  it('a gRPC client that cancels while its request is queued: the request is dropped, not executed', async () => {
    const before = await stats();
    const running = long();
    await waitPending(1, 'the long request executing');
    const c = client.cancellable('ModelInfer', {
      model_name: 'slow1',
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224] }],
      raw_input_contents: [image(1)],
    });
    await waitPending(2, 'the gRPC request queued behind the long one');
    c.cancel();
    await expect(c.result).rejects.toMatchObject({ code: status.CANCELLED });
    await waitPending(1, 'the cancelled request dropped while the long one still runs');
    expect((await running).status).toBe(200);
    await waitPending(0, 'all done');
    const after = await stats();
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_stats.fail.count - before.inference_stats.fail.count).toBe(1);
  });

  it('SIGTERM lets an in-flight inference finish, then exits 0 promptly', async () => {
    // The client keeps its connection alive (as tritonclient and most HTTP clients do).
    const running = long();
    await waitPending(1, 'the long request executing');
    const t0 = performance.now();
    const stopped = server.stop(5000);
    const res = await running;
    expect(res.status).toBe(200);
    const out = decodeResponse(res).outputs[0]!;
    expect(out.shape).toEqual([16, 11]);
    const p = valuesOf('FP32', out.raw!) as number[];
    expect(p.slice(0, 11).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 4);
    expect(server.stdout()).toContain('Received SIGTERM');
    const code = await stopped;
    expect(code, `exit code after ${(performance.now() - t0).toFixed(0)} ms (null: still running after 5 s, killed)`).toBe(0);
  });
});
