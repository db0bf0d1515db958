// An in-process core over a temporary model repository served by the test backend: what the
// in-process front-end tests run against (no workers, no ONNX Runtime, no spawned server).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BackendRegistry } from '../../src/backends/registry.js';
import { InferenceCore } from '../../src/core/server_core.js';
import { createLogger, type Logger } from '../../src/kernel/log.js';
import { ModelRepository, type ControlMode } from '../../src/repository/repository.js';
import { testBackend, type TestModelFile } from './test_backend.js';

export interface TestModel {
  name: string;
  /** config.pbtxt text; the test backend is named for you when it names none. */
  config: string;
  model: TestModelFile;
  versions?: number[];
  files?: Record<string, string>;
}

/** Triton's "simple": INT32 [16] + [16] → sum and difference, max_batch_size 8. */
export const SIMPLE_TEST_MODEL: TestModel = {
  name: 'simple',
  config: `name: "simple"
backend: "serval_test"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
  model: {
    op: 'add_sub',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', rawType: 'INT32', dims: [-1, 16] },
      { name: 'INPUT1', datatype: 'INT32', rawType: 'INT32', dims: [-1, 16] },
    ],
    outputs: [
      { name: 'OUTPUT0', datatype: 'INT32', rawType: 'INT32', dims: [-1, 16] },
      { name: 'OUTPUT1', datatype: 'INT32', rawType: 'INT32', dims: [-1, 16] },
    ],
  },
};

export interface TestCore {
  core: InferenceCore;
  dir: string;
  lines: string[];
  log: Logger;
  close(): Promise<void>;
}

export async function startTestCore(
  models: TestModel[] = [SIMPLE_TEST_MODEL],
  opts: { mode?: ControlMode; strictReadiness?: boolean } = {},
): Promise<TestCore> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-core-'));
  for (const m of models) {
    const md = path.join(dir, m.name);
    for (const v of m.versions ?? [1]) {
      mkdirSync(path.join(md, String(v)), { recursive: true });
      writeFileSync(path.join(md, String(v), 'model.json'), JSON.stringify(m.model));
    }
    writeFileSync(path.join(md, 'config.pbtxt'), m.config);
    for (const [f, text] of Object.entries(m.files ?? {})) writeFileSync(path.join(md, f), text);
  }
  const lines: string[] = [];
  const log = createLogger(0, (l) => lines.push(l));
  const repository = new ModelRepository([dir], log, {
    mode: opts.mode ?? 'none',
    startupModels: [],
    autoComplete: true,
    backends: new BackendRegistry([testBackend]),
  });
  await repository.loadAll();
  const core = new InferenceCore(repository, { id: 'serval', version: '0.0.0-test', strictReadiness: opts.strictReadiness ?? true, extensions: ['statistics'] });
  return {
    core,
    dir,
    lines,
    log,
    async close() {
      core.stopAccepting();
      await repository.unloadAll();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
