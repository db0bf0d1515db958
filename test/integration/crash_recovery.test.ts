// A model instance whose worker dies under load (the test hook SERVAL_TEST_KILL_WORKER_FILE, set
// only in this test's server environment): the requests it was running fail with a clear 500,
// every other request and every other model is served, the model stays ready and recovers, and
// nv_inference_instance_restarts counts the restart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLOTS } from '../../src/backends/onnxruntime/channel.js';
import { buildSimple } from '../../tools/onnx/models.js';
import { get } from '../helpers/http.js';
import { type KillableServer, startKillable } from '../helpers/kill_hook.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import type { ServerHandle } from '../helpers/server.js';

const simple = buildSimple();
const config = (name: string, count: number) =>
  simple.config.replace('name: "simple"', `name: "${name}"`).replace('count: 1', `count: ${count}`);

describe('crash recovery of ONNX Runtime instances', () => {
  let repo: Repo;
  let server: ServerHandle;
  let killable: KillableServer;
  beforeAll(async () => {
    repo = makeRepo([
      { name: 'victim', config: config('victim', 2), versions: { 1: simple.onnx } },
      { name: 'lonely', config: config('lonely', 1), versions: { 1: simple.onnx } },
      { name: 'bystander', config: config('bystander', 1), versions: { 1: simple.onnx } },
    ]);
    // Every instance on a worker of its own, so "other models" are on other workers; a shared
    // worker's death is tested in shared_workers.test.ts.
    killable = await startKillable(repo.dir, ['--backend-config=onnxruntime,shared-workers=0']);
    server = killable.server;
  });
  afterAll(async () => {
    await killable?.stop();
    repo?.cleanup();
  });

  const infer = (model: string) => killable.infer(model);
  const restarts = (model: string) => killable.restarts(model);

  it('a worker killed mid-load fails only what it was running; other models are unaffected; the model recovers', async () => {
    expect(await restarts('victim')).toBe(0);
    const victims: Promise<{ status: number; body: { error?: string } }>[] = [];
    const others: Promise<{ status: number }>[] = [];
    for (let i = 0; i < 60; i++) {
      if (i === 20) killable.kill('victim');
      victims.push(infer('victim'));
      others.push(infer('bystander'));
      if (i % 10 === 9) await Promise.all(victims.slice(-10));
    }
    const results = await Promise.all(victims);
    for (const r of await Promise.all(others)) expect(r.status).toBe(200);
    const failed = results.filter((r) => r.status !== 200);
    // Only executions on the killed worker fail: at most what one instance holds, at least the one it took.
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(failed.length).toBeLessThanOrEqual(SLOTS);
    for (const f of failed) {
      expect(f.status).toBe(500);
      expect(f.body.error).toMatch(
        /^instance victim_\d+_\d+ stopped unexpectedly \(exit code 70\) while running this request; it is being restarted$/,
      );
    }
    expect((await get(server.url, '/v2/models/victim/ready')).status).toBe(200);
    expect((await infer('victim')).status).toBe(200);
    const deadline = Date.now() + 10_000;
    while ((await restarts('victim')) !== 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await restarts('victim')).toBe(1);
    expect(await restarts('bystander')).toBe(0);
  });

  it('when the only instance dies, the next requests wait for its restart and succeed', async () => {
    killable.kill('lonely');
    const first = await infer('lonely');
    expect(first.status).toBe(500);
    const next = await Promise.all([infer('lonely'), infer('lonely'), infer('lonely')]);
    expect(next.map((r) => r.status)).toEqual([200, 200, 200]);
    expect((await get(server.url, '/v2/models/lonely/ready')).status).toBe(200);
  });
});
