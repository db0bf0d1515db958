// A spawned server with the crash-recovery test hook (SERVAL_TEST_KILL_WORKER_FILE, set only in
// that server's environment): kill(model) makes the worker about to run one of the model's
// executions exit, as a worker that died would.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { get, inferJson } from './http.js';
import { type ServerHandle, startServer } from './server.js';
import { simpleJsonInputs } from './simple.js';
import { range } from './tensors.js';

export interface KillableServer {
  server: ServerHandle;
  kill(model: string): void;
  /** nv_inference_instance_restarts of version 1 of `model` (NaN when the series is absent). */
  restarts(model: string): Promise<number>;
  /** One JSON request with `simple`'s inputs (16 elements each). */
  infer(model: string): Promise<{ status: number; body: { error?: string } }>;
  stop(): Promise<void>;
}

export async function startKillable(repoDir: string, args: string[]): Promise<KillableServer> {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'serval-kill-'));
  const killFile = path.join(scratch, 'kill');
  process.env.SERVAL_TEST_KILL_WORKER_FILE = killFile;
  let server: ServerHandle;
  try {
    server = await startServer(repoDir, args);
  } catch (e) {
    rmSync(scratch, { recursive: true, force: true });
    throw e;
  } finally {
    delete process.env.SERVAL_TEST_KILL_WORKER_FILE;
  }
  const a = range(16);
  return {
    server,
    kill: (model) => writeFileSync(killFile, model),
    restarts: async (model) => {
      const text = (await get(`http://127.0.0.1:${server.metricsPort()}`, '/metrics')).text();
      const m = new RegExp(`^nv_inference_instance_restarts\\{model="${model}",version="1"\\} (\\d+)$`, 'm').exec(text);
      return m ? Number(m[1]) : Number.NaN;
    },
    infer: async (model) => {
      const res = await inferJson(server.url, model, { inputs: simpleJsonInputs(a, a) });
      return { status: res.status, body: res.json() as { error?: string } };
    },
    stop: async () => {
      await server.stop();
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}
