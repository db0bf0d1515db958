// src/backends/onnxruntime/placement.ts: instance_group expansion and thread counts.
import { describe, expect, it } from 'vitest';
import { type DeviceEnvironment, placeInstances, threadCounts } from '../../src/backends/onnxruntime/placement.js';
import { expectServalError } from '../helpers/errors.js';

const CPU_ONLY: DeviceEnvironment = { gpus: [], cudaProvider: false, cudaProviderPath: '/ort/libonnxruntime_providers_cuda.so', cpus: 8 };
const GPUS_NO_CUDA: DeviceEnvironment = { ...CPU_ONLY, gpus: [0, 1] };
const GPUS: DeviceEnvironment = { ...CPU_ONLY, gpus: [0, 1, 2], cudaProvider: true };

describe('placeInstances', () => {
  it('no instance_group: one instance, on the CPU when there is no usable GPU', () => {
    for (const groups of [undefined, []]) {
      // Triton names the group it adds after the model, and its instance <group>_0.
      expect(placeInstances('m', groups, CPU_ONLY)).toEqual([{ name: 'm_0', kind: 'KIND_CPU', deviceId: -1 }]);
    }
  });

  it('KIND_CPU gives `count` instances named <group>_<index>', () => {
    expect(placeInstances('m', [{ name: 'grp', kind: 'KIND_CPU', count: 3 }], GPUS)).toEqual([
      { name: 'grp_0', kind: 'KIND_CPU', deviceId: -1 },
      { name: 'grp_1', kind: 'KIND_CPU', deviceId: -1 },
      { name: 'grp_2', kind: 'KIND_CPU', deviceId: -1 },
    ]);
  });

  it('count defaults to 1, group names default to <model>_<group index>', () => {
    expect(placeInstances('m', [{ kind: 'KIND_CPU' }, { kind: 'KIND_CPU', count: 2 }], CPU_ONLY).map((p) => p.name)).toEqual([
      'm_0_0',
      'm_1_0',
      'm_1_1',
    ]);
  });

  it('KIND_GPU puts `count` instances on each listed GPU', () => {
    expect(placeInstances('m', [{ name: 'g', kind: 'KIND_GPU', count: 2, gpus: [2, 0] }], GPUS)).toEqual([
      { name: 'g_0_gpu2', kind: 'KIND_GPU', deviceId: 2 },
      { name: 'g_1_gpu2', kind: 'KIND_GPU', deviceId: 2 },
      { name: 'g_0_gpu0', kind: 'KIND_GPU', deviceId: 0 },
      { name: 'g_1_gpu0', kind: 'KIND_GPU', deviceId: 0 },
    ]);
  });

  it('KIND_GPU without gpus uses every visible GPU', () => {
    const p = placeInstances('m', [{ kind: 'KIND_GPU', count: 1 }], GPUS);
    expect(p.map((x) => x.deviceId)).toEqual([0, 1, 2]);
    expect(p.every((x) => x.kind === 'KIND_GPU')).toBe(true);
  });

  it("KIND_GPU on a machine without GPUs: Triton's text, then where Serval looked", () => {
    const e = expectServalError(() => placeInstances('m', [{ name: 'g', kind: 'KIND_GPU' }], CPU_ONLY));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toMatch(/^instance group g of model m has kind KIND_GPU but no GPUs are available \(nvidia-smi found none/);
    expect(e.message).toContain('use KIND_CPU or KIND_AUTO to run on the CPU');
  });

  it('KIND_GPU with GPUs but without the CUDA execution provider names the provider and where it was looked for', () => {
    const e = expectServalError(() => placeInstances('m', [{ name: 'g', kind: 'KIND_GPU' }], GPUS_NO_CUDA));
    expect(e.code).toBe('UNAVAILABLE');
    expect(e.message).toContain("ONNX Runtime's CUDA execution provider is not installed");
    expect(e.message).toContain('/ort/libonnxruntime_providers_cuda.so is missing');
  });

  it('KIND_AUTO: GPU instances when a usable GPU exists, else CPU', () => {
    expect(placeInstances('m', [{ kind: 'KIND_AUTO', count: 2 }], GPUS_NO_CUDA)).toEqual([
      { name: 'm_0_0', kind: 'KIND_CPU', deviceId: -1 },
      { name: 'm_0_1', kind: 'KIND_CPU', deviceId: -1 },
    ]);
    const gpu = placeInstances('m', [{ kind: 'KIND_AUTO' }], GPUS);
    expect(gpu.map((p) => [p.kind, p.deviceId])).toEqual([
      ['KIND_GPU', 0],
      ['KIND_GPU', 1],
      ['KIND_GPU', 2],
    ]);
    expect(placeInstances('m', undefined, GPUS)).toHaveLength(3);
  });

  it("a GPU id that is not visible is an error with Triton's text", () => {
    const e = expectServalError(() => placeInstances('m', [{ name: 'g', kind: 'KIND_GPU', gpus: [0, 5] }], GPUS));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe(
      'instance group g of model m specifies invalid or unsupported gpu id 5. GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: 0, 1, 2',
    );
  });

  it('KIND_CPU with gpus, KIND_MODEL, and bad counts are errors', () => {
    expect(expectServalError(() => placeInstances('m', [{ name: 'g', kind: 'KIND_CPU', gpus: [0] }], GPUS)).message).toBe(
      'instance group g of model m has kind KIND_CPU but specifies one or more GPUs',
    );
    const model = expectServalError(() => placeInstances('m', [{ name: 'g', kind: 'KIND_MODEL' }], GPUS));
    expect(model.code).toBe('UNSUPPORTED');
    expect(model.message).toContain('KIND_MODEL');
    expect(expectServalError(() => placeInstances('m', [{ name: 'g', kind: 'KIND_CPU', count: -1 }], CPU_ONLY)).message).toBe(
      "instance group 'g' of model 'm' has invalid count -1",
    );
    expect(expectServalError(() => placeInstances('m', [{ kind: 'KIND_CPU', count: 0 }], CPU_ONLY)).message).toBe(
      "model 'm' has no model instances (every instance group has count 0)",
    );
  });

  it('a count-0 group next to a real one is fine', () => {
    expect(
      placeInstances(
        'm',
        [
          { kind: 'KIND_CPU', count: 0 },
          { kind: 'KIND_CPU', count: 1 },
        ],
        CPU_ONLY,
      ),
    ).toEqual([{ name: 'm_1_0', kind: 'KIND_CPU', deviceId: -1 }]);
  });
});

describe('threadCounts', () => {
  it('divides the cores among the CPU instances by default, at least 1 each; 1 inter-op thread', () => {
    expect(threadCounts(undefined, 1, 8)).toMatchObject({ intraOpThreads: 8, interOpThreads: 1 });
    expect(threadCounts(undefined, 2, 8)).toMatchObject({ intraOpThreads: 4, interOpThreads: 1 });
    expect(threadCounts(undefined, 3, 8)).toMatchObject({ intraOpThreads: 2, interOpThreads: 1 });
    expect(threadCounts(undefined, 16, 8)).toMatchObject({ intraOpThreads: 1, interOpThreads: 1 });
    expect(threadCounts({}, 0, 2)).toMatchObject({ intraOpThreads: 2, interOpThreads: 1 });
  });

  it('the model parameters override; 0 or empty means the default', () => {
    const p = (intra: string, inter: string) => ({
      intra_op_thread_count: { string_value: intra },
      inter_op_thread_count: { string_value: inter },
    });
    expect(threadCounts(p('3', '2'), 4, 8)).toMatchObject({ intraOpThreads: 3, interOpThreads: 2 });
    expect(threadCounts(p('0', '0'), 4, 8)).toMatchObject({ intraOpThreads: 2, interOpThreads: 1 });
    expect(threadCounts(p('', ''), 1, 8)).toMatchObject({ intraOpThreads: 8, interOpThreads: 1 });
  });

  it('turns ORT intra-op spinning off unless session.intra_op.allow_spinning is 1', () => {
    const spin = (v: string) => ({ 'session.intra_op.allow_spinning': { string_value: v } });
    expect(threadCounts(undefined, 1, 2).allowSpinning).toBe(false);
    expect(threadCounts(spin('1'), 1, 2).allowSpinning).toBe(true);
    expect(threadCounts(spin('0'), 1, 2).allowSpinning).toBe(false);
    expect(() => threadCounts(spin('yes'), 1, 2)).toThrow("parameter 'session.intra_op.allow_spinning' must be '0' or '1', got 'yes'");
  });

  it('rejects a parameter that is not a non-negative integer', () => {
    for (const bad of ['abc', '-1', '1.5']) {
      expect(() => threadCounts({ intra_op_thread_count: { string_value: bad } }, 1, 8)).toThrow(
        `parameter 'intra_op_thread_count' must be a non-negative integer, got '${bad}'`,
      );
    }
  });
});
