// The backend seam: a backend that is not ONNX Runtime (test/helpers/test_backend.ts) plugs in
// through the registry alone, and the core loads, checks, batches and answers through it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onnxRuntimeBackend } from '../../src/backends/onnxruntime/backend.js';
import { BackendRegistry } from '../../src/backends/registry.js';
import { fromI32, i32, range } from '../helpers/tensors.js';
import { executions, testBackend } from '../helpers/test_backend.js';
import { SIMPLE_TEST_MODEL, startTestCore, type TestCore } from '../helpers/test_core.js';

describe('the backend registry', () => {
  const registry = new BackendRegistry([onnxRuntimeBackend, testBackend]);

  it('picks a backend by platform or backend name, ONNX Runtime when a config names neither', () => {
    expect(registry.forConfig({ backend: 'serval_test' }, 'm')).toBe(testBackend);
    expect(registry.forConfig({ platform: 'onnxruntime_onnx' }, 'm')).toBe(onnxRuntimeBackend);
    expect(registry.forConfig({ backend: 'onnxruntime' }, 'm')).toBe(onnxRuntimeBackend);
    expect(registry.forConfig({}, 'm')).toBe(onnxRuntimeBackend);
  });

  it('refuses unknown and contradictory names, listing what it runs', () => {
    expect(() => registry.forConfig({ platform: 'tensorflow_savedmodel' }, 'm')).toThrow(
      `model 'm': unsupported platform 'tensorflow_savedmodel'; Serval runs ONNX and test models only (platform "onnxruntime_onnx" or backend "onnxruntime"; backend "serval_test")`,
    );
    expect(() => new BackendRegistry([onnxRuntimeBackend]).forConfig({ backend: 'python' }, 'm')).toThrow(
      `model 'm': unsupported backend 'python'; Serval runs ONNX models only (platform "onnxruntime_onnx" or backend "onnxruntime")`,
    );
    // Triton's text (ValidateModelConfig), without a space after the colon as Triton writes it.
    expect(() => registry.forConfig({ platform: 'onnxruntime_onnx', backend: 'serval_test' }, 'm')).toThrow(
      "unexpected 'platform' and 'backend' pair, got:onnxruntime_onnx, serval_test",
    );
    expect(() => registry.register(testBackend)).toThrow("backend 'serval_test' is registered twice");
  });
});

describe('a core over the test backend', () => {
  let t: TestCore;
  beforeAll(async () => {
    t = await startTestCore([
      SIMPLE_TEST_MODEL,
      { name: 'no_config_io', config: 'backend: "serval_test"\nmax_batch_size: 4', model: SIMPLE_TEST_MODEL.model },
      {
        name: 'bad_dims',
        config: SIMPLE_TEST_MODEL.config
          .replace('name: "simple"', 'name: "bad_dims"')
          .replace('dims: [ 16 ] }, { name: "INPUT1"', 'dims: [ 8 ] }, { name: "INPUT1"'),
        model: SIMPLE_TEST_MODEL.model,
      },
    ]);
  });
  afterAll(() => t?.close());

  it('serves a model the registry gave to the test backend', async () => {
    const a = range(16);
    const b = range(16, () => 3);
    const res = await t.core.infer({
      modelName: 'simple',
      modelVersion: '',
      id: 'x',
      parameters: {},
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: i32(a) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: i32(b) },
      ],
    });
    expect(res.outputs.map((o) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    const out0 = res.outputs[0]!;
    expect(fromI32(out0.data)).toEqual(a.map((x) => x + 3));
    expect(executions.at(-1)).toEqual(['simple_0_0', [1, 16]]);
  });

  it('auto-completes through the backend and reports the resolved config in Triton JSON form', () => {
    const c = t.core.modelConfig('no_config_io', '') as {
      backend: string;
      input: { name: string; dims: string[] }[];
      instance_group: { name: string; kind: string; count: number }[];
    };
    expect(c.backend).toBe('serval_test');
    expect(c.input.map((i) => i.name)).toEqual(['INPUT0', 'INPUT1']);
    expect(c.instance_group).toMatchObject([{ name: 'no_config_io_0', kind: 'KIND_CPU', count: 1 }]);
  });

  it('checks the config against the signature the backend read, before any instance starts', async () => {
    const rows = await t.core.repositoryIndex(false);
    const row = rows.find((r) => r.name === 'bad_dims');
    expect(row).toMatchObject({ state: 'UNAVAILABLE' });
    expect(row!.reason).toContain(
      "model 'bad_dims', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,16]) but the model configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [-1,8])",
    );
    expect(executions.some(([inst]) => inst.startsWith('bad_dims'))).toBe(false);
  });
});
