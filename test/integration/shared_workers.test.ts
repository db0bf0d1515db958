// Small models sharing one worker thread, through the server: a killed shared worker fails only
// what it was running, every model it hosted comes back and counts a restart in
// nv_inference_instance_restarts, and a model on a worker of its own is not touched; unloading one
// sharing model leaves the other serving.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSimple } from '../../tools/onnx/models.js';
import { get, postJson } from '../helpers/http.js';
import { type KillableServer, startKillable } from '../helpers/kill_hook.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import type { ServerHandle } from '../helpers/server.js';

const simple = buildSimple();
const config = (name: string) => simple.config.replace('name: "simple"', `name: "${name}"`);

describe('models sharing a worker thread', () => {
  let repo: Repo;
  let server: ServerHandle;
  let killable: KillableServer;
  beforeAll(async () => {
    repo = makeRepo(['victim', 'sharer', 'loner'].map((name) => ({ name, config: config(name), versions: { 1: simple.onnx } })));
    // More files than the threshold: `loner` is "large" and gets a worker of its own.
    writeFileSync(path.join(repo.dir, 'loner', '1', 'weights.bin'), new Uint8Array(8192));
    killable = await startKillable(repo.dir, [
      '--model-control-mode=explicit',
      '--load-model=*',
      '--backend-config=onnxruntime,shared-workers=1',
      '--backend-config=onnxruntime,shared-model-max-bytes=4096',
    ]);
    server = killable.server;
  });
  afterAll(async () => {
    await killable?.stop();
    repo?.cleanup();
  });

  const infer = (model: string) => killable.infer(model);
  const restarts = (model: string) => killable.restarts(model);

  it('a killed shared worker: its models come back and count a restart; a model on its own worker is untouched', async () => {
    const loner: Promise<{ status: number }>[] = [];
    const shared: Promise<{ status: number; body: { error?: string } }>[] = [];
    for (let i = 0; i < 30; i++) {
      if (i === 10) killable.kill('victim');
      shared.push(infer('victim'), infer('sharer'));
      loner.push(infer('loner'));
      if (i % 5 === 4) await Promise.all(shared.slice(-10));
    }
    for (const r of await Promise.all(loner)) expect(r.status).toBe(200);
    const failed = (await Promise.all(shared)).filter((r) => r.status !== 200);
    expect(failed.length).toBeGreaterThanOrEqual(1);
    for (const f of failed) {
      expect(f.status).toBe(500);
      expect(f.body.error).toMatch(
        /^instance (victim|sharer)_0_0 stopped unexpectedly \(exit code 70\) while running this request; it is being restarted$/,
      );
    }
    for (const m of ['victim', 'sharer', 'loner']) {
      expect((await get(server.url, `/v2/models/${m}/ready`)).status).toBe(200);
      expect((await infer(m)).status).toBe(200);
    }
    const deadline = Date.now() + 10_000;
    while ((await restarts('sharer')) !== 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await restarts('victim')).toBe(1);
    expect(await restarts('sharer')).toBe(1);
    expect(await restarts('loner')).toBe(0);
  });

  it('unloading one model leaves the model sharing its worker serving', async () => {
    expect((await postJson(server.url, '/v2/repository/models/victim/unload', {})).status).toBe(200);
    expect((await get(server.url, '/v2/models/victim/ready')).status).toBe(400);
    for (let i = 0; i < 5; i++) expect((await infer('sharer')).status).toBe(200);
    expect((await postJson(server.url, '/v2/repository/models/victim/load', {})).status).toBe(200);
    expect((await infer('victim')).status).toBe(200);
  });
});
