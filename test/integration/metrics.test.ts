// The metrics endpoint with tritonserver's metric flags: CPU metrics on by default and sampled
// every --metrics-interval-ms; --allow-cpu-metrics false leaves them out and keeps the rest.
import { afterEach, describe, expect, it } from 'vitest';
import { get } from '../helpers/http.js';
import { makeRepo, type Repo, scaleConfig, scaleModel } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';

describe('metrics flags', () => {
  let repo: Repo | undefined;
  let server: ServerHandle | undefined;
  afterEach(async () => {
    await server?.stop();
    repo?.cleanup();
  });
  const scrape = async (): Promise<string> => (await get(`http://127.0.0.1:${server!.metricsPort()}`, '/metrics')).text();

  it('serves nv_cpu_* by default (with --metrics-interval-ms set), beside the per-model metrics', async () => {
    repo = makeRepo([{ name: 'scale', config: scaleConfig('scale'), versions: { 1: scaleModel(2) } }]);
    server = await startServer(repo.dir, ['--metrics-interval-ms', '50']);
    const text = await scrape();
    expect(text).toMatch(/^nv_cpu_memory_total_bytes \d+$/m);
    expect(text).toMatch(/^nv_cpu_memory_used_bytes \d+$/m);
    expect(text).toMatch(/^nv_inference_count\{model="scale",version="1"\} 0$/m);
    const util = Number(/^nv_cpu_utilization ([\d.e+-]+)$/m.exec(text)![1]);
    expect(util).toBeGreaterThanOrEqual(0);
    expect(util).toBeLessThanOrEqual(1);
  });

  it('--allow-cpu-metrics false leaves the CPU metrics out', async () => {
    repo = makeRepo([{ name: 'scale', config: scaleConfig('scale'), versions: { 1: scaleModel(2) } }]);
    server = await startServer(repo.dir, ['--allow-cpu-metrics', 'false', '--allow-gpu-metrics', 'false']);
    const text = await scrape();
    expect(text).not.toMatch(/nv_cpu_/);
    expect(text).toMatch(/^nv_inference_request_success\{model="scale",version="1"\} 0$/m);
  });
});
