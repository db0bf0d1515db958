// src/kernel/json.ts: parseJsonExact keeps 16+ digit integers exact, at any nesting depth (as
// Triton 2.73's iterative JSON reader, a deeply nested body parses; the checks after it refuse it).
import { describe, expect, it } from 'vitest';
import { parseJsonExact } from '../../src/kernel/json.js';

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
