// src/backends/onnxruntime/autocomplete.ts: model-config auto-complete from the model file's signature, after
// Triton's ONNX Runtime backend (onnxruntime_backend src/onnxruntime.cc AutoCompleteConfig,
// AutoCompleteMaxBatch, AutoCompleteIO) and the "Default Max Batch Size and Dynamic Batcher"
// section of Triton's model_configuration.md.
import { describe, expect, it } from 'vitest';
import { autoCompleteConfig, DEFAULT_MAX_BATCH_SIZE } from '../../src/backends/onnxruntime/autocomplete.js';
import { type DeviceEnvironment, placeModel } from '../../src/backends/onnxruntime/placement.js';
import { resolveConfig } from '../../src/config/resolve.js';
import type { ResolvedModelConfig } from '../../src/config/resolved.js';
import type { IoSignature, ModelSignature } from '../../src/config/signature.js';
import type { ModelConfig } from '../../src/config/types.js';
import type { DataType } from '../../src/kernel/datatypes.js';
import { expectServalError } from '../helpers/errors.js';
import { resolveForTest } from '../helpers/resolve.js';
import { simpleConfig } from '../helpers/simple.js';

const io = (name: string, datatype: DataType | undefined, dims: number[] | undefined, rawType?: string): IoSignature => ({
  name,
  datatype,
  rawType: rawType ?? (datatype ? datatype.toLowerCase() : 'unknown'),
  dims,
});

/** Triton's "simple" add/sub model as ONNX: INT32 [-1,16] in and out (batchable). */
const SIMPLE: ModelSignature = {
  inputs: [io('INPUT0', 'INT32', [-1, 16]), io('INPUT1', 'INT32', [-1, 16])],
  outputs: [io('OUTPUT0', 'INT32', [-1, 16]), io('OUTPUT1', 'INT32', [-1, 16])],
};

/** Triton's quickstart densenet_onnx: fixed shapes, so it cannot batch. */
const DENSENET: ModelSignature = {
  inputs: [io('data_0', 'FP32', [1, 3, 224, 224])],
  outputs: [io('fc6_1', 'FP32', [1, 1000, 1, 1])],
};

/** Triton's simple_string: BYTES [-1,16] in and out. */
const SIMPLE_STRING: ModelSignature = {
  inputs: [io('INPUT0', 'BYTES', [-1, 16], 'string'), io('INPUT1', 'BYTES', [-1, 16], 'string')],
  outputs: [io('OUTPUT0', 'BYTES', [-1, 16], 'string'), io('OUTPUT1', 'BYTES', [-1, 16], 'string')],
};

/** The message of the INVALID_ARG error auto-complete fails with. */
function autofillError(config: ModelConfig, sig: ModelSignature): string {
  return expectServalError(() => autoCompleteConfig(config, sig), 'INVALID_ARG').message;
}

/** The auto-completed config must go through the server's own resolution and checks. */
function loadable(config: ModelConfig, sig: ModelSignature, folder: string): ResolvedModelConfig {
  return resolveForTest(config, { folderName: folder, signature: sig });
}

describe('no configuration at all (config.pbtxt absent)', () => {
  it('makes a batchable model batch with the default max batch size 4 and dynamic batching', () => {
    const out = autoCompleteConfig({ name: 'simple' }, SIMPLE);
    expect(DEFAULT_MAX_BATCH_SIZE).toBe(4);
    expect(out).toStrictEqual({ ...simpleConfig(4), platform: 'onnxruntime_onnx', backend: 'onnxruntime', dynamic_batching: {} });
    expect(loadable(out, SIMPLE, 'simple').maxBatchSize).toBe(4);
  });

  it('leaves a model with a fixed first dimension non-batching, with its full shapes as dims', () => {
    const out = autoCompleteConfig({}, DENSENET);
    expect(out).toStrictEqual({
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      input: [{ name: 'data_0', data_type: 'TYPE_FP32', dims: [1, 3, 224, 224] }],
      output: [{ name: 'fc6_1', data_type: 'TYPE_FP32', dims: [1, 1000, 1, 1] }],
    });
    expect(out.dynamic_batching).toBeUndefined();
    expect(loadable(out, DENSENET, 'densenet_onnx').maxBatchSize).toBe(0);
  });

  it('needs every input and output to have a variable first dimension to batch', () => {
    const mixed: ModelSignature = {
      inputs: [io('x', 'FP32', [-1, 4])],
      outputs: [io('y', 'FP32', [-1, 4]), io('n', 'INT64', [1])],
    };
    const out = autoCompleteConfig({}, mixed);
    expect(out.max_batch_size).toBeUndefined();
    expect(out.dynamic_batching).toBeUndefined();
    expect(out.input).toStrictEqual([{ name: 'x', data_type: 'TYPE_FP32', dims: [-1, 4] }]);
    expect(out.output).toStrictEqual([
      { name: 'y', data_type: 'TYPE_FP32', dims: [-1, 4] },
      { name: 'n', data_type: 'TYPE_INT64', dims: [1] },
    ]);
    // A rank-0 tensor cannot carry a batch dimension either.
    const scalarOut: ModelSignature = { inputs: [io('x', 'FP32', [-1, 4])], outputs: [io('s', 'FP32', [])] };
    expect(autoCompleteConfig({}, scalarOut).max_batch_size).toBeUndefined();
  });

  it('maps BYTES tensors to TYPE_STRING', () => {
    const out = autoCompleteConfig({}, SIMPLE_STRING);
    expect(out.input).toStrictEqual([
      { name: 'INPUT0', data_type: 'TYPE_STRING', dims: [16] },
      { name: 'INPUT1', data_type: 'TYPE_STRING', dims: [16] },
    ]);
    expect(out.output![0]).toStrictEqual({ name: 'OUTPUT0', data_type: 'TYPE_STRING', dims: [16] });
    loadable(out, SIMPLE_STRING, 'simple_string');
  });

  it('gives a batched tensor with no other dimension dims [1] and an empty reshape', () => {
    // A model taking x of shape [batch] and returning y of shape [batch].
    const sig: ModelSignature = { inputs: [io('x', 'FP32', [-1])], outputs: [io('y', 'FP32', [-1])] };
    const out = autoCompleteConfig({}, sig);
    expect(out.max_batch_size).toBe(4);
    expect(out.input).toStrictEqual([{ name: 'x', data_type: 'TYPE_FP32', dims: [1], reshape: { shape: [] } }]);
    expect(out.output).toStrictEqual([{ name: 'y', data_type: 'TYPE_FP32', dims: [1], reshape: { shape: [] } }]);
    loadable(out, sig, 'm');
  });

  it('gives a scalar of a non-batching model dims [1] without a reshape, as Triton does', () => {
    const sig: ModelSignature = { inputs: [io('x', 'FP32', [])], outputs: [io('y', 'FP32', [2])] };
    const out = autoCompleteConfig({}, sig);
    expect(out.input).toStrictEqual([{ name: 'x', data_type: 'TYPE_FP32', dims: [1] }]);
  });

  it('rejects a tensor whose type has no model-config data type, naming the raw type', () => {
    const sig: ModelSignature = {
      inputs: [io('seq', undefined, undefined, 'non-tensor')],
      outputs: [io('y', 'FP32', [2])],
    };
    expect(autofillError({ name: 'm' }, sig)).toBe(
      "autofill failed for model 'm': input 'seq' of the model file has type 'non-tensor', which has no model-config data type",
    );
  });
});

describe('max_batch_size', () => {
  it('keeps a max_batch_size given in the file and turns on dynamic batching when > 1', () => {
    const out = autoCompleteConfig({ name: 'simple', max_batch_size: 8 }, SIMPLE);
    expect(out.max_batch_size).toBe(8);
    expect(out.dynamic_batching).toStrictEqual({});
    expect(out.input![0]).toStrictEqual({ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] });
  });

  it('does not turn on dynamic batching for max_batch_size 1', () => {
    const out = autoCompleteConfig({ max_batch_size: 1 }, SIMPLE);
    expect(out.max_batch_size).toBe(1);
    expect(out.dynamic_batching).toBeUndefined();
    expect(out.input![0]!.dims).toStrictEqual([16]);
  });

  it('respects max_batch_size: 0 written in the file: no batching, the batch dimension stays in dims', () => {
    // Triton cannot tell this from an absent field; the parser here can.
    const out = autoCompleteConfig({ name: 'simple', max_batch_size: 0 }, SIMPLE);
    expect(out.max_batch_size).toBe(0);
    expect(out.dynamic_batching).toBeUndefined();
    expect(out.input).toStrictEqual([
      { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [-1, 16] },
      { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [-1, 16] },
    ]);
    expect(loadable(out, SIMPLE, 'simple').maxBatchSize).toBe(0);
  });

  it('uses maxBatchSizeDefault (Triton --backend-config=default-max-batch-size) when given', () => {
    const big = autoCompleteConfig({}, SIMPLE, { maxBatchSizeDefault: 16 });
    expect(big.max_batch_size).toBe(16);
    expect(big.dynamic_batching).toStrictEqual({});
    const one = autoCompleteConfig({}, SIMPLE, { maxBatchSizeDefault: 1 });
    expect(one.max_batch_size).toBe(1);
    expect(one.dynamic_batching).toBeUndefined();
    expect(one.input![0]!.dims).toStrictEqual([16]);
    // 0 (or a negative value, clamped to 0) turns batching off; dims keep the batch dimension.
    for (const d of [0, -3]) {
      const off = autoCompleteConfig({}, SIMPLE, { maxBatchSizeDefault: d });
      expect(off.max_batch_size).toBe(0);
      expect(off.dynamic_batching).toBeUndefined();
      expect(off.input![0]!.dims).toStrictEqual([-1, 16]);
    }
  });

  it('keeps an existing dynamic_batching section as written', () => {
    const cfg: ModelConfig = {
      max_batch_size: 8,
      dynamic_batching: { preferred_batch_size: [4, 8], max_queue_delay_microseconds: 100 },
    };
    const out = autoCompleteConfig(cfg, SIMPLE);
    expect(out.dynamic_batching).toStrictEqual({ preferred_batch_size: [4, 8], max_queue_delay_microseconds: 100 });
  });

  it('adds no dynamic_batching when another scheduler is configured', () => {
    const out = autoCompleteConfig({ sequence_batching: { max_sequence_idle_microseconds: 5000000 } }, SIMPLE);
    expect(out.max_batch_size).toBe(4);
    expect(out.dynamic_batching).toBeUndefined();
    expect(out.sequence_batching).toStrictEqual({ max_sequence_idle_microseconds: 5000000 });
  });

  it('fails for a non-zero max_batch_size on a model that cannot batch', () => {
    expect(autofillError({ name: 'densenet_onnx', max_batch_size: 8 }, DENSENET)).toBe(
      "autofill failed for model 'densenet_onnx': model does not support batching while non-zero max_batch_size is specified" +
        " (every input and output of the model file needs a variable first dimension; not so for 'data_0' [1,3,224,224], 'fc6_1' [1,1000,1,1])",
    );
  });
});

describe('configurations that list tensors', () => {
  it('skips auto-complete of max_batch_size and scheduler when inputs and outputs are both listed', () => {
    // Triton's minimal configuration, without max_batch_size: the model is taken as non-batching.
    const cfg: ModelConfig = {
      name: 'simple',
      platform: 'onnxruntime_onnx',
      input: [
        { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [-1, 16] },
        { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [-1, 16] },
      ],
      output: [
        { name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [-1, 16] },
        { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [-1, 16] },
      ],
    };
    const out = autoCompleteConfig(cfg, SIMPLE);
    expect(out).toStrictEqual({ ...cfg, backend: 'onnxruntime' });
    expect(out.max_batch_size).toBeUndefined();
    expect(out.dynamic_batching).toBeUndefined();
    loadable(out, SIMPLE, 'simple');
  });

  it('does not fail for max_batch_size > 0 on a non-batchable model when tensors are listed (validation does)', () => {
    const cfg: ModelConfig = {
      max_batch_size: 8,
      input: [{ name: 'data_0', data_type: 'TYPE_FP32', dims: [3, 224, 224] }],
      output: [{ name: 'fc6_1', data_type: 'TYPE_FP32', dims: [1000, 1, 1] }],
    };
    expect(autoCompleteConfig(cfg, DENSENET).max_batch_size).toBe(8);
  });

  it('counts batch_input as inputs listed', () => {
    const cfg: ModelConfig = {
      batch_input: [{ kind: 'BATCH_ELEMENT_COUNT', target_name: ['INPUT0'], data_type: 'TYPE_FP32', source_input: ['x'] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [-1, 16] }],
    };
    const out = autoCompleteConfig(cfg, SIMPLE);
    expect(out.input).toBeUndefined();
    expect(out.max_batch_size).toBeUndefined();
  });

  it('with only inputs listed, completes max_batch_size and the outputs and keeps the inputs as written', () => {
    const cfg: ModelConfig = {
      name: 'simple',
      input: [
        { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16], optional: false },
        { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [-1] },
      ],
    };
    const out = autoCompleteConfig(cfg, SIMPLE);
    expect(out.max_batch_size).toBe(4);
    expect(out.dynamic_batching).toStrictEqual({});
    expect(out.input).toStrictEqual(cfg.input);
    expect(out.output).toStrictEqual([
      { name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] },
      { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] },
    ]);
    loadable(out, SIMPLE, 'simple');
  });

  it('with only outputs listed, completes the inputs', () => {
    const cfg: ModelConfig = { max_batch_size: 2, output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] }] };
    const out = autoCompleteConfig(cfg, SIMPLE);
    expect(out.max_batch_size).toBe(2);
    expect(out.input!.map((t) => t.name)).toStrictEqual(['INPUT0', 'INPUT1']);
    expect(out.output).toStrictEqual(cfg.output);
  });

  it('replaces an empty input list', () => {
    const out = autoCompleteConfig({ input: [], output: [] }, SIMPLE);
    expect(out.input).toHaveLength(2);
    expect(out.output).toHaveLength(2);
  });

  it('fills a missing data_type or dims of a listed tensor, never what the user wrote', () => {
    const cfg: ModelConfig = {
      max_batch_size: 8,
      input: [
        { name: 'INPUT0', dims: [16] }, // data_type missing
        { name: 'INPUT1', data_type: 'TYPE_INT32' }, // dims missing
      ],
      output: [
        { name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4, 4] }, // wrong, but the user's
        { name: 'OUTPUT1' }, // both missing
        { name: 'NOT_IN_MODEL' }, // left for validation to report
      ],
    };
    const out = autoCompleteConfig(cfg, SIMPLE);
    expect(out.input).toStrictEqual([
      { name: 'INPUT0', dims: [16], data_type: 'TYPE_INT32' },
      { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] },
    ]);
    expect(out.output).toStrictEqual([
      { name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4, 4] },
      { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] },
      { name: 'NOT_IN_MODEL' },
    ]);
  });

  it('fills missing dims of a listed tensor with the full shape when the model does not batch', () => {
    const cfg: ModelConfig = {
      input: [{ name: 'data_0', data_type: 'TYPE_FP32' }],
      output: [{ name: 'fc6_1', data_type: 'TYPE_FP32', dims: [1, 1000, 1, 1] }],
    };
    const out = autoCompleteConfig(cfg, DENSENET);
    expect(out.input).toStrictEqual([{ name: 'data_0', data_type: 'TYPE_FP32', dims: [1, 3, 224, 224] }]);
    loadable(out, DENSENET, 'densenet_onnx');
  });

  it('does not invent dims for a listed tensor that has a reshape', () => {
    const cfg: ModelConfig = {
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', reshape: { shape: [16] } }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] }],
    };
    expect(autoCompleteConfig(cfg, SIMPLE).input).toStrictEqual(cfg.input);
  });
});

describe('platform and backend', () => {
  it('fills the one that is missing for ONNX and leaves others for validation', () => {
    expect(autoCompleteConfig({ backend: 'onnxruntime' }, SIMPLE)).toMatchObject({ platform: 'onnxruntime_onnx', backend: 'onnxruntime' });
    expect(autoCompleteConfig({ platform: 'onnxruntime_onnx' }, SIMPLE)).toMatchObject({
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
    });
    const tf = autoCompleteConfig({ platform: 'tensorflow_savedmodel' }, SIMPLE);
    expect(tf.platform).toBe('tensorflow_savedmodel');
    expect(tf.backend).toBeUndefined();
  });
});

describe('purity', () => {
  it('returns a new object and leaves its arguments untouched', () => {
    const cfg: ModelConfig = {
      name: 'simple',
      input: [{ name: 'INPUT0', data_type: 'TYPE_INT32' }],
      parameters: { intra_op_thread_count: { string_value: '1' } },
    };
    const before = structuredClone(cfg);
    const sigBefore = structuredClone(SIMPLE);
    const out = autoCompleteConfig(cfg, SIMPLE);
    expect(out).not.toBe(cfg);
    expect(out.input).not.toBe(cfg.input);
    expect(out.parameters).not.toBe(cfg.parameters);
    expect(cfg).toStrictEqual(before);
    expect(SIMPLE).toStrictEqual(sigBefore);
    // Changing the result does not reach the input either.
    out.input![0]!.dims!.push(99);
    expect(cfg).toStrictEqual(before);
  });
});

describe("the config JSON of an auto-completed ONNX model, as GET /v2/models/<m>/config prints it, next to Triton's", () => {
  const CPU_ONLY: DeviceEnvironment = { gpus: [], cudaProvider: false, cudaProviderPath: '/ort/cuda.so', cpus: 4 };
  /** Auto-complete, then resolve with the ONNX Runtime backend's real instance placement on a CPU-only machine. */
  const configJson = (config: ModelConfig, sig: ModelSignature): string =>
    JSON.stringify(
      resolveConfig(autoCompleteConfig(config, sig), {
        folderName: config.name!,
        backend: {
          name: 'onnxruntime',
          platforms: ['onnxruntime_onnx'],
          defaultModelFilename: 'model.onnx',
          placeInstances: (c) => placeModel(c, CPU_ONLY),
        },
        signature: sig,
        labels: new Map(),
      }).json,
    );
  // Triton's tail for every non-ensemble model: NormalizeModelConfig's pinned-memory block, the
  // instance group named after the model, the ONNX file name, and the empty maps and lists.
  const optimization =
    '"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},' +
    '"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eager_batching":false}';
  // Triton's CPU group has count 2 (SetDefaultInstanceCount); Serval's 1 is a listed difference (docs/config_checks.md).
  const tail = (m: string): string =>
    `${optimization},"instance_group":[{"name":"${m}","kind":"KIND_CPU","count":1,"gpus":[],"secondary_devices":[],` +
    '"profile":[],"passive":false,"host_policy":""}],' +
    '"default_model_filename":"model.onnx","cc_model_filenames":{},"metric_tags":{},"parameters":{},"model_warmup":[]}';
  const input = (name: string, type: string, dims: number[]): string =>
    `{"name":"${name}","data_type":"${type}","format":"FORMAT_NONE","dims":[${dims}],` +
    '"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_linear_format_io":false}';
  const output = (name: string, type: string, dims: number[]): string =>
    `{"name":"${name}","data_type":"${type}","dims":[${dims}],"label_filename":"","is_shape_tensor":false,"is_non_linear_format_io":false}`;
  const head = (m: string): string =>
    `{"name":"${m}","platform":"onnxruntime_onnx","backend":"onnxruntime","runtime":"","version_policy":{"latest":{"num_versions":1}},`;

  it('a model without config.pbtxt that cannot batch (Triton 24.03 capture of densenet_onnx)', () => {
    expect(configJson({ name: 'densenet_onnx' }, DENSENET)).toBe(
      `${head('densenet_onnx')}"max_batch_size":0,` +
        `"input":[${input('data_0', 'TYPE_FP32', [1, 3, 224, 224])}],"output":[${output('fc6_1', 'TYPE_FP32', [1, 1000, 1, 1])}],` +
        `"batch_input":[],"batch_output":[],${tail('densenet_onnx')}`,
    );
  });

  it('a model without config.pbtxt that can batch: max_batch_size 4 and the dynamic batcher, in proto order', () => {
    expect(configJson({ name: 'simple' }, SIMPLE)).toBe(
      `${head('simple')}"max_batch_size":4,` +
        `"input":[${input('INPUT0', 'TYPE_INT32', [16])},${input('INPUT1', 'TYPE_INT32', [16])}],` +
        `"output":[${output('OUTPUT0', 'TYPE_INT32', [16])},${output('OUTPUT1', 'TYPE_INT32', [16])}],` +
        `"batch_input":[],"batch_output":[],${optimization},` +
        '"dynamic_batching":{"preferred_batch_size":[4],"max_queue_delay_microseconds":0,"preserve_ordering":false,' +
        `"priority_levels":0,"default_priority_level":0,"priority_queue_policy":{}},${tail('simple').slice(optimization.length + 1)}`,
    );
  });

  it('a partial config keeps what it says (its own optimization and group names) and completes the rest', () => {
    const json = JSON.parse(
      configJson(
        {
          name: 'simple',
          max_batch_size: 8,
          input: [
            { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] },
            { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] },
          ],
          optimization: { input_pinned_memory: { enable: false } },
          instance_group: [{ kind: 'KIND_CPU' }, { name: 'mine', kind: 'KIND_CPU', count: 2 }],
        },
        SIMPLE,
      ),
    ) as Record<string, unknown>;
    expect((json.output as { name: string }[]).map((o) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    expect(json.optimization).toEqual({
      priority: 'PRIORITY_DEFAULT',
      input_pinned_memory: { enable: false },
      output_pinned_memory: { enable: true },
      gather_kernel_buffer_threshold: 0,
      eager_batching: false,
    });
    expect((json.instance_group as { name: string; count: number }[]).map((g) => [g.name, g.count])).toEqual([
      ['simple_0', 1],
      ['mine', 2],
    ]);
    expect(json.dynamic_batching).toMatchObject({ preferred_batch_size: [8] });
  });
});
