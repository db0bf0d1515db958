// Which shared worker a small ONNX Runtime instance goes to, and the settings that control sharing.
import { describe, expect, it } from 'vitest';
import { chooseSharedWorker, parseSharing, threadCounts } from '../../src/backends/onnxruntime/placement.js';
import { builtinBackends } from '../../src/builtin_backends.js';

const load = (sessions: number, ...models: string[]) => ({ sessions, models: new Set(models) });

describe('chooseSharedWorker', () => {
  it('takes the least loaded slot, an empty slot counting as no sessions, ties to the first', () => {
    expect(chooseSharedWorker([undefined, undefined], 'm')).toBe(0);
    expect(chooseSharedWorker([load(1, 'a'), undefined], 'm')).toBe(1);
    expect(chooseSharedWorker([load(3, 'a'), load(2, 'b'), load(2, 'c')], 'm')).toBe(1);
    expect(chooseSharedWorker([load(0), load(0)], 'm')).toBe(0);
  });

  it('never puts two instances of one model on a worker; none left means a worker of its own', () => {
    expect(chooseSharedWorker([load(1, 'm'), load(5, 'a')], 'm')).toBe(1);
    expect(chooseSharedWorker([load(1, 'm'), undefined], 'm')).toBe(1);
    expect(chooseSharedWorker([load(1, 'm'), load(1, 'm', 'a')], 'm')).toBeUndefined();
    expect(chooseSharedWorker([], 'm')).toBeUndefined();
  });
});

describe('sharing settings', () => {
  it('defaults: one shared worker per core, models up to 256 KiB share', () => {
    expect(parseSharing(undefined, 4)).toEqual({ sharedWorkers: 4, sharedModelMaxBytes: 262144 });
    expect(parseSharing(new Map(), 1)).toEqual({ sharedWorkers: 1, sharedModelMaxBytes: 262144 });
  });

  it('reads shared-workers and shared-model-max-bytes; leaves the ORT backend’s other keys alone', () => {
    const m = new Map([
      ['shared-workers', '0'],
      ['shared-model-max-bytes', '1048576'],
      ['enable-global-threadpool', '1'],
    ]);
    expect(parseSharing(m, 2)).toEqual({ sharedWorkers: 0, sharedModelMaxBytes: 1048576 });
  });

  it('refuses a value that is not a non-negative integer, naming it', () => {
    for (const bad of ['-1', '1.5', 'x', '']) {
      expect(() => parseSharing(new Map([['shared-workers', bad]]), 2)).toThrow(
        `--backend-config: onnxruntime,shared-workers must be a non-negative integer, got '${bad}'`,
      );
    }
    expect(() => builtinBackends({ backendConfig: ['onnxruntime,shared-model-max-bytes=big'] })).toThrow('shared-model-max-bytes');
    expect(() => builtinBackends({ backendConfig: ['onnxruntime,shared-workers=3'] })).not.toThrow();
  });

  it('a shared session gets one intra-op thread unless the model asks for more', () => {
    expect(threadCounts(undefined, 1, 8).sharedIntraOpThreads).toBe(1);
    expect(threadCounts({ intra_op_thread_count: { string_value: '3' } }, 1, 8).sharedIntraOpThreads).toBe(3);
  });
});
