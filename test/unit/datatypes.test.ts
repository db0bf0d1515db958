// src/core/datatypes.ts and src/core/json.ts: datatype tables, JSON ⇄ raw bytes for every
// datatype, IEEE half precision, BYTES framing, and exact 64-bit integers in JSON.
import { describe, expect, it } from 'vitest';
import {
  countBytesElements,
  DATATYPES,
  type DataType,
  ExactInteger,
  elementCount,
  elementSize,
  floatToHalf,
  fromConfigType,
  fromOrtType,
  halfToFloat,
  isDataType,
  joinBytes,
  jsonToRaw,
  MAX_JSON_DATA_DEPTH,
  rawToJson,
  splitBytes,
  toConfigType,
  toOrtType,
  typedView,
} from '../../src/kernel/datatypes.js';
import { encodeJson, parseJsonExact } from '../../src/kernel/json.js';
import { expectServalError } from '../helpers/errors.js';
// Reference encoders written independently of src/kernel (shared with the integration tests).
import { bytesRaw, halfToNumber, rawOf, SIZE } from '../helpers/tensors.js';

describe('datatype tables', () => {
  it('lists the 13 KServe v2 datatypes', () => {
    expect([...DATATYPES].sort()).toEqual([
      'BOOL',
      'BYTES',
      'FP16',
      'FP32',
      'FP64',
      'INT16',
      'INT32',
      'INT64',
      'INT8',
      'UINT16',
      'UINT32',
      'UINT64',
      'UINT8',
    ]);
    for (const d of DATATYPES) expect(isDataType(d)).toBe(true);
    for (const d of ['BF16', 'fp32', 'STRING', '', 'toString', 'constructor', 7, undefined]) expect(isDataType(d)).toBe(false);
  });

  it('element sizes', () => {
    for (const [dt, size] of Object.entries(SIZE)) expect(elementSize(dt as DataType), dt).toBe(size);
    expect(elementSize('BYTES')).toBe(0);
  });

  it('maps to model-config and ONNX Runtime type names and back', () => {
    const config: Record<DataType, string> = {
      BOOL: 'TYPE_BOOL',
      UINT8: 'TYPE_UINT8',
      UINT16: 'TYPE_UINT16',
      UINT32: 'TYPE_UINT32',
      UINT64: 'TYPE_UINT64',
      INT8: 'TYPE_INT8',
      INT16: 'TYPE_INT16',
      INT32: 'TYPE_INT32',
      INT64: 'TYPE_INT64',
      FP16: 'TYPE_FP16',
      FP32: 'TYPE_FP32',
      FP64: 'TYPE_FP64',
      BYTES: 'TYPE_STRING',
    };
    const ort: Record<DataType, string> = {
      BOOL: 'bool',
      UINT8: 'uint8',
      UINT16: 'uint16',
      UINT32: 'uint32',
      UINT64: 'uint64',
      INT8: 'int8',
      INT16: 'int16',
      INT32: 'int32',
      INT64: 'int64',
      FP16: 'float16',
      FP32: 'float32',
      FP64: 'float64',
      BYTES: 'string',
    };
    for (const d of DATATYPES) {
      expect(toConfigType(d)).toBe(config[d]);
      expect(fromConfigType(config[d])).toBe(d);
      expect(toOrtType(d)).toBe(ort[d]);
      expect(fromOrtType(ort[d])).toBe(d);
    }
    expect(fromConfigType('TYPE_BF16')).toBeUndefined();
    expect(fromConfigType('TYPE_INVALID')).toBeUndefined();
    expect(fromOrtType('bfloat16')).toBeUndefined();
  });

  it('elementCount multiplies dims (empty shape is a scalar)', () => {
    expect(elementCount([])).toBe(1);
    expect(elementCount([2, 3, 4])).toBe(24);
    expect(elementCount([5, 0, 7])).toBe(0);
  });
});

describe('JSON data → raw bytes → JSON, every datatype', () => {
  const cases: [Exclude<DataType, 'BYTES' | 'FP16'>, (number | boolean)[]][] = [
    ['BOOL', [true, false, true]],
    ['UINT8', [0, 1, 255]],
    ['UINT16', [0, 513, 65535]],
    ['UINT32', [0, 70000, 4294967295]],
    ['UINT64', [0, 4294967296, Number.MAX_SAFE_INTEGER]],
    ['INT8', [-128, -1, 127]],
    ['INT16', [-32768, -2, 32767]],
    ['INT32', [-2147483648, 12345, 2147483647]],
    ['INT64', [Number.MIN_SAFE_INTEGER, -1, Number.MAX_SAFE_INTEGER]],
    ['FP32', [0, -1.5, 0.1]],
    ['FP64', [0, -1.5, 0.1, 1e308]],
  ];

  it.each(cases)('%s', (dt, values) => {
    const raw = jsonToRaw(dt, values, 'x');
    expect(raw.equals(rawOf(dt, values))).toBe(true);
    expect(rawToJson(dt, raw, 'x')).toEqual(dt === 'FP32' ? values.map((v) => Math.fround(v as number)) : values);
  });

  it('FP16: exact halves are exact, others round to the nearest half', () => {
    const bits = [0x0000, 0x8000, 0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x3555];
    const values = bits.map(halfToNumber);
    const raw = jsonToRaw('FP16', values, 'x');
    expect(raw.equals(rawOf('FP16', bits))).toBe(true);
    expect(rawToJson('FP16', raw, 'x')).toEqual(values);
    // 0.1 lies between the halves 0x2e66 and 0x2e67; 0x2e66 is nearer.
    expect(Math.abs(halfToNumber(0x2e66) - 0.1)).toBeLessThan(Math.abs(halfToNumber(0x2e67) - 0.1));
    expect(jsonToRaw('FP16', [0.1], 'x').equals(rawOf('FP16', [0x2e66]))).toBe(true);
  });

  it('BYTES: strings become length-prefixed UTF-8 and back', () => {
    const s = ['', 'a', 'ünïcødé', '🦭', 'x'.repeat(300)];
    const raw = jsonToRaw('BYTES', s, 'x');
    expect(raw.equals(bytesRaw(s))).toBe(true);
    expect(rawToJson('BYTES', raw, 'x')).toEqual(s);
  });

  it('flattens nested arrays in row-major order', () => {
    expect(
      jsonToRaw(
        'INT32',
        [
          [1, 2],
          [3, [4, 5]],
        ],
        'x',
      ).equals(rawOf('INT32', [1, 2, 3, 4, 5])),
    ).toBe(true);
    expect(jsonToRaw('INT32', 7, 'x').equals(rawOf('INT32', [7]))).toBe(true);
    expect(jsonToRaw('BYTES', [['a'], ['b', 'c']], 'x').equals(bytesRaw(['a', 'b', 'c']))).toBe(true);
  });

  it(`refuses 'data' nested deeper than ${MAX_JSON_DATA_DEPTH} levels, however deep, without exhausting the stack`, () => {
    const nest = (depth: number): unknown => {
      let v: unknown = 3;
      for (let i = 0; i < depth; i++) v = [v];
      return v;
    };
    expect(jsonToRaw('INT32', nest(MAX_JSON_DATA_DEPTH), 'x').equals(rawOf('INT32', [3]))).toBe(true);
    for (const depth of [MAX_JSON_DATA_DEPTH + 1, 200_000]) {
      const e = expectServalError(() => jsonToRaw('INT32', nest(depth), 'x'), 'INVALID_ARG');
      expect(e.message).toBe(`Unable to parse 'data': nesting exceeds the maximum depth of ${MAX_JSON_DATA_DEPTH}`);
    }
  });

  it('64-bit integers accept bigint, exactly, across the whole range', () => {
    const u = [0n, 2n ** 53n + 1n, 2n ** 64n - 1n];
    const i = [-(2n ** 63n), 2n ** 63n - 1n, -(2n ** 53n) - 1n];
    expect(jsonToRaw('UINT64', u, 'x').equals(rawOf('UINT64', u))).toBe(true);
    expect(jsonToRaw('INT64', i, 'x').equals(rawOf('INT64', i))).toBe(true);
  });

  it('rejects values outside the datatype, naming the value and the type', () => {
    const bad: [DataType, unknown][] = [
      ['BOOL', 1],
      ['BOOL', 'true'],
      ['UINT8', 256],
      ['UINT8', -1],
      ['UINT16', 65536],
      ['UINT32', 2 ** 32],
      ['INT8', 128],
      ['INT8', -129],
      ['INT16', 32768],
      ['INT32', 2 ** 31],
      ['INT32', 1.5],
      ['INT32', '3'],
      ['INT32', null],
      ['UINT64', -1],
      ['UINT64', 2n ** 64n],
      ['INT64', 2n ** 63n],
      ['INT64', 0.5],
      ['FP32', '1.0'],
      ['FP64', true],
      ['FP16', null],
    ];
    for (const [dt, v] of bad) {
      const e = expectServalError(() => jsonToRaw(dt, [v], "input 'IN'"));
      expect(e.code, `${dt} ${String(v)}`).toBe('INVALID_ARG');
      expect(e.message).toMatch(new RegExp(`^input 'IN': value .* is not a valid ${dt}$`));
    }
    const e = expectServalError(() => jsonToRaw('BYTES', ['ok', 5], "input 'S'"));
    expect(e.message).toBe("input 'S': expected a string for a BYTES element, got 5");
  });

  it('rawToJson gives exact integers beyond 2^53 as ExactInteger, safe ones as numbers', () => {
    const out = rawToJson('UINT64', rawOf('UINT64', [5n, 2n ** 64n - 1n]), 'x');
    expect(out[0]).toBe(5);
    expect(out[1]).toBeInstanceOf(ExactInteger);
    expect((out[1] as ExactInteger).value).toBe(2n ** 64n - 1n);
    const neg = rawToJson('INT64', rawOf('INT64', [-(2n ** 63n)]), 'x');
    expect((neg[0] as ExactInteger).value).toBe(-(2n ** 63n));
  });

  it('typedView reads unaligned buffers correctly', () => {
    const backing = Buffer.alloc(1 + 8 * 3);
    rawOf('FP64', [1.5, -2.25, 1e-300]).copy(backing, 1);
    const view = typedView('FP64', backing.subarray(1));
    expect(Array.from(view as Float64Array)).toEqual([1.5, -2.25, 1e-300]);
    const i16 = typedView('INT16', backing.subarray(1, 7));
    expect(i16.length).toBe(3);
  });
});

describe('IEEE half precision', () => {
  it('halfToFloat agrees with the definition for all 65536 patterns', () => {
    for (let h = 0; h < 0x10000; h++) {
      const want = halfToNumber(h);
      const got = halfToFloat(h);
      if (Number.isNaN(want)) expect(got).toBeNaN();
      else if (got !== want) expect(got, `0x${h.toString(16)}`).toBe(want);
    }
  });

  it('floatToHalf(halfToFloat(h)) === h for every non-NaN pattern (incl. ±0, subnormals, ±Inf)', () => {
    for (let h = 0; h < 0x10000; h++) {
      if (Number.isNaN(halfToNumber(h))) continue;
      const back = floatToHalf(halfToNumber(h));
      if (back !== h) expect(back, `0x${h.toString(16)}`).toBe(h);
    }
  });

  it('NaN stays NaN', () => {
    const h = floatToHalf(NaN);
    expect((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0).toBe(true);
  });

  it('rounds to nearest, ties to even, between every pair of adjacent finite halves', () => {
    for (let h = 0; h < 0x7bff; h++) {
      const lo = halfToNumber(h);
      const hi = halfToNumber(h + 1);
      const mid = (lo + hi) / 2; // exact in float32: halves have 11 significant bits
      expect(Math.fround(mid)).toBe(mid);
      const even = (h & 1) === 0 ? h : h + 1;
      if (floatToHalf(mid) !== even) expect(floatToHalf(mid), `tie between 0x${h.toString(16)} and next`).toBe(even);
      const above = Math.fround(mid + (hi - lo) / 8);
      const below = Math.fround(mid - (hi - lo) / 8);
      if (floatToHalf(above) !== h + 1) expect(floatToHalf(above)).toBe(h + 1);
      if (floatToHalf(below) !== h) expect(floatToHalf(below)).toBe(h);
      // Negative values mirror the positive ones.
      if (floatToHalf(-above) !== (0x8000 | (h + 1))) expect(floatToHalf(-above)).toBe(0x8000 | (h + 1));
    }
  });

  it('overflows to infinity only from 65520 up; underflows to signed zero', () => {
    expect(floatToHalf(65504)).toBe(0x7bff);
    expect(floatToHalf(65519.99)).toBe(0x7bff);
    expect(floatToHalf(65520)).toBe(0x7c00);
    expect(floatToHalf(1e10)).toBe(0x7c00);
    expect(floatToHalf(-1e10)).toBe(0xfc00);
    expect(floatToHalf(Infinity)).toBe(0x7c00);
    expect(floatToHalf(2 ** -26)).toBe(0x0000);
    expect(floatToHalf(-(2 ** -26))).toBe(0x8000);
    expect(floatToHalf(2 ** -25)).toBe(0x0000); // tie with the smallest subnormal: to even (zero)
    expect(floatToHalf(Math.fround(2 ** -25 * 1.0001))).toBe(0x0001);
  });
});

describe('BYTES framing', () => {
  it('joinBytes and splitBytes are inverse, and match the wire format', () => {
    const elements = ['', 'abc', 'ünï', '\u0000\u0001', 'y'.repeat(70000)];
    const joined = joinBytes(elements);
    expect(joined.equals(bytesRaw(elements))).toBe(true);
    expect(splitBytes(joined, 'x').map((b) => Buffer.from(b).toString())).toEqual(elements);
    expect(countBytesElements(joined, 'x')).toBe(5);
    const bin = [Uint8Array.of(0xff, 0x00), Uint8Array.of()];
    expect(splitBytes(joinBytes(bin), 'x').map((b) => [...b])).toEqual([[0xff, 0], []]);
  });

  it('an empty buffer holds no elements; zero elements join to an empty buffer', () => {
    expect(splitBytes(new Uint8Array(0), 'x')).toEqual([]);
    expect(joinBytes([]).byteLength).toBe(0);
  });

  it('splitBytes returns views into the buffer, not copies', () => {
    const joined = joinBytes(['hello']);
    const [el] = splitBytes(joined, 'x');
    expect(el!.buffer).toBe(joined.buffer);
    expect(el!.byteOffset).toBe(joined.byteOffset + 4);
  });

  it('rejects a truncated length prefix', () => {
    const buf = Buffer.concat([bytesRaw(['ab']), Buffer.from([1, 0])]);
    const e = expectServalError(() => splitBytes(buf, "input 'S'"));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe("input 'S': malformed BYTES data, truncated 4-byte length prefix at byte 6");
  });

  it('rejects an element running past the end', () => {
    const buf = bytesRaw(['abc']);
    buf.writeUInt32LE(100, 0);
    const e = expectServalError(() => countBytesElements(buf, "input 'S'"));
    expect(e.message).toBe("input 'S': malformed BYTES data, element of length 100 at byte 0 runs past the end of the 7-byte buffer");
    const huge = Buffer.from([0xff, 0xff, 0xff, 0xff]);
    expect(() => splitBytes(huge, 'x')).toThrow(/runs past the end of the 4-byte buffer/);
  });
});

describe('exact 64-bit integers in JSON (core/json.ts)', () => {
  it('encodeJson prints ExactInteger and bigint values as bare exact digits', () => {
    const text = encodeJson({ a: [new ExactInteger(2n ** 64n - 1n), 1, new ExactInteger(-(2n ** 63n))], b: 2n ** 60n + 1n });
    expect(text).toBe('{"a":[18446744073709551615,1,-9223372036854775808],"b":1152921504606846977}');
  });

  it('encodeJson leaves everything else as JSON.stringify does', () => {
    const v = { s: 'x"y', n: [1.5, 0, 1e300, -2.5e-300], t: true, z: null, nested: { a: [] } };
    expect(encodeJson(v)).toBe(JSON.stringify(v));
  });

  it('encodeJson keeps the sign of -0 (as Triton writes it)', () => {
    expect(encodeJson({ n: [-0, 0, -1] })).toBe('{"n":[-0.0,0,-1]}');
    expect(Object.is((JSON.parse(encodeJson([-0])) as number[])[0], -0)).toBe(true);
  });

  it('rawToJson → encodeJson keeps UINT64 values above 2^53 exact', () => {
    const values = [2n ** 53n + 1n, 2n ** 64n - 1n, 3n];
    const json = encodeJson({ data: rawToJson('UINT64', rawOf('UINT64', values), 'x') });
    expect(json).toBe(`{"data":[${values.join(',')}]}`);
  });

  it('encodeJson never turns a string into a number, whatever it contains', () => {
    const doc = { id: '\u0000#12', data: [new ExactInteger(2n ** 60n)], s: ['\u0000#-5'] };
    expect(JSON.parse(encodeJson(doc))).toEqual({ id: '\u0000#12', data: [2 ** 60], s: ['\u0000#-5'] });
  });

  it('parseJsonExact keeps long integers exact as bigint and parses the rest like JSON.parse', () => {
    const doc = parseJsonExact(
      '{"u":[18446744073709551615, 9007199254740993, 1234567890123456, 7],"i":-9223372036854775808,"f":1.5e300}',
    ) as {
      u: unknown[];
      i: unknown;
      f: unknown;
    };
    expect(doc.u).toEqual([18446744073709551615n, 9007199254740993n, 1234567890123456, 7]);
    expect(doc.i).toBe(-9223372036854775808n);
    expect(doc.f).toBe(1.5e300);
    const plain = '{"a":[1,2.5,-3e-7],"s":"12345678901234567890","n":null}';
    expect(parseJsonExact(plain)).toEqual(JSON.parse(plain));
  });

  it('parseJsonExact keeps doubles whose fraction has 16+ digits (e.g. 0.1 + 0.2)', () => {
    const values = [0.1 + 0.2, 1 / 3, Math.PI, 2 / 3, 123.45678901234567];
    const text = JSON.stringify({ data: values, id: '12345678901234567' });
    expect(parseJsonExact(text)).toEqual({ data: values, id: '12345678901234567' });
  });

  it('parseJsonExact never turns a string into a number, whatever it contains', () => {
    const text = JSON.stringify({ id: '\u0000#12', data: ['\u0000#-3'] }).replace('}', ',"big":12345678901234567890}');
    expect(parseJsonExact(text)).toEqual({ id: '\u0000#12', data: ['\u0000#-3'], big: 12345678901234567890n });
  });

  it('parseJsonExact reports malformed JSON', () => {
    expect(() => parseJsonExact('{"a": 12345678901234567890')).toThrow();
    expect(() => parseJsonExact('{"a": [1,}')).toThrow();
  });
});
