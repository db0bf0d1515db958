// src/frontends/http/infer_codec.ts: KServe v2 REST bodies and Triton's binary tensor extension.
import { describe, expect, it } from 'vitest';
import { type DecodedInfer, decodeInferRequest, encodeInferResponse } from '../../src/frontends/http/infer_codec.js';
import type { ServalError } from '../../src/kernel/errors.js';
import type { InferResponse } from '../../src/kernel/types.js';
import { expectServalError } from '../helpers/errors.js';
import { joinBinaryBody } from '../helpers/http.js';
import { asBuffer, bytesRaw, i32, rawOf } from '../helpers/tensors.js';

const decodeError = (buf: Buffer, len: number | undefined): ServalError => expectServalError(() => decodeInferRequest(buf, len, 'm', ''));

describe('decodeInferRequest: JSON bodies', () => {
  it('converts JSON inputs to raw bytes and keeps id, parameters, model and version', () => {
    const doc = {
      id: 'r1',
      parameters: { priority: 2, flag: true, tag: 'x' },
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [1, 3], data: [1, -2, 3] },
        { name: 'S', datatype: 'BYTES', shape: [2], data: ['ab', ''], parameters: { p: 'q' } },
      ],
    };
    const d = decodeInferRequest(Buffer.from(JSON.stringify(doc)), undefined, 'model_x', '3');
    expect(d.request.modelName).toBe('model_x');
    expect(d.request.modelVersion).toBe('3');
    expect(d.request.id).toBe('r1');
    expect(d.request.parameters).toEqual({ priority: 2, flag: true, tag: 'x' });
    expect(d.request.inputs.map((i) => [i.name, i.datatype, i.shape])).toEqual([
      ['A', 'INT32', [1, 3]],
      ['S', 'BYTES', [2]],
    ]);
    expect(asBuffer(d.request.inputs[0]!.data).equals(i32([1, -2, 3]))).toBe(true);
    expect(asBuffer(d.request.inputs[1]!.data).equals(bytesRaw(['ab', '']))).toBe(true);
    expect(d.request.inputs[1]!.parameters).toEqual({ p: 'q' });
    expect(d.request.outputs).toBeUndefined();
    expect(d.binaryDefault).toBe(false);
    expect(d.binaryOutputs.size).toBe(0);
  });

  it("refuses 'data' nested past the limit with a 400, even 100 000 levels deep (docs/config_checks.md)", () => {
    const deep = `{"inputs":[{"name":"A","datatype":"INT32","shape":[1],"data":${'['.repeat(100_000)}1${']'.repeat(100_000)}}]}`;
    const e = decodeError(Buffer.from(deep), undefined);
    expect([e.code, e.message]).toEqual(['INVALID_ARG', "Unable to parse 'data': nesting exceeds the maximum depth of 100"]);
  });

  it('reads requested outputs, binary_data flags and classification', () => {
    const doc = {
      inputs: [],
      parameters: { binary_data_output: true },
      outputs: [
        { name: 'O1' },
        { name: 'O2', parameters: { binary_data: false } },
        { name: 'O3', parameters: { classification: 3, binary_data: true } },
      ],
    };
    const d = decodeInferRequest(Buffer.from(JSON.stringify(doc)), undefined, 'm', '');
    expect(d.binaryDefault).toBe(true);
    expect([...d.binaryOutputs].sort()).toEqual(['O1', 'O3']);
    expect(d.request.outputs!.map((o) => [o.name, o.parameters?.classification])).toEqual([
      ['O1', undefined],
      ['O2', undefined],
      ['O3', 3],
    ]);
  });

  it('keeps UINT64/INT64 JSON values beyond 2^53 exact', () => {
    const text =
      '{"inputs":[{"name":"U","datatype":"UINT64","shape":[3],"data":[18446744073709551615,9007199254740993,1]},' +
      '{"name":"I","datatype":"INT64","shape":[1],"data":[-9223372036854775808]}]}';
    const d = decodeInferRequest(Buffer.from(text), undefined, 'm', '');
    const u = asBuffer(d.request.inputs[0]!.data);
    expect([0, 1, 2].map((k) => u.readBigUInt64LE(k * 8))).toEqual([2n ** 64n - 1n, 2n ** 53n + 1n, 1n]);
    expect(asBuffer(d.request.inputs[1]!.data).readBigInt64LE(0)).toBe(-(2n ** 63n));
  });

  it('keeps FP64 JSON values whose fraction has 16+ digits', () => {
    const values = [0.1 + 0.2, 1 / 3, -Math.E];
    const doc = { inputs: [{ name: 'D', datatype: 'FP64', shape: [3], data: values }] };
    const d = decodeInferRequest(Buffer.from(JSON.stringify(doc)), undefined, 'm', '');
    expect(asBuffer(d.request.inputs[0]!.data).equals(rawOf('FP64', values))).toBe(true);
  });

  it('keeps BYTES strings as they are, next to long integers', () => {
    const doc =
      '{"id":"\\u0000#7","inputs":[{"name":"S","datatype":"BYTES","shape":[2],"data":["\\u0000#1","12345678901234567"]},' +
      '{"name":"U","datatype":"UINT64","shape":[1],"data":[12345678901234567890]}]}';
    const d = decodeInferRequest(Buffer.from(doc), undefined, 'm', '');
    expect(d.request.id).toBe('\u0000#7');
    expect(asBuffer(d.request.inputs[0]!.data).equals(bytesRaw(['\u0000#1', '12345678901234567']))).toBe(true);
  });

  it.each([
    ['not JSON', '{"inputs": [', /^failed to parse the request JSON buffer: /],
    ['not an object', '[]', /^the request JSON must be an object$/],
    ['no inputs', '{"id":"a"}', /^the request must have an 'inputs' array$/],
    ['id not a string', '{"id":5,"inputs":[]}', /^'id' must be a string$/],
    ['input not an object', '{"inputs":[5]}', /^inputs\[0\] must be a JSON object$/],
    ['input without name', '{"inputs":[{"datatype":"INT32","shape":[1],"data":[1]}]}', /^inputs\[0\] must have a string 'name'$/],
    ['datatype missing', '{"inputs":[{"name":"A","shape":[1],"data":[1]}]}', /^input 'A' must have a string 'datatype'$/],
    ['bad shape', '{"inputs":[{"name":"A","datatype":"INT32","shape":[1.5],"data":[1]}]}', /'shape' array of non-negative integers/],
    ['no data', '{"inputs":[{"name":"A","datatype":"INT32","shape":[1]}]}', /^input 'A' has neither 'data' nor 'binary_data_size'$/],
    ['unknown datatype', '{"inputs":[{"name":"A","datatype":"INT3","shape":[1],"data":[1]}]}', /^input 'A' has unknown datatype 'INT3'$/],
    ['bad parameters', '{"inputs":[],"parameters":[1]}', /'parameters' must be a JSON object/],
    ['bad parameter value', '{"inputs":[],"parameters":{"a":{"b":1}}}', /parameter 'a' must be a string, number or boolean/],
    ['outputs not an array', '{"inputs":[],"outputs":{}}', /^'outputs' must be an array$/],
    ['output without name', '{"inputs":[],"outputs":[{}]}', /^outputs\[0\] must be an object with a string 'name'$/],
  ])('rejects %s', (_what, text, msg) => {
    const e = decodeError(Buffer.from(text), undefined);
    // A body that is not JSON is Triton's INTERNAL (its JSON reader's code); the rest INVALID_ARG.
    expect(e.code).toBe(_what === 'not JSON' ? 'INTERNAL' : 'INVALID_ARG');
    expect(e.message).toMatch(msg);
  });

  it('passes shared-memory inputs and outputs to the core with no data of their own', () => {
    const text =
      '{"inputs":[{"name":"A","datatype":"INT32","shape":[1],"parameters":{"shared_memory_region":"r"}}],"outputs":[{"name":"O","parameters":{"shared_memory_region":"r"}}]}';
    const d = decodeInferRequest(Buffer.from(text), undefined, 'm', '');
    expect(d.request.inputs[0]).toMatchObject({ name: 'A', parameters: { shared_memory_region: 'r' } });
    expect(d.request.inputs[0]!.data.byteLength).toBe(0);
    expect(d.request.outputs![0]!.parameters).toEqual({ shared_memory_region: 'r' });
  });
});

describe('decodeInferRequest: binary tensor extension', () => {
  it('binary inputs are views over the body, consumed in input order', () => {
    const a = i32([1, 2, 3, 4]);
    const s = bytesRaw(['xy', 'z']);
    const { body: buf, headerLength: len } = joinBinaryBody(
      {
        inputs: [
          { name: 'A', datatype: 'INT32', shape: [4], parameters: { binary_data_size: a.byteLength } },
          { name: 'S', datatype: 'BYTES', shape: [2], parameters: { binary_data_size: s.byteLength } },
        ],
      },
      [a, s],
    );
    const d = decodeInferRequest(buf, len, 'm', '');
    const [A, S] = d.request.inputs;
    expect(asBuffer(A!.data).equals(a)).toBe(true);
    expect(asBuffer(S!.data).equals(s)).toBe(true);
    expect(A!.data.buffer).toBe(buf.buffer);
    expect(A!.data.byteOffset).toBe(buf.byteOffset + len);
    // binary_data_size is consumed, other parameters are kept
    expect(A!.parameters).toEqual({});
  });

  it('mixes JSON and binary inputs: only binary ones consume body bytes', () => {
    const b = i32([7, 8]);
    const c = i32([9]);
    const { body: buf, headerLength: len } = joinBinaryBody(
      {
        inputs: [
          { name: 'A', datatype: 'INT32', shape: [2], data: [5, 6] },
          { name: 'B', datatype: 'INT32', shape: [2], parameters: { binary_data_size: 8 } },
          { name: 'J', datatype: 'BYTES', shape: [1], data: ['j'] },
          { name: 'C', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 4 } },
        ],
      },
      [b, c],
    );
    const d = decodeInferRequest(buf, len, 'm', '');
    const got = d.request.inputs.map((i) => asBuffer(i.data));
    expect(got[0]!.equals(i32([5, 6]))).toBe(true);
    expect(got[1]!.equals(b)).toBe(true);
    expect(got[2]!.equals(bytesRaw(['j']))).toBe(true);
    expect(got[3]!.equals(c)).toBe(true);
  });

  it('a zero-length binary input is allowed', () => {
    const { body: buf, headerLength: len } = joinBinaryBody({
      inputs: [{ name: 'A', datatype: 'INT32', shape: [0], parameters: { binary_data_size: 0 } }],
    });
    expect(decodeInferRequest(buf, len, 'm', '').request.inputs[0]!.data.byteLength).toBe(0);
  });

  it('rejects binary_data_size past the end of the body', () => {
    const { body: buf, headerLength: len } = joinBinaryBody(
      {
        inputs: [
          { name: 'A', datatype: 'INT32', shape: [2], parameters: { binary_data_size: 8 } },
          { name: 'B', datatype: 'INT32', shape: [4], parameters: { binary_data_size: 16 } },
        ],
      },
      [i32([1, 2]), i32([3, 4, 5])],
    );
    const e = decodeError(buf, len);
    expect(e.message).toBe("input 'B': binary_data_size 16 runs past the end of the request body (12 bytes of binary data left)");
  });

  it('rejects trailing bytes that no input claims', () => {
    const { body: buf, headerLength: len } = joinBinaryBody(
      { inputs: [{ name: 'A', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 4 } }] },
      [i32([1]), Buffer.alloc(3)],
    );
    expect(decodeError(buf, len).message).toBe('the request body has 3 bytes of binary data that no input claims');
    // Binary bytes after a pure-JSON request are unclaimed too.
    const j = joinBinaryBody({ inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [1] }] }, [Buffer.alloc(8)]);
    expect(decodeError(j.body, j.headerLength).message).toBe('the request body has 8 bytes of binary data that no input claims');
  });

  it('rejects an Inference-Header-Content-Length outside the body', () => {
    const { body: buf } = joinBinaryBody({ inputs: [] });
    for (const len of [buf.byteLength + 1, -1, 1.5, NaN]) {
      expect(decodeError(buf, len).message).toBe(
        `Inference-Header-Content-Length ${len} is not a valid length for a request body of ${buf.byteLength} bytes`,
      );
    }
  });

  it('rejects binary_data_size without the header, with data, or not an integer', () => {
    const doc = { inputs: [{ name: 'A', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 4 } }] };
    const noHeader = joinBinaryBody(doc, [i32([1])]);
    expect(decodeError(noHeader.body, undefined).message).toMatch(/failed to parse the request JSON/);
    const onlyJson = Buffer.from(JSON.stringify(doc));
    expect(decodeError(onlyJson, undefined).message).toBe(
      "input 'A' has 'binary_data_size' but the request has no Inference-Header-Content-Length header",
    );
    const both = joinBinaryBody(
      { inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [1], parameters: { binary_data_size: 4 } }] },
      [i32([1])],
    );
    expect(decodeError(both.body, both.headerLength).message).toBe("input 'A': has both 'data' and 'binary_data_size'");
    const frac = joinBinaryBody({ inputs: [{ name: 'A', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 2.5 } }] }, [
      i32([1]),
    ]);
    expect(decodeError(frac.body, frac.headerLength).message).toBe("input 'A': 'binary_data_size' must be a non-negative integer");
  });

  it('an Inference-Header-Content-Length equal to the body is a pure JSON request', () => {
    const { body: buf, headerLength: len } = joinBinaryBody({ inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [42] }] });
    expect(asBuffer(decodeInferRequest(buf, len, 'm', '').request.inputs[0]!.data).equals(i32([42]))).toBe(true);
  });
});

describe('encodeInferResponse', () => {
  const decoded = (doc: Record<string, unknown>): DecodedInfer =>
    decodeInferRequest(Buffer.from(JSON.stringify({ inputs: [], ...doc })), undefined, 'm', '');
  const response = (id = ''): InferResponse => ({
    modelName: 'm',
    modelVersion: '2',
    id,
    outputs: [
      { name: 'A', datatype: 'INT32', shape: [1, 3], data: i32([1, -2, 3]) },
      { name: 'S', datatype: 'BYTES', shape: [2], data: bytesRaw(['x', 'üy']) },
      { name: 'B', datatype: 'BOOL', shape: [2], data: Uint8Array.of(1, 0) },
      { name: 'D', datatype: 'FP64', shape: [2], data: rawOf('FP64', [-0, 0.1 + 0.2]) },
    ],
  });

  it('all-JSON response: one chunk, data decoded per datatype, no id when empty', () => {
    const enc = encodeInferResponse(response(), decoded({}));
    expect(enc.headerLength).toBeUndefined();
    expect(enc.chunks).toHaveLength(1);
    expect(JSON.parse(Buffer.from(enc.chunks[0]!).toString())).toEqual({
      model_name: 'm',
      model_version: '2',
      outputs: [
        { name: 'A', datatype: 'INT32', shape: [1, 3], data: [1, -2, 3] },
        { name: 'S', datatype: 'BYTES', shape: [2], data: ['x', 'üy'] },
        { name: 'B', datatype: 'BOOL', shape: [2], data: [true, false] },
        { name: 'D', datatype: 'FP64', shape: [2], data: [-0, 0.1 + 0.2] },
      ],
    });
    // -0 keeps its sign, as in Triton.
    expect(Buffer.from(enc.chunks[0]!).toString()).toContain('"data":[-0.0,0.30000000000000004]');
  });

  it('FP16 goes only as binary data: JSON is refused with Triton’s messages in both directions', () => {
    const h = Uint8Array.of(0x00, 0x3c);
    const res: InferResponse = {
      modelName: 'm',
      modelVersion: '1',
      id: '',
      outputs: [{ name: 'H', datatype: 'FP16', shape: [1], data: h }],
    };
    expect(() => encodeInferResponse(res, decoded({}))).toThrow(
      'sending FP16 data via JSON is not supported. Please use the binary data format for output',
    );
    const enc = encodeInferResponse(res, decoded({ parameters: { binary_data_output: true } }));
    expect(asBuffer(enc.chunks[1]!).equals(Buffer.from(h))).toBe(true);
    const e = decodeError(Buffer.from('{"inputs":[{"name":"H","datatype":"FP16","shape":[1],"data":[1.0]}]}'), undefined);
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe('receiving FP16 data via JSON is not supported. Please use the binary data format for input H');
    const bin = joinBinaryBody({ inputs: [{ name: 'H', datatype: 'FP16', shape: [1], parameters: { binary_data_size: 2 } }] }, [
      Buffer.from(h),
    ]);
    expect(asBuffer(decodeInferRequest(bin.body, bin.headerLength, 'm', '').request.inputs[0]!.data).equals(Buffer.from(h))).toBe(true);
  });

  it('echoes a non-empty id and response parameters', () => {
    const res = { ...response('abc'), parameters: { p: 1 } };
    const doc = JSON.parse(Buffer.from(encodeInferResponse(res, decoded({})).chunks[0]!).toString());
    expect(doc.id).toBe('abc');
    expect(doc.parameters).toEqual({ p: 1 });
  });

  it('binary_data_output: every output binary, in order, after the JSON header', () => {
    const res = response();
    const enc = encodeInferResponse(res, decoded({ parameters: { binary_data_output: true } }));
    expect(enc.chunks).toHaveLength(5);
    const header = Buffer.from(enc.chunks[0]!);
    expect(enc.headerLength).toBe(header.byteLength);
    const doc = JSON.parse(header.toString());
    expect(doc.outputs.map((o: { parameters: unknown }) => o.parameters)).toEqual(
      res.outputs.map((o) => ({ binary_data_size: o.data.byteLength })),
    );
    for (const o of doc.outputs) expect(o).not.toHaveProperty('data');
    for (const [i, o] of res.outputs.entries()) expect(asBuffer(enc.chunks[i + 1]!).equals(asBuffer(o.data))).toBe(true);
  });

  it('per-output binary_data selects which outputs are binary', () => {
    const res = response();
    const enc = encodeInferResponse(
      { ...res, outputs: [res.outputs[1]!, res.outputs[0]!] },
      decoded({ outputs: [{ name: 'S', parameters: { binary_data: true } }, { name: 'A' }] }),
    );
    expect(enc.chunks).toHaveLength(2);
    const doc = JSON.parse(Buffer.from(enc.chunks[0]!).toString());
    expect(doc.outputs[0]).toEqual({ name: 'S', datatype: 'BYTES', shape: [2], parameters: { binary_data_size: 12 } });
    expect(doc.outputs[1]).toEqual({ name: 'A', datatype: 'INT32', shape: [1, 3], data: [1, -2, 3] });
    expect(asBuffer(enc.chunks[1]!).equals(bytesRaw(['x', 'üy']))).toBe(true);
  });

  it('binary_data_output with listed outputs applies to outputs without their own flag', () => {
    const res = response();
    const enc = encodeInferResponse(
      { ...res, outputs: res.outputs.slice(0, 2) },
      decoded({ parameters: { binary_data_output: true }, outputs: [{ name: 'A' }, { name: 'S', parameters: { binary_data: false } }] }),
    );
    const doc = JSON.parse(Buffer.from(enc.chunks[0]!).toString());
    expect(doc.outputs[0].parameters).toEqual({ binary_data_size: 12 });
    expect(doc.outputs[1].data).toEqual(['x', 'üy']);
  });

  it('prints UINT64 beyond 2^53 exactly in JSON', () => {
    const u = Buffer.alloc(16);
    u.writeBigUInt64LE(2n ** 64n - 1n, 0);
    u.writeBigUInt64LE(5n, 8);
    const enc = encodeInferResponse(
      { modelName: 'm', modelVersion: '1', id: '', outputs: [{ name: 'U', datatype: 'UINT64', shape: [2], data: u }] },
      decoded({}),
    );
    expect(Buffer.from(enc.chunks[0]!).toString()).toContain('"data":[18446744073709551615,5]');
  });
});
