// The response cache end to end: a spawned server with --cache-config answers a repeated request
// from the cache (same outputs, no execution) and the statistics API and metrics say so.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get, inferJson } from '../helpers/http.js';
import { makeRepo, type Repo, scaleConfig, scaleModel } from '../helpers/repo.js';
import { runServerToExit, type ServerHandle, startServer } from '../helpers/server.js';

interface Stats {
  inference_count: number;
  execution_count: number;
  inference_stats: Record<string, { count: number; ns: number }>;
}

describe('response cache (spawned server)', () => {
  let repo: Repo;
  let server: ServerHandle;
  beforeAll(async () => {
    repo = makeRepo([
      { name: 'cached', config: `${scaleConfig('cached')}response_cache { enable: true }\n`, versions: { 1: scaleModel(3) } },
      { name: 'plain', config: scaleConfig('plain'), versions: { 1: scaleModel(3) } },
    ]);
    server = await startServer(repo.dir, ['--cache-config', 'local,size=1048576']);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  const infer = async (model: string, data: number[]) => {
    const r = await inferJson(server.url, model, { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 4], data }] });
    expect(r.status).toBe(200);
    return r.json() as { outputs: { name: string; datatype: string; shape: number[]; data: number[] }[] };
  };
  const stats = async (model: string): Promise<Stats> =>
    ((await get(server.url, `/v2/models/${model}/stats`)).json() as { model_stats: Stats[] }).model_stats[0]!;
  const metric = async (name: string, model: string): Promise<number | undefined> => {
    const text = (await get(`http://127.0.0.1:${server.metricsPort()}`, '/metrics')).text();
    const m = new RegExp(`^${name}\\{model="${model}",version="1"\\} (\\d+)$`, 'm').exec(text);
    return m ? Number(m[1]) : undefined;
  };

  it('a repeated request is answered from the cache with the same outputs, and not executed', async () => {
    const first = await infer('cached', [1, 2, 3, 4]);
    expect(first.outputs[0]!.data).toEqual([3, 6, 9, 12]);
    const afterFirst = await stats('cached');
    const hitsBefore = (await metric('nv_cache_num_hits_per_model', 'cached'))!;
    const second = await infer('cached', [1, 2, 3, 4]);
    expect(second.outputs).toEqual(first.outputs);
    const afterSecond = await stats('cached');
    expect(afterSecond.execution_count).toBe(afterFirst.execution_count);
    expect(afterSecond.inference_count).toBe(afterFirst.inference_count);
    expect(afterSecond.inference_stats.cache_hit!.count).toBe(afterFirst.inference_stats.cache_hit!.count + 1);
    expect(afterSecond.inference_stats.success!.count).toBe(afterFirst.inference_stats.success!.count + 1);
    expect(afterSecond.inference_stats.cache_miss!.count).toBeGreaterThanOrEqual(1);
    expect(await metric('nv_cache_num_hits_per_model', 'cached')).toBe(hitsBefore + 1);
    expect(await metric('nv_cache_num_misses_per_model', 'cached')).toBe(afterSecond.inference_stats.cache_miss!.count);
    // Other input bytes: a miss that runs.
    expect((await infer('cached', [1, 2, 3, 5])).outputs[0]!.data).toEqual([3, 6, 9, 15]);
    expect((await stats('cached')).execution_count).toBe(afterFirst.execution_count + 1);
  });

  it('a model whose config does not enable it always runs and has no cache metrics', async () => {
    await infer('plain', [7, 7, 7, 7]);
    await infer('plain', [7, 7, 7, 7]);
    const s = await stats('plain');
    expect(s.execution_count).toBe(2);
    expect(s.inference_stats.cache_hit!.count).toBe(0);
    expect(s.inference_stats.cache_miss!.count).toBe(0);
    expect(await metric('nv_cache_num_hits_per_model', 'plain')).toBeUndefined();
  });
});

describe('cache flags at start-up', () => {
  it('refuses --response-cache-byte-size together with --cache-config, as tritonserver does', async () => {
    const r = await runServerToExit('/nonexistent', ['--response-cache-byte-size', '1024', '--cache-config', 'local,size=2048']);
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/Incompatible flags --response-cache-byte-size and --cache-config both provided/);
  });
});
