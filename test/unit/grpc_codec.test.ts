// src/frontends/grpc/infer_codec.ts: ModelInfer messages ⇄ core requests/responses.
import { describe, expect, it } from 'vitest';
import type { InferParameter__Output } from '../../src/frontends/grpc/generated/inference/InferParameter.js';
import type { InferTensorContents__Output } from '../../src/frontends/grpc/generated/inference/InferTensorContents.js';
import { decodeGrpcInfer, encodeGrpcInfer, type GrpcInferRequest, toGrpcParams } from '../../src/frontends/grpc/infer_codec.js';
import type { ServalError } from '../../src/kernel/errors.js';
import { expectServalError } from '../helpers/errors.js';
import { asBuffer, rawOf } from '../helpers/tensors.js';

type Params = Record<string, InferParameter__Output>;
interface Input {
  name: string;
  datatype: string;
  shape: (number | string)[];
  parameters?: Params;
  contents?: Partial<InferTensorContents__Output> | null;
}
type Extra = Partial<Omit<GrpcInferRequest, 'inputs' | 'outputs'>> & { outputs?: { name: string; parameters?: Params }[] };

const NO_CONTENTS: InferTensorContents__Output = {
  bool_contents: [],
  int_contents: [],
  int64_contents: [],
  uint_contents: [],
  uint64_contents: [],
  fp32_contents: [],
  fp64_contents: [],
  bytes_contents: [],
};

/** A ModelInferRequest as grpc-js hands it over: every field present (defaults), 64-bit values as strings. */
function msg(inputs: Input[], extra: Extra = {}): GrpcInferRequest {
  return {
    model_name: 'm',
    model_version: '',
    id: '',
    parameters: {},
    raw_input_contents: [],
    ...extra,
    outputs: (extra.outputs ?? []).map((o) => ({ parameters: {}, ...o })),
    inputs: inputs.map((i) => ({
      parameters: {},
      ...i,
      shape: i.shape.map(String),
      contents: i.contents ? { ...NO_CONTENTS, ...i.contents } : null,
    })),
  };
}

const decodeError = (m: GrpcInferRequest): ServalError => expectServalError(() => decodeGrpcInfer(m));

describe('decodeGrpcInfer: raw_input_contents', () => {
  it('uses the raw buffers as they are (no copy), with numeric shapes', () => {
    const a = rawOf('INT32', [1, 2, 3]);
    const b = Buffer.from([9, 8]);
    const req = decodeGrpcInfer(
      msg(
        [
          { name: 'A', datatype: 'INT32', shape: ['1', '3'] },
          { name: 'B', datatype: 'UINT8', shape: [2] },
        ],
        { raw_input_contents: [a, b], model_version: '4', id: 'x' },
      ),
    );
    expect(req.modelName).toBe('m');
    expect(req.modelVersion).toBe('4');
    expect(req.id).toBe('x');
    expect(req.inputs[0]!.shape).toEqual([1, 3]);
    expect(req.inputs[0]!.data).toBe(a);
    expect(req.inputs[1]!.data).toBe(b);
  });

  it('passes datatypes through for validation later, even unknown ones', () => {
    const req = decodeGrpcInfer(msg([{ name: 'A', datatype: 'INT33', shape: [1] }], { raw_input_contents: [Buffer.alloc(4)] }));
    expect(req.inputs[0]!.datatype).toBe('INT33');
  });

  it('rejects a raw_input_contents count that does not match the inputs', () => {
    const e = decodeError(
      msg(
        [
          { name: 'A', datatype: 'INT32', shape: [1] },
          { name: 'B', datatype: 'INT32', shape: [1] },
        ],
        {
          raw_input_contents: [Buffer.alloc(4)],
        },
      ),
    );
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe('raw_input_contents has 1 entries but the request has 2 inputs; give raw contents for every input or for none');
    const e2 = decodeError(msg([], { raw_input_contents: [Buffer.alloc(4)] }));
    expect(e2.message).toMatch(/raw_input_contents has 1 entries but the request has 0 inputs/);
  });

  it('rejects typed contents together with raw contents', () => {
    const e = decodeError(
      msg([{ name: 'A', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }], { raw_input_contents: [Buffer.alloc(4)] }),
    );
    expect(e.message).toBe("input 'A' has both typed contents and raw_input_contents");
  });

  it('empty typed contents next to raw contents are fine (proto3 defaults)', () => {
    const req = decodeGrpcInfer(
      msg([{ name: 'A', datatype: 'INT32', shape: [1], contents: { int_contents: [], fp32_contents: [] } }], {
        raw_input_contents: [rawOf('INT32', [5])],
      }),
    );
    expect(asBuffer(req.inputs[0]!.data).equals(rawOf('INT32', [5]))).toBe(true);
  });
});

describe('decodeGrpcInfer: typed InferTensorContents', () => {
  const cases: [string, string, unknown[], Buffer][] = [
    ['BOOL', 'bool_contents', [true, false, true], rawOf('BOOL', [true, false, true])],
    ['UINT8', 'uint_contents', [0, 7, 255], rawOf('UINT8', [0, 7, 255])],
    ['UINT16', 'uint_contents', [0, 65535], rawOf('UINT16', [0, 65535])],
    ['UINT32', 'uint_contents', [1, 4294967295], rawOf('UINT32', [1, 4294967295])],
    [
      'UINT64',
      'uint64_contents',
      ['18446744073709551615', '9007199254740993', 3],
      rawOf('UINT64', [18446744073709551615n, 9007199254740993n, 3n]),
    ],
    ['INT8', 'int_contents', [-128, 127], rawOf('INT8', [-128, 127])],
    ['INT16', 'int_contents', [-32768, 32767], rawOf('INT16', [-32768, 32767])],
    ['INT32', 'int_contents', [-2147483648, 2147483647], rawOf('INT32', [-2147483648, 2147483647])],
    [
      'INT64',
      'int64_contents',
      ['-9223372036854775808', '9223372036854775807', -5],
      rawOf('INT64', [-9223372036854775808n, 9223372036854775807n, -5n]),
    ],
    ['FP32', 'fp32_contents', [1.5, -0.1], rawOf('FP32', [1.5, -0.1])],
    ['FP64', 'fp64_contents', [0.1 + 0.2, -1e300], rawOf('FP64', [0.1 + 0.2, -1e300])],
  ];

  it.each(cases)('%s from %s', (dt, field, values, expected) => {
    const req = decodeGrpcInfer(msg([{ name: 'A', datatype: dt, shape: [values.length], contents: { [field]: values } }]));
    expect(asBuffer(req.inputs[0]!.data).equals(expected)).toBe(true);
  });

  it('BYTES from bytes_contents', () => {
    const req = decodeGrpcInfer(
      msg([
        {
          name: 'S',
          datatype: 'BYTES',
          shape: [3],
          contents: { bytes_contents: [Buffer.from('ab'), Buffer.alloc(0), Buffer.from([0xff])] },
        },
      ]),
    );
    expect(asBuffer(req.inputs[0]!.data).equals(Buffer.from([2, 0, 0, 0, 0x61, 0x62, 0, 0, 0, 0, 1, 0, 0, 0, 0xff]))).toBe(true);
  });

  it('reads only the field that belongs to the datatype', () => {
    const req = decodeGrpcInfer(
      msg([{ name: 'A', datatype: 'INT32', shape: [2], contents: { int_contents: [1, 2], fp32_contents: [9] } }]),
    );
    expect(asBuffer(req.inputs[0]!.data).equals(rawOf('INT32', [1, 2]))).toBe(true);
  });

  it('missing contents give an empty tensor (the byte-size check reports it later)', () => {
    const req = decodeGrpcInfer(msg([{ name: 'A', datatype: 'FP32', shape: [2], contents: null }]));
    expect(req.inputs[0]!.data.byteLength).toBe(0);
  });

  it('FP16 cannot be sent as typed contents', () => {
    const e = decodeError(msg([{ name: 'H', datatype: 'FP16', shape: [1], contents: { fp32_contents: [1] } }]));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe("input 'H': FP16 data must be sent in raw_input_contents (InferTensorContents has no FP16 field)");
  });

  it('an unknown datatype with typed contents is rejected', () => {
    expect(decodeError(msg([{ name: 'A', datatype: 'FLOAT', shape: [1], contents: { fp32_contents: [1] } }])).message).toBe(
      "input 'A' has unknown datatype 'FLOAT'",
    );
  });

  it('passes shared-memory inputs and outputs to the core with no data of their own', () => {
    const p: Params = { shared_memory_region: { parameter_choice: 'string_param', string_param: 'r' } };
    const req = decodeGrpcInfer(
      msg([{ name: 'A', datatype: 'INT32', shape: [1], parameters: p }], { outputs: [{ name: 'O', parameters: p }] }),
    );
    expect(req.inputs[0]).toMatchObject({ name: 'A', parameters: { shared_memory_region: 'r' } });
    expect(req.inputs[0]!.data.byteLength).toBe(0);
    expect(req.outputs![0]!.parameters).toEqual({ shared_memory_region: 'r' });
  });
});

describe('decodeGrpcInfer: parameters and outputs', () => {
  it('maps every InferParameter kind, 64-bit beyond 2^53 as bigint', () => {
    const req = decodeGrpcInfer(
      msg([], {
        parameters: {
          b: { parameter_choice: 'bool_param', bool_param: true },
          i: { parameter_choice: 'int64_param', int64_param: '-42' },
          s: { parameter_choice: 'string_param', string_param: 'hi' },
          d: { parameter_choice: 'double_param', double_param: 0.25 },
          u: { parameter_choice: 'uint64_param', uint64_param: '18446744073709551615' },
          old: { int64_param: '7' }, // no oneof name: whichever field is set
        },
      }),
    );
    expect(req.parameters).toEqual({ b: true, i: -42, s: 'hi', d: 0.25, u: 18446744073709551615n, old: 7 });
  });

  it('reads requested outputs and the classification parameter', () => {
    const req = decodeGrpcInfer(
      msg([], {
        outputs: [{ name: 'O1' }, { name: 'O2', parameters: { classification: { parameter_choice: 'int64_param', int64_param: '5' } } }],
      }),
    );
    expect(req.outputs!.map((o) => [o.name, o.parameters?.classification])).toEqual([
      ['O1', undefined],
      ['O2', 5],
    ]);
  });
});

describe('encodeGrpcInfer and toGrpcParams', () => {
  it('puts every output into raw_output_contents, in order, byte for byte', () => {
    const a = rawOf('INT32', [1, 2]);
    const backing = Buffer.alloc(32);
    const s = backing.subarray(5, 5 + 9);
    Buffer.from([5, 0, 0, 0, 104, 101, 108, 108, 111]).copy(s);
    const out = encodeGrpcInfer({
      modelName: 'm',
      modelVersion: '3',
      id: 'q',
      outputs: [
        { name: 'A', datatype: 'INT32', shape: [1, 2], data: a },
        { name: 'S', datatype: 'BYTES', shape: [1], data: s },
      ],
    }) as { model_name: string; model_version: string; id: string; outputs: unknown[]; raw_output_contents: Buffer[] };
    expect(out.model_name).toBe('m');
    expect(out.model_version).toBe('3');
    expect(out.id).toBe('q');
    expect(out.outputs).toEqual([
      { name: 'A', datatype: 'INT32', shape: [1, 2], parameters: {} },
      { name: 'S', datatype: 'BYTES', shape: [1], parameters: {} },
    ]);
    expect(out.raw_output_contents[0]!.equals(a)).toBe(true);
    expect(out.raw_output_contents[1]!.equals(s)).toBe(true);
    expect(out.raw_output_contents[1]!.byteLength).toBe(9);
  });

  it('maps parameter values to the matching InferParameter field', () => {
    expect(toGrpcParams({ b: false, s: 'x', i: 12, d: 1.5, big: 2n ** 63n })).toEqual({
      b: { bool_param: false },
      s: { string_param: 'x' },
      i: { int64_param: 12 },
      d: { double_param: 1.5 },
      big: { uint64_param: '9223372036854775808' },
    });
    expect(toGrpcParams(undefined)).toEqual({});
  });
});
