import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { PbtxtError, parseModelConfigText, parseTextProto } from '../../src/config/pbtxt.js';
import { ModelConfigType, roundToFloat32 } from '../../src/config/schema.js';

const parse = (text: string): Record<string, unknown> => parseTextProto(text, ModelConfigType, 'config.pbtxt');

/** Runs `fn`, asserts it throws a PbtxtError, and returns it. */
function pbtxtError(fn: () => unknown): PbtxtError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(PbtxtError);
    return e as PbtxtError;
  }
  throw new Error('expected a PbtxtError, but nothing was thrown');
}

function expectError(text: string, line: number, column: number, reason: RegExp): PbtxtError {
  const err = pbtxtError(() => parse(text));
  expect({ line: err.line, column: err.column, file: err.file }).toEqual({ line, column, file: 'config.pbtxt' });
  expect(err.reason).toMatch(reason);
  expect(err.message).toBe(`config.pbtxt:${line}:${column}: ${err.reason}`);
  return err;
}

describe('parseTextProto: Triton example configs', () => {
  it('parses the "simple" example (repeated messages in a list)', () => {
    const text = `
name: "simple"
platform: "tensorflow_graphdef"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
`;
    expect(parse(text)).toStrictEqual({
      name: 'simple',
      platform: 'tensorflow_graphdef',
      max_batch_size: 8,
      input: [
        { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] },
        { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] },
      ],
      output: [
        { name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] },
        { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] },
      ],
    });
  });

  it('parses densenet_onnx with format, reshape and label_filename', () => {
    const text = `name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size : 0
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
    reshape { shape: [ 1, 3, 224, 224 ] }
  }
]
output [
  {
    name: "fc6_1"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    reshape { shape: [ 1, 1000, 1, 1 ] }
    label_filename: "densenet_labels.txt"
  }
]
`;
    const cfg = parseModelConfigText(text);
    expect(cfg.max_batch_size).toBe(0);
    expect(cfg.input).toStrictEqual([
      {
        name: 'data_0',
        data_type: 'TYPE_FP32',
        format: 'FORMAT_NCHW',
        dims: [3, 224, 224],
        reshape: { shape: [1, 3, 224, 224] },
      },
    ]);
    expect(cfg.output?.[0]).toStrictEqual({
      name: 'fc6_1',
      data_type: 'TYPE_FP32',
      dims: [1000],
      reshape: { shape: [1, 1000, 1, 1] },
      label_filename: 'densenet_labels.txt',
    });
  });

  it('parses dynamic_batching with queue policies and a priority_queue_policy map', () => {
    const text = `
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy {
    timeout_action: DELAY
    default_timeout_microseconds: 5000
    allow_timeout_override: true
    max_queue_size: 10
  }
  priority_queue_policy {
    key: 1
    value: { timeout_action: REJECT default_timeout_microseconds: 1000 max_queue_size: 4 }
  }
  priority_queue_policy [ { key: 3 value { timeout_action: DELAY } } ]
  priority_queue_policy: { value { max_queue_size: 7 } }
}`;
    expect(parse(text)).toStrictEqual({
      dynamic_batching: {
        preferred_batch_size: [4, 8],
        max_queue_delay_microseconds: 100,
        preserve_ordering: true,
        priority_levels: 3,
        default_priority_level: 2,
        default_queue_policy: {
          timeout_action: 'DELAY',
          default_timeout_microseconds: 5000,
          allow_timeout_override: true,
          max_queue_size: 10,
        },
        priority_queue_policy: {
          '1': { timeout_action: 'REJECT', default_timeout_microseconds: 1000, max_queue_size: 4 },
          '3': { timeout_action: 'DELAY' },
          // An entry without "key" gets the key type's default.
          '0': { max_queue_size: 7 },
        },
      },
    });
  });

  it('parses instance groups with gpus, kinds and secondary devices', () => {
    const text = `
instance_group [
  { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] },
  { name: "cpu_group" count: 1 kind: KIND_CPU },
  {
    kind: KIND_GPU
    gpus: 2
    gpus: 3
    secondary_devices [ { kind: KIND_NVDLA device_id: 1 } ]
    profile: [ "0", "1" ]
  }
]`;
    const cfg = parseModelConfigText(text);
    expect(cfg.instance_group).toStrictEqual([
      { count: 2, kind: 'KIND_GPU', gpus: [0, 1] },
      { name: 'cpu_group', count: 1, kind: 'KIND_CPU' },
      {
        kind: 'KIND_GPU',
        gpus: [2, 3],
        secondary_devices: [{ kind: 'KIND_NVDLA', device_id: 1 }],
        profile: ['0', '1'],
      },
    ]);
  });

  it('parses every version_policy choice', () => {
    expect(parse('version_policy: { specific: { versions: [1, 3] } }')).toStrictEqual({
      version_policy: { specific: { versions: [1, 3] } },
    });
    expect(parse('version_policy { latest { num_versions: 2 } }')).toStrictEqual({
      version_policy: { latest: { num_versions: 2 } },
    });
    expect(parse('version_policy: { all { } }')).toStrictEqual({ version_policy: { all: {} } });
    expect(parse('version_policy <all: <>>')).toStrictEqual({ version_policy: { all: {} } });
  });

  it('parses the parameters map in its different spellings', () => {
    const text = `
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }
parameters: {
  key: "intra_op_thread_count"
  value: { string_value: "4" }
}
parameters [ { key: "empty" value {} }, { key: "novalue" } ]
cc_model_filenames { key: "7.5" value: "model_sm75.plan" }
`;
    expect(parse(text)).toStrictEqual({
      parameters: {
        EXECUTION_ENV_PATH: { string_value: '$$TRITON_MODEL_DIRECTORY/env.tar.gz' },
        intra_op_thread_count: { string_value: '4' },
        empty: {},
        novalue: {},
      },
      cc_model_filenames: { '7.5': 'model_sm75.plan' },
    });
  });

  it('parses model_warmup with an inputs map and oneof data sources', () => {
    const text = `
model_warmup [
  {
    name : "regular sample"
    batch_size: 1
    inputs {
      key: "INPUT0"
      value: {
        data_type: TYPE_FP32
        dims: [ 16 ]
        zero_data: true
      }
    }
    inputs {
      key: "INPUT1"
      value: { data_type: TYPE_STRING dims: 2 input_data_file: "raw_string_data" }
    }
  },
  { name: "random" batch_size: 4 count: 2 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [16] random_data: false } } }
]`;
    expect(parse(text)).toStrictEqual({
      model_warmup: [
        {
          name: 'regular sample',
          batch_size: 1,
          inputs: {
            INPUT0: { data_type: 'TYPE_FP32', dims: [16], zero_data: true },
            INPUT1: { data_type: 'TYPE_STRING', dims: [2], input_data_file: 'raw_string_data' },
          },
        },
        {
          name: 'random',
          batch_size: 4,
          count: 2,
          inputs: { INPUT0: { data_type: 'TYPE_FP32', dims: [16], random_data: false } },
        },
      ],
    });
  });

  it('parses an ensemble with input_map/output_map and a negative int64', () => {
    const text = `
name: "ensemble"
platform: "ensemble"
ensemble_scheduling {
  step [
    {
      model_name: "pre"
      model_version: -1
      input_map { key: "RAW" value: "IMAGE" }
      output_map { key: "OUT" value: "preprocessed" }
    }
  ]
}`;
    expect(parse(text).ensemble_scheduling).toStrictEqual({
      step: [{ model_name: 'pre', model_version: -1, input_map: { RAW: 'IMAGE' }, output_map: { OUT: 'preprocessed' } }],
    });
  });
});

describe('parseTextProto: lexical and value syntax', () => {
  it('accepts comments, separators, <> delimiters and optional colons', () => {
    const text = `# leading comment
name: "m"; platform: "p",   # trailing comment
input < name: "a"; data_type: TYPE_FP32, dims: [1] >,
input: { name: "b" data_type: TYPE_FP32 dims: 2 };
optimization: < input_pinned_memory < enable: true > >
`;
    expect(parse(text)).toStrictEqual({
      name: 'm',
      platform: 'p',
      input: [
        { name: 'a', data_type: 'TYPE_FP32', dims: [1] },
        { name: 'b', data_type: 'TYPE_FP32', dims: [2] },
      ],
      optimization: { input_pinned_memory: { enable: true } },
    });
  });

  it('decodes quotes, C escapes, unicode and adjacent-string concatenation', () => {
    const cfg = parse(String.raw`name: 'it\'s' " \"q\"" '\x41\101\n\t\\\?\a'
platform: "caf\u00e9 ☕ \U0001F600"
backend: ""`);
    expect(cfg.name).toBe('it\'s "q"AA\n\t\\?\x07');
    expect(cfg.platform).toBe('café ☕ 😀');
    expect(cfg.backend).toBe('');
  });

  it('parses integers in decimal, hex and octal, and negative values', () => {
    const cfg = parse('max_batch_size: 0x10\ninstance_group { count: 010 gpus: [ 0, 0X1F, -0 ] }\ninput { dims: [ -1, 3 ] }');
    expect(cfg.max_batch_size).toBe(16);
    expect(cfg.instance_group).toStrictEqual([{ count: 8, gpus: [0, 31, 0] }]);
    expect(cfg.input).toStrictEqual([{ dims: [-1, 3] }]);
  });

  it('accepts the 32- and 64-bit integer limits', () => {
    expect(parse('max_batch_size: 2147483647').max_batch_size).toBe(2147483647);
    expect(parse('max_batch_size: -2147483648').max_batch_size).toBe(-2147483648);
    expect(parse('version_policy { latest { num_versions: 4294967295 } }').version_policy).toStrictEqual({
      latest: { num_versions: 4294967295 },
    });
    expect(parse('input { dims: [ 9007199254740991, -9007199254740991 ] }').input).toStrictEqual([
      { dims: [Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER] },
    ]);
  });

  it('parses floats including inf, nan, exponents and the f suffix', () => {
    const cfg = parse(`sequence_batching {
  direct { max_queue_delay_microseconds: 0x10 minimum_slot_utilization: .5 }
  control_input [ {
    name: "START"
    control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ -inf, nan, 1e-3, 1.5f, 0.1, 2, -Infinity, 3E2, 1f ] } ]
  } ]
}`);
    const seq = cfg.sequence_batching as {
      direct: Record<string, unknown>;
      control_input: Array<{ control: Array<{ fp32_false_true: number[] }> }>;
    };
    expect(seq.direct).toStrictEqual({ max_queue_delay_microseconds: 16, minimum_slot_utilization: 0.5 });
    const floats = seq.control_input[0]?.control[0]?.fp32_false_true ?? [];
    expect(floats[0]).toBe(-Infinity);
    expect(Number.isNaN(floats[1])).toBe(true);
    // float fields keep the shortest decimal of their float32 value.
    expect(floats.slice(2)).toStrictEqual([0.001, 1.5, 0.1, 2, -Infinity, 300, 1]);
  });

  it('rounds float fields to float32 precision', () => {
    expect(roundToFloat32(0.123456789)).toBe(0.12345679);
    expect(roundToFloat32(16777217)).toBe(16777216);
    expect(parse('sequence_batching { direct { minimum_slot_utilization: 0.123456789 } }').sequence_batching).toStrictEqual({
      direct: { minimum_slot_utilization: 0.12345679 },
    });
  });

  it('accepts all boolean spellings', () => {
    const cfg = parse(`input {
  is_shape_tensor: True
  allow_ragged_batch: t
  optional: 1
}
input { is_shape_tensor: false allow_ragged_batch: False optional: 0 is_non_linear_format_io: f }
`);
    expect(cfg.input).toStrictEqual([
      { is_shape_tensor: true, allow_ragged_batch: true, optional: true },
      { is_shape_tensor: false, allow_ragged_batch: false, optional: false, is_non_linear_format_io: false },
    ]);
  });

  it('accepts enums by name or by number', () => {
    const cfg = parse('input { data_type: 11 format: 2 }\noptimization { priority: 1 graph { level: -1 } }');
    expect(cfg.input).toStrictEqual([{ data_type: 'TYPE_FP32', format: 'FORMAT_NCHW' }]);
    expect(cfg.optimization).toStrictEqual({ priority: 'PRIORITY_MAX', graph: { level: -1 } });
  });

  it('stores a "__proto__" map key as an ordinary entry', () => {
    const cfg = parse('parameters { key: "__proto__" value { string_value: "x" } }');
    const params = cfg.parameters as Record<string, unknown>;
    expect(Object.getPrototypeOf(params)).toBe(Object.prototype);
    expect(Object.keys(params)).toStrictEqual(['__proto__']);
    expect(Object.getOwnPropertyDescriptor(params, '__proto__')?.value).toStrictEqual({ string_value: 'x' });
  });

  it('accepts empty lists and an empty document', () => {
    expect(parse('input: []\ninput [ ]\ninstance_group { gpus: [] }')).toStrictEqual({
      input: [],
      instance_group: [{ gpus: [] }],
    });
    expect(parse('  # only a comment\n')).toStrictEqual({});
  });

  it('is driven by any protobufjs Type (bytes, 64-bit, maps with int/bool keys)', () => {
    const root = protobuf.parse(
      `syntax = "proto3";
       package t;
       message Inner { sint32 s = 1; }
       message Msg {
         bytes blob = 1;
         uint64 big = 2;
         int64 neg = 3;
         double d = 4;
         map<int32, string> by_int = 5;
         map<bool, Inner> by_bool = 6;
         repeated fixed32 f = 7;
         oneof choice { string a = 8; Inner b = 9; }
       }`,
      { keepCase: true },
    ).root;
    root.resolveAll();
    const type = root.lookupType('t.Msg');
    const out = parseTextProto(
      `blob: "\\x00\\xff\\101" "z"
big: 9007199254740991
neg: -9007199254740991
d: 1e300
by_int { key: -5 value: "minus five" }
by_int { key: 0x10 value: 'sixteen' }
by_bool { key: true value { s: -3 } }
f: [1, 4294967295]
b { s: 2 }`,
      type,
      'x.pbtxt',
    );
    expect(out).toStrictEqual({
      blob: Buffer.from([0x00, 0xff, 0x41, 0x7a]),
      big: 9007199254740991,
      neg: -9007199254740991,
      d: 1e300,
      by_int: { '-5': 'minus five', '16': 'sixteen' },
      by_bool: { true: { s: -3 } },
      f: [1, 4294967295],
      b: { s: 2 },
    });

    const err = pbtxtError(() => parseTextProto('big: 18446744073709551615', type, 'x.pbtxt'));
    expect(err.message).toMatch(/^x\.pbtxt:1:6: .*not exactly representable/);
    const err2 = pbtxtError(() => parseTextProto('big: 18446744073709551616', type, 'x.pbtxt'));
    expect(err2.reason).toMatch(/out of range for field "big" \(uint64\)/);
    const err3 = pbtxtError(() => parseTextProto('a: "x"\nb {}', type));
    expect(err3.message).toBe('<input>:2:1: field "b" is specified along with field "a", another member of oneof "choice"');
  });
});

describe('parseTextProto: errors carry file, line, column and the problem', () => {
  it('reports unknown fields with the message type', () => {
    const err = expectError(
      'name: "m"\ninput [\n  {\n    name: "x"\n    foo: 1\n  }\n]\n',
      5,
      5,
      /^unknown field "foo" in inference\.ModelInput$/,
    );
    expect(err.message).toBe('config.pbtxt:5:5: unknown field "foo" in inference.ModelInput');
    expectError('nmae: "m"', 1, 1, /^unknown field "nmae" in inference\.ModelConfig$/);
    expectError('parameters { key: "a" val: {} }', 1, 23, /unknown field "val" in inference\.ModelConfig\.ParametersEntry/);
  });

  it('reports wrong value types', () => {
    expectError('max_batch_size: "8"', 1, 17, /expected an integer for field "max_batch_size", found "\\"8\\""/);
    expectError('max_batch_size: 1.5', 1, 17, /expected an integer .*floating point number \(1\.5\)/);
    expectError('name: 5', 1, 7, /expected a string for field "name"/);
    expectError('input { optional: yes }', 1, 19, /expected true or false for boolean field "optional"/);
    expectError('input { optional: 2 }', 1, 19, /invalid value for boolean field "optional": 2/);
    expectError('input {\n  reshape: 5\n}', 2, 12, /expected "\{" or "<" to start the value of field "reshape"/);
    expectError('input { dims: [ 1, "2" ] }', 1, 20, /expected an integer for field "dims"/);
  });

  it('reports unknown enum names and numbers', () => {
    expectError(
      'input [ { data_type: TYPE_FLOAT32 } ]',
      1,
      22,
      /unknown enum value "TYPE_FLOAT32" for field "data_type" \(inference\.DataType\)/,
    );
    expectError('instance_group { kind: 99 }', 1, 24, /unknown enum number 99 for field "kind" \(inference\.ModelInstanceGroup\.Kind\)/);
    expectError('input { data_type: "TYPE_FP32" }', 1, 20, /expected an enum value name or number/);
  });

  it('reports duplicate non-repeated fields and oneof conflicts', () => {
    expectError('name: "a"\nname: "b"', 2, 1, /^non-repeated field "name" is specified multiple times$/);
    expectError('input { reshape { shape: 1 } reshape { shape: 2 } }', 1, 30, /non-repeated field "reshape"/);
    expectError(
      'dynamic_batching {}\nsequence_batching {}',
      2,
      1,
      /^field "sequence_batching" is specified along with field "dynamic_batching", another member of oneof "scheduling_choice"$/,
    );
    expectError('parameters { key: "a" key: "b" }', 1, 23, /non-repeated field "key"/);
  });

  it('reports out-of-range and unrepresentable integers at the number (or its sign)', () => {
    expectError('max_batch_size: 2147483648', 1, 17, /integer 2147483648 out of range for field "max_batch_size" \(int32\)/);
    expectError('max_batch_size:   -2147483649', 1, 19, /integer -2147483649 out of range/);
    expectError('version_policy { latest { num_versions: -1 } }', 1, 41, /negative value -1 for unsigned field "num_versions"/);
    expectError('version_policy { latest { num_versions: 4294967296 } }', 1, 41, /out of range .*\(uint32\)/);
    expectError('input { dims: 9223372036854775808 }', 1, 15, /out of range for field "dims" \(int64\)/);
    expectError('input { dims: [ 9007199254740993 ] }', 1, 17, /not exactly representable as a JavaScript number/);
  });

  it('reports syntax errors', () => {
    expectError('name "x"', 1, 6, /^expected ":" after field "name", found "\\"x\\""$/);
    expectError('input {\n  name: "x"\n', 3, 1, /unexpected end of input, expected "\}"/);
    expectError('input { reshape < shape: 1 } }', 1, 28, /^expected ">" to close inference\.ModelTensorReshape, found "\}"$/);
    expectError('name: ["a"]', 1, 7, /field "name" is not repeated and cannot take a list/);
    expectError('input { dims: [ 1 2 ] }', 1, 19, /expected "," or "\]" in list, found "2"/);
    expectError('}', 1, 1, /expected a field name, found "\}"/);
    expectError('max_batch_size: 8abc', 1, 18, /need space between number and identifier/);
    expectError('max_batch_size: 09', 1, 17, /must be octal/);
    expectError('name: "abc\nplatform: "x"', 1, 7, /string literals cannot cross line boundaries/);
    expectError('name: "abc', 1, 7, /unterminated string literal/);
    expectError('name: "a\\qb"', 1, 9, /invalid escape sequence "\\q"/);
    expectError('name: "\\xZZ"', 1, 8, /expected hex digits/);
    expectError('name: "a" $', 1, 11, /unexpected character "\$"/);
    expectError('[ext.field]: 1', 1, 1, /extension and Any fields are not supported/);
    expectError('name: "\\xff"', 1, 7, /invalid UTF-8/);
  });

  it('counts lines and columns across comments and blank lines', () => {
    const text = '# header\n\nname: "m"  # c\n\n  input {\n    dims: [ 1,\n      x ]\n  }\n';
    expectError(text, 7, 7, /expected an integer for field "dims", found "x"/);
  });

  it('uses "<input>" when no file name is given', () => {
    const err = pbtxtError(() => parseTextProto('bogus: 1', ModelConfigType));
    expect(err.file).toBe('<input>');
    expect(err.message).toBe('<input>:1:1: unknown field "bogus" in inference.ModelConfig');
  });
});

describe('Triton field names that an older hand-written schema got wrong', () => {
  it('parses an ensemble with max_inflight_requests and refuses the misspelt max_inflight_responses', () => {
    const ensemble = (field: string) => `name: "pipeline"
platform: "ensemble"
ensemble_scheduling { step [ { model_name: "a" model_version: -1 input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } } ] ${field}: 4 }`;
    expect(parseModelConfigText(ensemble('max_inflight_requests')).ensemble_scheduling).toMatchObject({ max_inflight_requests: 4 });
    expect(() => parseModelConfigText(ensemble('max_inflight_responses'))).toThrow(/max_inflight_responses/);
  });
});
