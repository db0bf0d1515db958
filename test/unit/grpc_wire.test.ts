// src/frontends/grpc/infer_wire.ts: the hand-written ModelInfer reader and writer, checked against
// proto-loader/protobufjs encodings of the same messages, and against malformed bytes.
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelInferRequest } from '../../src/frontends/grpc/generated/inference/ModelInferRequest.js';
import type { ModelInferResponse } from '../../src/frontends/grpc/generated/inference/ModelInferResponse.js';
import type { ModelStreamInferResponse } from '../../src/frontends/grpc/generated/inference/ModelStreamInferResponse.js';
import { decodeGrpcInfer, encodeGrpcInfer } from '../../src/frontends/grpc/infer_codec.js';
import { readInferRequest, type WireInferRequest, writeInferResponse, writeStreamResponse } from '../../src/frontends/grpc/infer_wire.js';
import { inferenceMethods, type Method } from '../../src/frontends/grpc/proto.js';
import { joinBytes, splitBytes } from '../../src/kernel/datatypes.js';
import { ServalError } from '../../src/kernel/errors.js';
import { range, rawOf, rng } from '../helpers/tensors.js';

// The front-end's own proto-loader options: the reference encoding and decoding.
let infer: Method;
let stream: Method;
beforeAll(() => {
  const svc = inferenceMethods();
  infer = svc.ModelInfer!;
  stream = svc.ModelStreamInfer!;
});

const encodeRequest = (m: ModelInferRequest): Buffer => infer.requestSerialize(m);
/** What proto-loader makes of the bytes, with shapes as numbers (the reader's only difference). */
function referenceDecode(b: Buffer): unknown {
  const m = infer.requestDeserialize(b) as { inputs: { shape: string[] }[] };
  return { ...m, inputs: m.inputs.map((i) => ({ ...i, shape: i.shape.map(Number) })) };
}
/** Comparable form: drops explicit `undefined` members; Buffers (any view) as byte lists; bigints tagged. */
const plain = (x: unknown): unknown =>
  JSON.parse(
    JSON.stringify(x, function (this: Record<string, unknown>, k, v) {
      const orig = this[k];
      if (orig instanceof Uint8Array) return [...orig];
      return typeof v === 'bigint' ? `${v}n` : v;
    }),
  );

/** The reader's message with its serialized bytes_contents split back into elements, as proto-loader gives them. */
function asProtoLoader(m: WireInferRequest): unknown {
  return {
    ...m,
    inputs: m.inputs.map((i) => {
      if (!i.contents?.bytes_serialized) return i;
      const { bytes_serialized, ...rest } = i.contents;
      return { ...i, contents: { ...rest, bytes_contents: splitBytes(bytes_serialized, 'test') } };
    }),
  };
}

const REQUESTS: [string, ModelInferRequest][] = [
  [
    'raw contents, two inputs, requested outputs',
    {
      model_name: 'simple',
      model_version: '3',
      id: 'req-1',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
      ],
      outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1', parameters: { binary_data: { bool_param: true } } }],
      raw_input_contents: [
        rawOf('INT32', range(16)),
        rawOf(
          'INT32',
          range(16, (i) => -i),
        ),
      ],
    },
  ],
  [
    'every parameter kind, exact 64-bit values, unicode',
    {
      model_name: 'módel ✓',
      parameters: {
        b: { bool_param: true },
        f: { bool_param: false },
        i: { int64_param: '-9223372036854775808' },
        j: { int64_param: '9007199254740993' },
        k: { int64_param: -5 },
        u: { uint64_param: '18446744073709551615' },
        s: { string_param: 'é'.repeat(100) },
        d: { double_param: -0.125 },
        e: { string_param: '' },
        priority: { uint64_param: 0 },
      },
      inputs: [
        { name: 'X', datatype: 'FP32', shape: [-1, 0, 9007199254740991], parameters: { shared_memory_region: { string_param: 'r' } } },
      ],
    },
  ],
  [
    'typed contents of every field',
    {
      model_name: 'm',
      inputs: [
        { name: 'B', datatype: 'BOOL', shape: [3], contents: { bool_contents: [true, false, true] } },
        { name: 'I', datatype: 'INT32', shape: [4], contents: { int_contents: [-1, 0, 2147483647, -2147483648] } },
        { name: 'L', datatype: 'INT64', shape: [3], contents: { int64_contents: ['-9223372036854775808', '9223372036854775807', '-1'] } },
        { name: 'U', datatype: 'UINT32', shape: [2], contents: { uint_contents: [0, 4294967295] } },
        { name: 'V', datatype: 'UINT64', shape: [2], contents: { uint64_contents: ['18446744073709551615', '1'] } },
        { name: 'F', datatype: 'FP32', shape: [3], contents: { fp32_contents: [1.5, -0, 3.4028234663852886e38] } },
        { name: 'D', datatype: 'FP64', shape: [2], contents: { fp64_contents: [Math.PI, -1e-300] } },
        {
          name: 'S',
          datatype: 'BYTES',
          shape: [3],
          contents: { bytes_contents: [Buffer.from('ab'), Buffer.alloc(0), Buffer.from([0, 255])] },
        },
      ],
    },
  ],
  ['empty message', {}],
];

describe('readInferRequest against proto-loader encodings', () => {
  it.each(REQUESTS)('%s: reads what proto-loader reads', (_name, m) => {
    const bytes = encodeRequest(m);
    const got = readInferRequest(bytes);
    expect(got.wireError).toBeUndefined();
    expect(plain(asProtoLoader(got))).toEqual(plain(referenceDecode(bytes)));
    // And the core request made from it is the one made from proto-loader's message.
    const a = () => decodeGrpcInfer(got);
    const b = () => decodeGrpcInfer(infer.requestDeserialize(bytes) as Parameters<typeof decodeGrpcInfer>[0]);
    let ra: unknown;
    let rb: unknown;
    try {
      ra = a();
    } catch (e) {
      ra = e instanceof ServalError ? e.message : e;
    }
    try {
      rb = b();
    } catch (e) {
      rb = e instanceof ServalError ? e.message : e;
    }
    expect(plain(ra)).toEqual(plain(rb));
  });

  it('raw_input_contents are views of the received message, not copies', () => {
    const bytes = encodeRequest(REQUESTS[0]![1]);
    const got = readInferRequest(bytes);
    expect(got.raw_input_contents).toHaveLength(2);
    for (const raw of got.raw_input_contents) expect(raw.buffer).toBe(bytes.buffer);
    expect(got.raw_input_contents[0]!.equals(rawOf('INT32', range(16)))).toBe(true);
  });

  it('takes unpacked repeated fields, skips unknown fields, and lets the last scalar and oneof member win', () => {
    const bytes = Buffer.concat([
      Buffer.from([0x0a, 1, 0x61]), // model_name "a"
      Buffer.from([0x58, 0x96, 0x01]), // unknown field 11, varint
      Buffer.from([0x65, 1, 2, 3, 4]), // unknown field 12, fixed32
      Buffer.from([0x69, 1, 2, 3, 4, 5, 6, 7, 8]), // unknown field 13, fixed64
      Buffer.from([0x72, 2, 9, 9]), // unknown field 14, bytes
      // inputs: name "X", shape 2 then 3 unpacked (field 3, varint), then packed [4]
      Buffer.from([0x2a, 10, 0x0a, 1, 0x58, 0x18, 2, 0x18, 3, 0x1a, 1, 4]),
      Buffer.from([0x0a, 1, 0x62]), // model_name "b" (last wins)
      // parameters {"p": int64 7 then bool true} in one value: the oneof's last member wins
      Buffer.from([0x22, 9, 0x0a, 1, 0x70, 0x12, 4, 0x10, 7, 0x08, 1]),
    ]);
    const got = readInferRequest(bytes);
    expect(got.wireError).toBeUndefined();
    expect(got.model_name).toBe('b');
    expect(got.inputs[0]!.name).toBe('X');
    expect(got.inputs[0]!.shape).toEqual([2, 3, 4]);
    // As the protobuf spec (and Triton's C++ parser) has it; protobufjs keeps the first member instead.
    expect(got.parameters).toEqual({ p: { parameter_choice: 'bool_param', bool_param: true } });
    const { parameters: _, ...rest } = referenceDecode(bytes) as Record<string, unknown>;
    expect(plain({ ...got, parameters: undefined })).toEqual(plain(rest));
  });
});

describe('readInferRequest: bytes_contents', () => {
  it('come back serialized in one Buffer (no Buffer per element), merged across repeated contents fields', () => {
    const elements = [Buffer.from('ab'), Buffer.alloc(0), Buffer.from('é'), Buffer.from([0, 255])];
    const one = encodeRequest({
      inputs: [{ name: 'S', datatype: 'BYTES', shape: [2], contents: { bytes_contents: elements.slice(0, 2) } }],
    });
    // The same input message with a second `contents` field appended: protobuf merges the two.
    const extra = encodeRequest({ inputs: [{ contents: { bytes_contents: elements.slice(2) } }] });
    const inputOf = (b: Buffer): Buffer => b.subarray(2); // drop the outer field-5 tag and 1-byte length
    const merged = Buffer.concat([Buffer.from([0x2a, inputOf(one).length + inputOf(extra).length]), inputOf(one), inputOf(extra)]);
    const got = readInferRequest(merged);
    expect(got.wireError).toBeUndefined();
    const c = got.inputs[0]!.contents!;
    expect(c.bytes_contents).toEqual([]);
    expect(c.bytes_serialized!.equals(joinBytes(elements))).toBe(true);
    const req = decodeGrpcInfer(got);
    expect(Buffer.from(req.inputs[0]!.data).equals(joinBytes(elements))).toBe(true);
  });

  it('an empty element still counts as contents (typed contents next to raw ones is refused)', () => {
    const bytes = encodeRequest({
      inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], contents: { bytes_contents: [Buffer.alloc(0)] } }],
      raw_input_contents: [joinBytes(['x'])],
    });
    expect(() => decodeGrpcInfer(readInferRequest(bytes))).toThrow(/both typed contents and raw_input_contents/);
  });
});

describe('readInferRequest on malformed bytes', () => {
  const invalid = (b: Buffer): ServalError => {
    const got = readInferRequest(b);
    expect(got.wireError).toBeInstanceOf(ServalError);
    expect(got.wireError!.code).toBe('INTERNAL');
    return got.wireError!;
  };

  it('a truncated varint', () => {
    expect(invalid(Buffer.from([0x0a, 0xff, 0xff])).message).toMatch(/truncated varint/);
    expect(invalid(Buffer.from([0x80])).message).toMatch(/truncated varint/);
  });

  it('a varint longer than 10 bytes', () => {
    expect(invalid(Buffer.from([0x58, ...range(11, () => 0xff), 0x01])).message).toMatch(/longer than 10 bytes/);
  });

  it('a length past the end of the message', () => {
    expect(invalid(Buffer.from([0x0a, 5, 0x61])).message).toMatch(/past the end/);
    expect(invalid(Buffer.from([0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1])).message).toMatch(/past the end/);
    // inside a nested message: the input's name runs past the input
    expect(invalid(Buffer.from([0x2a, 3, 0x0a, 4, 0x61, 0x61, 0x61, 0x61])).message).toMatch(/past the end/);
  });

  it('wrong wire types for known fields', () => {
    expect(invalid(Buffer.from([0x08, 1])).message).toMatch(/model_name: wire type 0/);
    expect(invalid(Buffer.from([0x2d, 0, 0, 0, 0])).message).toMatch(/inputs: wire type 5/);
    expect(invalid(Buffer.from([0x2a, 2, 0x1d, 0])).message).toMatch(/shape/);
    expect(invalid(Buffer.from([0x22, 4, 0x12, 2, 0x0a, 0])).message).toMatch(/bool_param/);
  });

  it('groups, unknown wire types and field number 0', () => {
    expect(invalid(Buffer.from([0x5b, 0x5c])).message).toMatch(/wire type 3/);
    expect(invalid(Buffer.from([0x5e])).message).toMatch(/wire type 6/);
    expect(invalid(Buffer.from([0x02, 0])).message).toMatch(/field number 0/);
  });

  it('keeps what it read before the fault (a stream answers with the id)', () => {
    const good = encodeRequest({ id: 'keep-me', model_name: 'm' });
    const got = readInferRequest(Buffer.concat([good, Buffer.from([0x0a, 9])]));
    expect(got.id).toBe('keep-me');
    expect(got.wireError).toBeDefined();
  });

  it('every prefix and thousands of mutations of valid messages: a result or the INTERNAL wire error, never a throw', () => {
    const r = rng(16);
    for (const [, m] of REQUESTS) {
      const bytes = encodeRequest(m);
      for (let n = 0; n < bytes.length; n++) {
        const got = readInferRequest(bytes.subarray(0, n));
        if (got.wireError) expect(got.wireError.code).toBe('INTERNAL');
      }
      for (let k = 0; k < 1500; k++) {
        const b = Buffer.from(bytes);
        const flips = 1 + Math.floor(r() * 4);
        for (let f = 0; f < flips; f++) b[Math.floor(r() * b.length)] = Math.floor(r() * 256);
        const got = readInferRequest(b);
        if (got.wireError) expect(got.wireError.code).toBe('INTERNAL');
        else {
          // Whatever the reader accepts, the codec turns into a request or a ServalError, nothing else.
          try {
            decodeGrpcInfer(got);
          } catch (e) {
            expect(e).toBeInstanceOf(ServalError);
          }
        }
      }
    }
  });
});

const RESPONSES: [string, ModelInferResponse][] = [
  [
    'as encodeGrpcInfer builds it',
    encodeGrpcInfer({
      modelName: 'simple',
      modelVersion: '1',
      id: 'r-9',
      parameters: { sequence_id: 12n ** 18n, flag: true, ratio: 0.5, who: 'z', neg: -3, big: 2n ** 64n - 1n },
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: rawOf('INT32', range(16)) },
        { name: 'OUTPUT1', datatype: 'FP32', shape: [2, 0, 2 ** 40], data: new Uint8Array(0) },
      ],
    }),
  ],
  ['empty', encodeGrpcInfer({ modelName: '', modelVersion: '', id: '', outputs: [] })],
  [
    'a 300 KiB output and a unicode name',
    encodeGrpcInfer({
      modelName: 'ñ',
      modelVersion: '',
      id: '',
      outputs: [{ name: 'Ö', datatype: 'UINT8', shape: [300 * 1024], data: new Uint8Array(300 * 1024).fill(7) }],
    }),
  ],
];

describe('writeInferResponse and writeStreamResponse against proto-loader', () => {
  it.each(RESPONSES)('%s: decodes to what proto-loader encodes', (_name, res) => {
    const ours = writeInferResponse(res);
    expect(plain(infer.responseDeserialize(ours))).toEqual(plain(infer.responseDeserialize(infer.responseSerialize(res))));
  });

  it.each(RESPONSES)('%s, streamed with triton_final_response', (_name, res) => {
    const msg: ModelStreamInferResponse = {
      error_message: '',
      infer_response: { ...res, parameters: { ...res.parameters, triton_final_response: { bool_param: true } } },
    };
    const ours = writeStreamResponse(msg);
    expect(plain(stream.responseDeserialize(ours))).toEqual(plain(stream.responseDeserialize(stream.responseSerialize(msg))));
  });

  it('a streamed error carries the message and the id only', () => {
    const msg: ModelStreamInferResponse = { error_message: "unknown model 'x' ✗", infer_response: { id: 'q' } };
    const got = stream.responseDeserialize(writeStreamResponse(msg)) as {
      error_message: string;
      infer_response: { id: string; outputs: unknown[] };
    };
    expect(got.error_message).toBe("unknown model 'x' ✗");
    expect(got.infer_response.id).toBe('q');
    expect(got.infer_response.outputs).toEqual([]);
  });

  it('fills exactly one allocation of the message size', () => {
    const ours = writeInferResponse(RESPONSES[0]![1]);
    expect(ours.byteLength).toBe(infer.responseSerialize(RESPONSES[0]![1]).byteLength);
  });
});
