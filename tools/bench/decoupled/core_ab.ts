// The one-response path without the network: core.infer on `simple` (ONNX), 16 requests in flight,
// in this process, with the core of the build in DIST. Prints requests/s and the process's CPU per
// request (main thread and ONNX workers). Run two builds alternately to compare them:
//   node dist/tools/bench/decoupled/core_ab.js /tmp/serval-baseline-4f3a059/dist 20000
//   node dist/tools/bench/decoupled/core_ab.js dist 20000
// The front-ends' share is what perf_analyzer's A/B adds on top (docs/benchmarks.md, decoupled).
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../paths.js';

interface CoreLike {
  infer(req: unknown): Promise<unknown>;
}

const dist = path.resolve(process.argv[2] ?? 'dist');
const count = Number(process.argv[3] ?? 20000);
const load = async (rel: string): Promise<Record<string, unknown>> => import(pathToFileURL(path.join(dist, rel)).href);

const repoDir = mkdtempSync(path.join(os.tmpdir(), 'serval-core-ab-'));
cpSync(path.join(ROOT, 'model_repository', 'simple'), path.join(repoDir, 'simple'), { recursive: true });
const { builtinBackends } = (await load('src/builtin_backends.js')) as { builtinBackends: (o: unknown) => unknown };
const { ModelRepository } = (await load('src/repository/repository.js')) as {
  ModelRepository: new (r: string[], l: unknown, o: unknown) => { loadAll(): Promise<void>; unloadAll(): Promise<void> };
};
const { InferenceCore } = (await load('src/core/server_core.js')) as { InferenceCore: new (r: unknown, o: unknown) => CoreLike };
const { createLogger } = (await load('src/kernel/log.js')) as { createLogger: (v: number, out: (l: string) => void) => unknown };
const log = createLogger(0, () => undefined);
const repo = new ModelRepository([repoDir], log, {
  mode: 'none',
  startupModels: [],
  autoComplete: true,
  backends: builtinBackends({ log, backendConfig: [] }),
});
await repo.loadAll();
const core = new InferenceCore(repo, { id: 'ab', version: '0', strictReadiness: false, extensions: [] });
const data = new Uint8Array(new Int32Array(16).fill(3).buffer);
const request = () => ({
  modelName: 'simple',
  modelVersion: '',
  id: '',
  parameters: {},
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data },
  ],
});
const run = async (n: number): Promise<void> => {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next++ < n) await core.infer(request());
  };
  await Promise.all(Array.from({ length: 16 }, worker));
};
await run(2000); // warm-up
const cpu0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
await run(count);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
const cpu = process.cpuUsage(cpu0);
console.log(
  JSON.stringify({
    dist,
    requests_per_s: Math.round(count / seconds),
    cpu_us_per_request: Number(((cpu.user + cpu.system) / count).toFixed(1)),
  }),
);
await repo.unloadAll();
rmSync(repoDir, { recursive: true, force: true });
process.exit(0);
