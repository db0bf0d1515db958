import { describe, expect, it } from 'vitest';
import { ConfigJsonError, fromTritonConfigJson, toTritonConfigJson } from '../../src/config/config_json.js';
import { parseTextProto } from '../../src/config/pbtxt.js';
import { ModelConfigType } from '../../src/config/schema.js';

const parse = (text: string): Record<string, unknown> => parseTextProto(text, ModelConfigType, 'config.pbtxt');

/** Runs `fn`, asserts it throws a ConfigJsonError, and returns it. */
function jsonError(fn: () => unknown): ConfigJsonError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigJsonError);
    return e as ConfigJsonError;
  }
  throw new Error('expected a ConfigJsonError, but nothing was thrown');
}

// The densenet_onnx config as Triton has it after loading (auto-completed
// fields included), written as config.pbtxt.
const DENSENET_PBTXT = `
name: "densenet_onnx"
platform: "onnxruntime_onnx"
backend: "onnxruntime"
version_policy { latest { num_versions: 1 } }
max_batch_size: 0
input { name: "data_0" data_type: TYPE_FP32 format: FORMAT_NONE dims: [ 1, 3, 224, 224 ] }
output { name: "fc6_1" data_type: TYPE_FP32 dims: [ 1, 1000, 1, 1 ] }
optimization {
  priority: PRIORITY_DEFAULT
  input_pinned_memory { enable: true }
  output_pinned_memory { enable: true }
}
instance_group { name: "densenet_onnx" kind: KIND_CPU count: 2 }
default_model_filename: "model.onnx"
`;

// What Triton 24.03 returned for that model on GET
// /v2/models/densenet_onnx/versions/1/config (a public capture), plus the
// "is_non_linear_format_io" fields that later Triton schemas added to
// ModelInput/ModelOutput.
const DENSENET_TRITON_JSON =
  '{"name":"densenet_onnx","platform":"onnxruntime_onnx","backend":"onnxruntime","runtime":"",' +
  '"version_policy":{"latest":{"num_versions":1}},"max_batch_size":0,' +
  '"input":[{"name":"data_0","data_type":"TYPE_FP32","format":"FORMAT_NONE","dims":[1,3,224,224],' +
  '"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,"is_non_linear_format_io":false}],' +
  '"output":[{"name":"fc6_1","data_type":"TYPE_FP32","dims":[1,1000,1,1],"label_filename":"",' +
  '"is_shape_tensor":false,"is_non_linear_format_io":false}],' +
  '"batch_input":[],"batch_output":[],' +
  '"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},' +
  '"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eager_batching":false},' +
  '"instance_group":[{"name":"densenet_onnx","kind":"KIND_CPU","count":2,"gpus":[],"secondary_devices":[],' +
  '"profile":[],"passive":false,"host_policy":""}],' +
  '"default_model_filename":"model.onnx","cc_model_filenames":{},"metric_tags":{},"parameters":{},"model_warmup":[]}';

describe('toTritonConfigJson', () => {
  it("reproduces Triton's JSON byte for byte, including key order and defaults", () => {
    expect(JSON.stringify(toTritonConfigJson(parse(DENSENET_PBTXT)))).toBe(DENSENET_TRITON_JSON);
  });

  it('prints a present dynamic_batching with all its defaults and numeric 64-bit fields', () => {
    const json = toTritonConfigJson(parse('name: "m"\ndynamic_batching { preferred_batch_size: [ 4 ] }'));
    // As captured from Triton for an equivalent config.
    expect(JSON.stringify(json.dynamic_batching)).toBe(
      '{"preferred_batch_size":[4],"max_queue_delay_microseconds":0,"preserve_ordering":false,' +
        '"priority_levels":0,"default_priority_level":0,"priority_queue_policy":{}}',
    );
    // The other members of the scheduling oneof are unset, hence absent.
    expect(json).not.toHaveProperty('sequence_batching');
    expect(json).not.toHaveProperty('ensemble_scheduling');
  });

  it('omits unset message fields and prints set-but-empty ones', () => {
    const json = toTritonConfigJson(parse('name: "m"\nversion_policy { all {} }\ninput { name: "x" reshape { } }\nresponse_cache { }'));
    expect(json.version_policy).toStrictEqual({ all: {} });
    expect(json).not.toHaveProperty('optimization');
    expect(json).not.toHaveProperty('model_transaction_policy');
    expect(json.response_cache).toStrictEqual({ enable: false });
    expect(json.input).toStrictEqual([
      {
        name: 'x',
        data_type: 'TYPE_INVALID',
        format: 'FORMAT_NONE',
        dims: [],
        reshape: { shape: [] },
        is_shape_tensor: false,
        allow_ragged_batch: false,
        optional: false,
        is_non_linear_format_io: false,
      },
    ]);
  });

  it("applies exactly Triton's int64 fix-ups", () => {
    const cfg = parse(`
name: "m"
version_policy { specific { versions: [ 1, 3 ] } }
input { name: "i" dims: [ -1, 8 ] reshape { shape: [ 8 ] } }
output { name: "o" dims: [ 2 ] reshape { shape: [ 1, 2 ] } }
instance_group { kind: KIND_GPU secondary_devices { kind: KIND_NVDLA device_id: 1 } }
optimization { cuda { graph_spec { batch_size: 2 input { key: "i" value { dim: [ 8 ] } } } } }
dynamic_batching {
  max_queue_delay_microseconds: 100
  priority_levels: 2
  default_priority_level: 1
  default_queue_policy { default_timeout_microseconds: 7 }
  priority_queue_policy { key: 2 value { timeout_action: DELAY default_timeout_microseconds: 9 } }
}
model_warmup { name: "w" batch_size: 1 inputs { key: "i" value { data_type: TYPE_FP32 dims: [ 8 ] zero_data: false } } }
`);
    const json = toTritonConfigJson(cfg);
    expect(json.version_policy).toStrictEqual({ specific: { versions: [1, 3] } });
    expect((json.input as Array<Record<string, unknown>>)[0]).toMatchObject({ dims: [-1, 8], reshape: { shape: [8] } });
    expect((json.output as Array<Record<string, unknown>>)[0]).toMatchObject({ dims: [2], reshape: { shape: [1, 2] } });
    expect(json.dynamic_batching).toStrictEqual({
      preferred_batch_size: [],
      max_queue_delay_microseconds: 100,
      preserve_ordering: false,
      priority_levels: 2,
      default_priority_level: 1,
      default_queue_policy: {
        timeout_action: 'REJECT',
        default_timeout_microseconds: 7,
        allow_timeout_override: false,
        max_queue_size: 0,
      },
      // Map keys stay strings; values are fixed.
      priority_queue_policy: {
        '2': { timeout_action: 'DELAY', default_timeout_microseconds: 9, allow_timeout_override: false, max_queue_size: 0 },
      },
    });
    // Oneof members that are set are printed even when false.
    expect(json.model_warmup).toStrictEqual([
      { name: 'w', batch_size: 1, inputs: { i: { data_type: 'TYPE_FP32', dims: [8], zero_data: false } }, count: 0 },
    ]);
    // Triton does not fix these two, so they keep protobuf's string form.
    expect((json.instance_group as Array<Record<string, unknown>>)[0]?.secondary_devices).toStrictEqual([
      { kind: 'KIND_NVDLA', device_id: '1' },
    ]);
    expect(json.optimization).toMatchObject({
      cuda: { graph_spec: [{ batch_size: 2, input: { i: { dim: ['8'] } } }] },
    });
  });

  it('fixes sequence_batching fields but leaves initial_state dims as strings, like Triton', () => {
    const json = toTritonConfigJson(
      parse(`
name: "seq"
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 4 max_queue_delay_microseconds: 10 preferred_batch_size: [ 2 ] }
  state {
    input_name: "IN" output_name: "OUT" data_type: TYPE_INT32 dims: [ 1 ]
    initial_state { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "zeros" }
  }
}`),
    );
    expect(json.sequence_batching).toStrictEqual({
      oldest: { max_candidate_sequences: 4, preferred_batch_size: [2], max_queue_delay_microseconds: 10, preserve_ordering: false },
      max_sequence_idle_microseconds: 5000000,
      control_input: [],
      state: [
        {
          input_name: 'IN',
          output_name: 'OUT',
          data_type: 'TYPE_INT32',
          dims: [1],
          initial_state: [{ data_type: 'TYPE_INT32', dims: ['1'], zero_data: true, name: 'zeros' }],
          use_same_buffer_for_input_output: false,
          use_growable_memory: false,
        },
      ],
      iterative_sequence: false,
    });
  });

  it('fixes ensemble step model_version and prints maps as objects', () => {
    const json = toTritonConfigJson(
      parse(`
name: "ens" platform: "ensemble"
ensemble_scheduling { step { model_name: "a" model_version: -1 input_map { key: "x" value: "y" } } }
parameters { key: "p" value { string_value: "v" } }`),
    );
    expect(json.ensemble_scheduling).toStrictEqual({
      step: [{ model_name: 'a', model_version: -1, input_map: { x: 'y' }, output_map: {}, model_namespace: '' }],
      max_inflight_requests: 0,
    });
    expect(json.parameters).toStrictEqual({ p: { string_value: 'v' } });
  });

  it('prints float fields at float32 precision and non-finite values as strings', () => {
    const json = toTritonConfigJson(
      parse(`
sequence_batching {
  direct { minimum_slot_utilization: 0.1 }
  control_input { name: "c" control { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1.5, nan, -inf, inf ] } }
}`),
    );
    const seq = json.sequence_batching as Record<string, unknown>;
    expect(seq.direct).toStrictEqual({ max_queue_delay_microseconds: 0, minimum_slot_utilization: 0.1 });
    expect(JSON.stringify(seq.control_input)).toBe(
      '[{"name":"c","control":[{"kind":"CONTROL_SEQUENCE_READY","int32_false_true":[],' +
        '"fp32_false_true":[0,1.5,"NaN","-Infinity","Infinity"],"bool_false_true":[],"data_type":"TYPE_INVALID"}]}]',
    );
  });

  it('rejects internal objects that do not fit the schema', () => {
    expect(jsonError(() => toTritonConfigJson({ name: 'm', bogus: 1 })).path).toBe('bogus');
    expect(jsonError(() => toTritonConfigJson({ input: [{ dims: ['3'] }] })).path).toBe('input[0].dims[0]');
    expect(jsonError(() => toTritonConfigJson({ max_batch_size: 2 ** 31 })).message).toMatch(/out of range for int32/);
    expect(jsonError(() => toTritonConfigJson({ input: [{ data_type: 'FP32' }] })).message).toBe(
      'invalid model config field "input[0].data_type": expected a inference.DataType value name, got string "FP32"',
    );
    expect(jsonError(() => toTritonConfigJson({ dynamic_batching: {}, sequence_batching: {} })).path).toBe('sequence_batching');
  });
});

describe('fromTritonConfigJson', () => {
  it("parses Triton's JSON into the internal form", () => {
    const cfg = fromTritonConfigJson(JSON.parse(DENSENET_TRITON_JSON) as unknown);
    expect(cfg).toMatchObject({
      name: 'densenet_onnx',
      max_batch_size: 0,
      version_policy: { latest: { num_versions: 1 } },
      input: [{ name: 'data_0', data_type: 'TYPE_FP32', dims: [1, 3, 224, 224] }],
      instance_group: [{ kind: 'KIND_CPU', count: 2, gpus: [] }],
    });
    // Fields present in the JSON stay present, even with default values.
    expect(cfg.runtime).toBe('');
    expect(cfg.parameters).toStrictEqual({});
  });

  it('accepts what tritonclient load_model(config=...) may send', () => {
    const text = JSON.stringify({
      name: 'm',
      maxBatchSize: '8',
      input: [{ name: 'x', data_type: 'type_fp32', dims: ['-1', 3], format: 2, reshape: null }],
      dynamic_batching: {
        max_queue_delay_microseconds: '100',
        priority_queue_policy: { '1': { timeout_action: 'delay', default_timeout_microseconds: '18446744073709' } },
      },
      sequence_batching: null,
      instance_group: [{ kind: 'KIND_CPU', secondaryDevices: [{ device_id: '3' }] }],
      parameters: { p: { string_value: 'v' } },
    });
    expect(fromTritonConfigJson(text)).toStrictEqual({
      name: 'm',
      max_batch_size: 8,
      input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [-1, 3], format: 'FORMAT_NCHW' }],
      dynamic_batching: {
        max_queue_delay_microseconds: 100,
        priority_queue_policy: { '1': { timeout_action: 'DELAY', default_timeout_microseconds: 18446744073709 } },
      },
      instance_group: [{ kind: 'KIND_CPU', secondary_devices: [{ device_id: 3 }] }],
      parameters: { p: { string_value: 'v' } },
    });
  });

  it('keeps a "__proto__" map key as data in both directions', () => {
    const cfg = fromTritonConfigJson('{"parameters": {"__proto__": {"string_value": "x"}}}');
    const params = cfg.parameters as Record<string, unknown>;
    expect(Object.getPrototypeOf(params)).toBe(Object.prototype);
    expect(Object.keys(params)).toStrictEqual(['__proto__']);
    expect(JSON.stringify(toTritonConfigJson(cfg).parameters)).toBe('{"__proto__":{"string_value":"x"}}');
  });

  it('rejects bad input with an error naming the field', () => {
    const cases: Array<[unknown, string, RegExp]> = [
      [{ input: [{ name: 'x', foo: 1 }] }, 'input[0].foo', /unknown field in inference\.ModelInput/],
      [{ max_batch_size: 'abc' }, 'max_batch_size', /expected an integer \(int32\), got string "abc"/],
      [{ max_batch_size: 1.5 }, 'max_batch_size', /expected an integer/],
      [{ max_batch_size: 2 ** 31 }, 'max_batch_size', /out of range for int32/],
      [{ input: [{ dims: [3, 2 ** 53] }] }, 'input[0].dims[1]', /not exactly representable/],
      [{ input: [{ dims: ['9223372036854775808'] }] }, 'input[0].dims[0]', /out of range for int64/],
      [{ version_policy: { latest: { num_versions: -1 } } }, 'version_policy.latest.num_versions', /out of range for uint32/],
      [{ input: [{ data_type: 'TYPE_FLOAT' }] }, 'input[0].data_type', /unknown inference\.DataType value "TYPE_FLOAT"/],
      [{ input: { name: 'x' } }, 'input', /expected an array/],
      [{ input: [null] }, 'input[0]', /null is not allowed/],
      [{ dynamic_batching: {}, ensemble_scheduling: {} }, 'ensemble_scheduling', /both set in oneof "scheduling_choice"/],
      [{ max_batch_size: 1, maxBatchSize: 2 }, 'max_batch_size', /given more than once/],
      [
        { dynamic_batching: { priority_queue_policy: { high: {} } } },
        'dynamic_batching.priority_queue_policy["high"]',
        /expected an integer \(uint64\)/,
      ],
      [{ input: [{ optional: 'true' }] }, 'input[0].optional', /expected true or false/],
      [
        { sequence_batching: { direct: { minimum_slot_utilization: 1e39 } } },
        'sequence_batching.direct.minimum_slot_utilization',
        /out of range for float/,
      ],
      [[], '', /expected a JSON object, got an array/],
      ['{"name": ', '', /not valid JSON/],
    ];
    for (const [input, path, reason] of cases) {
      const err = jsonError(() => fromTritonConfigJson(input));
      expect({ input, path: err.path }).toEqual({ input, path });
      expect(err.message).toMatch(reason);
      if (path !== '') expect(err.message).toContain(`"${path}"`);
    }
  });
});

describe('round trip through the JSON form', () => {
  const FULL_PBTXT = `
name: "everything"
platform: "onnxruntime_onnx"
backend: "onnxruntime"
version_policy: { specific: { versions: [ 1, 2 ] } }
max_batch_size: 16
input [
  { name: "IMAGE" data_type: TYPE_UINT8 format: FORMAT_NHWC dims: [ 224, 224, 3 ] },
  { name: "MASK" data_type: TYPE_BOOL dims: [ -1 ] optional: true allow_ragged_batch: true }
]
output [ { name: "PROB" data_type: TYPE_FP32 dims: [ 1000 ] label_filename: "labels.txt" reshape { shape: [ 1, 1000 ] } } ]
batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_INT32 source_input: "MASK" } ]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 500
  priority_levels: 2
  default_priority_level: 1
  priority_queue_policy { key: 2 value { timeout_action: DELAY default_timeout_microseconds: 100000 max_queue_size: 3 } }
}
instance_group [ { name: "g" kind: KIND_GPU count: 2 gpus: [ 0, 1 ] rate_limiter { resources { name: "R" count: 2 } priority: 1 } } ]
parameters { key: "intra_op_thread_count" value: { string_value: "2" } }
metric_tags { key: "team" value: "vision" }
model_warmup [ { name: "w" batch_size: 2 inputs { key: "IMAGE" value { data_type: TYPE_UINT8 dims: [ 224, 224, 3 ] random_data: true } } } ]
model_transaction_policy { decoupled: false }
model_metrics { metric_control { metric_identifier { family: "nv_inference_first_response_histogram_ms" } histogram_options { buckets: [ 1, 2.5, 10 ] } } }
`;

  it('pbtxt -> JSON -> internal -> JSON is stable and keeps every set value', () => {
    const original = parse(FULL_PBTXT);
    const json = toTritonConfigJson(original);
    const wire = JSON.stringify(json);
    const back = fromTritonConfigJson(wire);
    expect(JSON.stringify(toTritonConfigJson(back))).toBe(wire);
    expect(back).toMatchObject(original);
  });

  it('internal -> JSON -> internal keeps int64 values numeric', () => {
    const back = fromTritonConfigJson(toTritonConfigJson(parse(FULL_PBTXT)));
    expect(back.version_policy).toStrictEqual({ specific: { versions: [1, 2] } });
    expect((back.dynamic_batching as Record<string, unknown>).priority_queue_policy).toStrictEqual({
      '2': { timeout_action: 'DELAY', default_timeout_microseconds: 100000, allow_timeout_override: false, max_queue_size: 3 },
    });
  });

  it('round-trips the Triton-captured JSON unchanged', () => {
    expect(JSON.stringify(toTritonConfigJson(fromTritonConfigJson(DENSENET_TRITON_JSON)))).toBe(DENSENET_TRITON_JSON);
  });
});
