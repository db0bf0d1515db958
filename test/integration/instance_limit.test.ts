// Instances per load (issue 25): a repository load asking for `instance_group { count: 1000 }`
// is refused with 400 / INVALID_ARGUMENT naming the model, its count and the flag, quickly and
// before any instance starts (the server's thread count does not move); the other models serve
// on. The server's bound counts the loaded models' instances; at start-up a model over the bound
// fails like any config error.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSimple } from '../../tools/onnx/models.js';
import { grpcClient, status } from '../helpers/grpc.js';
import { inferJson, postJson } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { simpleJsonInputs } from '../helpers/simple.js';
import { range } from '../helpers/tensors.js';

const simple = buildSimple();
const config = (name: string, count = 1) =>
  simple.config.replace('name: "simple"', `name: "${name}"`).replace('count: 1', `count: ${count}`);
const models = (...names: [string, number][]) =>
  names.map(([name, count]) => ({ name, config: config(name, count), versions: { 1: simple.onnx } }));

const threads = (pid: number): number => Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
const override = (count: number) => ({
  parameters: {
    config: JSON.stringify({
      backend: 'onnxruntime',
      max_batch_size: 8,
      instance_group: [{ count, kind: 'KIND_CPU' }],
    }),
  },
});

async function servesSimple(server: ServerHandle, name: string): Promise<void> {
  const inputs = simpleJsonInputs(
    range(16),
    range(16, () => 1),
  );
  const res = await inferJson(server.url, name, { inputs });
  expect(res.status, res.text()).toBe(200);
  expect(res.json().outputs[0].data).toEqual(range(16, (i) => i + 1));
}

describe('a load over --model-instance-limit (default) is refused before anything starts', () => {
  let repo: Repo;
  let server: ServerHandle;
  beforeAll(async () => {
    repo = makeRepo(models(['simple', 1], ['big', 1]));
    server = await startServer(repo.dir, ['--model-control-mode', 'explicit', '--load-model', 'simple']);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  it('count: 1000 by a config override: 400 at once, naming the model, its count and the flag; no thread started', async () => {
    const before = threads(server.pid);
    const t0 = performance.now();
    const res = await postJson(server.url, '/v2/repository/models/big/load', override(1000));
    const ms = performance.now() - t0;
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(
      /^model 'big' asks for 1000 instances \(instance_group count 1000\), more than the \d+ that --model-instance-limit allows for one model/,
    );
    // A refusal, not a start and a rollback: one worker start alone takes about 0.1 s.
    expect(ms).toBeLessThan(2000);
    expect(threads(server.pid)).toBe(before);
    const index = (await postJson(server.url, '/v2/repository/index', {})).json();
    expect(index).toContainEqual(
      expect.objectContaining({ name: 'big', state: 'UNAVAILABLE', reason: expect.stringContaining('--model-instance-limit') }),
    );
    expect(index).toContainEqual(expect.objectContaining({ name: 'simple', state: 'READY' }));
    await servesSimple(server, 'simple');
  });

  it('over gRPC: INVALID_ARGUMENT with the same text; a count within the bound then loads and serves', async () => {
    const grpc = grpcClient(server.grpcAddress);
    try {
      const e = await grpc.error('RepositoryModelLoad', {
        model_name: 'big',
        parameters: { config: { string_param: override(1000).parameters.config } },
      });
      expect(e.code).toBe(status.INVALID_ARGUMENT);
      expect(e.details).toContain("model 'big' asks for 1000 instances");
    } finally {
      grpc.close();
    }
    const ok = await postJson(server.url, '/v2/repository/models/big/load', override(2));
    expect(ok.status, ok.text()).toBe(200);
    await servesSimple(server, 'big');
    await servesSimple(server, 'simple');
  });
});

describe('--server-instance-limit counts the loaded models’ instances; at start-up a model over a bound fails alone', () => {
  let repo: Repo;
  let server: ServerHandle;
  beforeAll(async () => {
    repo = makeRepo(models(['a', 1], ['b', 2], ['c', 1], ['huge', 5]));
    server = await startServer(repo.dir, [
      '--model-control-mode',
      'explicit',
      '--load-model',
      '*',
      '--model-instance-limit',
      '4',
      '--server-instance-limit',
      '4',
      '--exit-on-error',
      'false',
      '--strict-readiness',
      'false',
    ]);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  it('loads what fits; the model over --model-instance-limit is UNAVAILABLE with the reason, the others serve', async () => {
    const index: { name: string; state: string; reason: string }[] = (await postJson(server.url, '/v2/repository/index', {})).json();
    const huge = index.find((m) => m.name === 'huge')!;
    expect(huge.state).toBe('UNAVAILABLE');
    expect(huge.reason).toContain(
      "model 'huge' asks for 5 instances (instance_group count 5), more than the 4 that --model-instance-limit allows",
    );
    // a, b and c together are 4 instances: the bound, not over it.
    for (const m of ['a', 'b', 'c']) await servesSimple(server, m);
  });

  it('a reload that would bring the server over its bound is refused and the model keeps serving', async () => {
    const res = await postJson(server.url, '/v2/repository/models/c/load', override(2));
    expect(res.status, res.text()).toBe(400);
    expect(res.json().error).toContain(
      "model 'c' asks for 2 instances (instance_group count 2), which with the 3 instances of the other loaded models is more than the 4 that --server-instance-limit allows",
    );
    await servesSimple(server, 'c');
    // Unloading another model makes room.
    expect((await postJson(server.url, '/v2/repository/models/b/unload', {})).status).toBe(200);
    const again = await postJson(server.url, '/v2/repository/models/c/load', override(2));
    expect(again.status, again.text()).toBe(200);
    await servesSimple(server, 'c');
  });
});
