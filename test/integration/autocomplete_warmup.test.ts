// Auto-complete and warm-up through the running server: a folder with only model.onnx gets a
// config filled from the model file (and dynamic batching when the model batches); warm-up
// samples run on every instance before the model is ready, and a broken sample fails the load.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSimple } from '../../tools/onnx/models.js';
import { get, inferJson } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { runServerToExit, type ServerHandle, startServer } from '../helpers/server.js';
import { simpleJsonInputs } from '../helpers/simple.js';
import { i32, range } from '../helpers/tensors.js';

const simple = buildSimple();
const warmup = (source: string) => `
model_warmup [ {
  name: "sample"
  batch_size: 4
  count: 2
  inputs { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 16 ] ${source} } }
  inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } }
} ]
`;

describe('auto-complete and warm-up', () => {
  let repo: Repo;
  let server: ServerHandle;
  beforeAll(async () => {
    repo = makeRepo([
      { name: 'bare', versions: { 1: simple.onnx } },
      {
        name: 'warm',
        config: simple.config.replace('name: "simple"', 'name: "warm"') + warmup('input_data_file: "ones.bin"'),
        versions: { 1: simple.onnx },
      },
    ]);
    mkdirSync(path.join(repo.dir, 'warm', 'warmup'));
    writeFileSync(path.join(repo.dir, 'warm', 'warmup', 'ones.bin'), i32(range(16, () => 1)));
    server = await startServer(repo.dir);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  it('fills a missing config from model.onnx: names, types, dims, max_batch_size 4 and dynamic batching', async () => {
    const cfg = (await get(server.url, '/v2/models/bare/config')).json();
    expect(cfg.max_batch_size).toBe(4);
    expect(cfg.dynamic_batching).toBeDefined();
    expect(cfg.input.map((i: { name: string; data_type: string; dims: number[] }) => [i.name, i.data_type, i.dims])).toEqual([
      ['INPUT0', 'TYPE_INT32', [16]],
      ['INPUT1', 'TYPE_INT32', [16]],
    ]);
    expect(cfg.output.map((o: { name: string }) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    const a = range(16);
    const res = await inferJson(server.url, 'bare', { inputs: simpleJsonInputs(a, a) });
    expect(res.json().outputs[0].data).toEqual(a.map((x) => 2 * x));
  });

  it('a model with warm-up samples is ready and serves; warm-up runs are not counted in its statistics', async () => {
    expect((await get(server.url, '/v2/models/warm/ready')).status).toBe(200);
    const stats = (await get(server.url, '/v2/models/warm/stats')).json().model_stats[0];
    expect(stats.execution_count).toBe(0);
  });

  it('a warm-up sample that cannot run fails the load with a message naming the sample', async () => {
    const broken = makeRepo([
      {
        name: 'warm',
        config: simple.config.replace('name: "simple"', 'name: "warm"') + warmup('input_data_file: "missing.bin"'),
        versions: { 1: simple.onnx },
      },
    ]);
    try {
      const r = await runServerToExit(broken.dir);
      expect(r.code).not.toBe(0);
      expect(r.stdout + r.stderr).toMatch(/warmup sample 'sample'.*missing\.bin/);
    } finally {
      broken.cleanup();
    }
  });

  it('--disable-auto-complete-config refuses a folder without a config', async () => {
    const r = await runServerToExit(repo.dir, ['--disable-auto-complete-config']);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toMatch(/bare .*UNAVAILABLE/);
  });
});
