// src/kernel/json.ts: parseJsonExact keeps 16+ digit integers exact, at any nesting depth (as
// Triton 2.73's iterative JSON reader, a deeply nested body parses; the checks after it refuse it);
// encodeJson writes float tensor data as Triton does.
import { describe, expect, it } from 'vitest';
import { floatText, rawToJson } from '../../src/kernel/datatypes.js';
import { encodeJson, parseJsonExact } from '../../src/kernel/json.js';

describe('parseJsonExact', () => {
  it('keeps integers past 2^53 exact in nested objects and arrays', () => {
    const doc = parseJsonExact('{"a":[1,{"b":18446744073709551615}],"c":"12345678901234567890","d":9007199254740993}') as {
      a: [number, { b: bigint }];
      c: string;
      d: bigint;
    };
    expect(doc.a[1].b).toBe(18446744073709551615n);
    expect(doc.c).toBe('12345678901234567890');
    expect(doc.d).toBe(9007199254740993n);
    expect(parseJsonExact('12345678901234567890')).toBe(12345678901234567890n);
  });

  it('parses 200 000 levels of nesting next to a long integer without exhausting the stack', () => {
    const depth = 200_000;
    const doc = parseJsonExact(`{"n":1234567890123456789,"deep":${'['.repeat(depth)}${']'.repeat(depth)}}`) as {
      n: bigint;
      deep: unknown[];
    };
    expect(doc.n).toBe(1234567890123456789n);
    let level = 0;
    for (let v: unknown = doc.deep; Array.isArray(v) && v.length; v = v[0]) level++;
    expect(level).toBe(depth - 1);
  });
});

describe('float tensor data in JSON', () => {
  const f64 = (values: number[]): Uint8Array => new Uint8Array(new Float64Array(values).buffer);

  it("is written as Triton's rapidjson writes it: whole floats keep .0, exponents have no '+', -0 keeps its sign", () => {
    const data = rawToJson('FP64', f64([1, 0.5, 1e21, 1e-7, -0, 123456789012, 1.5e300, 1e20, Number.NaN]), 'x');
    expect(encodeJson({ data })).toBe('{"data":[1.0,0.5,1e21,1e-7,-0.0,123456789012.0,1.5e300,100000000000000000000.0,null]}');
    // FP32 values are their float's exact double, as in Triton (the float widened, then written).
    const f32 = rawToJson('FP32', new Uint8Array(new Float32Array([16777216, 0.1]).buffer), 'x');
    expect(encodeJson(f32)).toBe('[16777216.0,0.10000000149011612]');
  });

  it('leaves integer tensors and other numbers as JSON.stringify writes them', () => {
    const ints = rawToJson('INT32', new Uint8Array(new Int32Array([1, -2]).buffer), 'x');
    expect(encodeJson({ ints, n: 3, f: 0.5 })).toBe('{"ints":[1,-2],"n":3,"f":0.5}');
    expect(floatText(2)).toBe('2.0');
    expect(floatText(-3e-9)).toBe('-3e-9');
  });
});
