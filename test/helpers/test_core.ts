// An in-process core over a temporary model repository served by the test backend: what the
// in-process front-end tests run against (no workers, no ONNX Runtime, no spawned server).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BackendRegistry } from '../../src/backends/registry.js';
import type { ResponseCache } from '../../src/cache/response_cache.js';
import { InferenceCore } from '../../src/core/server_core.js';
import type { Logger } from '../../src/kernel/log.js';
import { type ControlMode, ModelRepository } from '../../src/repository/repository.js';
import type { RateLimiter } from '../../src/scheduler/rate_limiter.js';
import { capturedLogger } from './frontends.js';
import { type TestModelFile, testBackend } from './test_backend.js';

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

/**
 * An identity model on the test backend: OUTPUT0 = INPUT0, of `datatype` and `dims` (a batch
 * dimension before them when `maxBatchSize` > 0). `extraConfig` is appended to its config.pbtxt;
 * `delayMs` makes each execution take that long.
 */
export function identityTestModel(
  name: string,
  datatype: 'INT32' | 'FP32',
  dims: number[],
  maxBatchSize: number,
  opts: { extraConfig?: string; delayMs?: number } = {},
): TestModel {
  const tensor = (t: string) => `[ { name: "${t}" data_type: TYPE_${datatype} dims: [ ${dims.join(', ')} ] } ]`;
  const io = (t: string) => ({ name: t, datatype, rawType: datatype, dims: [...(maxBatchSize > 0 ? [-1] : []), ...dims] });
  return {
    name,
    config: [
      `name: "${name}"`,
      'backend: "serval_test"',
      `max_batch_size: ${maxBatchSize}`,
      `input ${tensor('INPUT0')}`,
      `output ${tensor('OUTPUT0')}`,
    ]
      .concat(opts.extraConfig ?? [])
      .join('\n'),
    model: { op: 'identity', delayMs: opts.delayMs, inputs: [io('INPUT0')], outputs: [io('OUTPUT0')] },
  };
}

export interface TestCore {
  core: InferenceCore;
  dir: string;
  lines: string[];
  log: Logger;
  close(): Promise<void>;
}

export async function startTestCore(
  models: TestModel[] = [SIMPLE_TEST_MODEL],
  opts: {
    mode?: ControlMode;
    strictReadiness?: boolean;
    responseCache?: ResponseCache;
    allowClientShm?: boolean;
    rateLimiter?: RateLimiter;
  } = {},
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
  const { log, lines } = capturedLogger();
  const repository = new ModelRepository([dir], log, {
    mode: opts.mode ?? 'none',
    startupModels: [],
    autoComplete: true,
    backends: new BackendRegistry([testBackend]),
    ...(opts.responseCache && { responseCache: opts.responseCache }),
    ...(opts.rateLimiter && { rateLimiter: opts.rateLimiter }),
  });
  await repository.loadAll();
  const core = new InferenceCore(repository, {
    id: 'serval',
    version: '0.0.0-test',
    strictReadiness: opts.strictReadiness ?? true,
    extensions: ['statistics'],
    // The tests of the shared-memory extension use it; --allow-client-shm's refusal has its own.
    allowClientShm: opts.allowClientShm ?? true,
  });
  return {
    core,
    dir,
    lines,
    log,
    async close() {
      core.stopAccepting();
      await repository.unloadAll();
      await core.unregisterSystemSharedMemory('');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
