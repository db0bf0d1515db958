// Serialized BYTES walked without a view per element (src/kernel/datatypes.ts walkBytes,
// countBytesElements, firstNonUtf8Element): what validation uses for tensors of many small elements.
import { describe, expect, it } from 'vitest';
import { countBytesElements, firstNonUtf8Element, joinBytes, splitBytes, walkBytes } from '../../src/kernel/datatypes.js';
import { ServalError } from '../../src/kernel/errors.js';

describe('walkBytes', () => {
  it('gives every element’s byte range, as splitBytes’ views', () => {
    const buf = joinBytes(['a', '', 'héllo', 'xyz']);
    const ranges: [number, number][] = [];
    expect(walkBytes(buf, 'x', (s, e) => ranges.push([s, e]))).toBe(4);
    expect(ranges.map(([s, e]) => buf.subarray(s, e))).toEqual(splitBytes(buf, 'x'));
  });

  it('counts a million empty elements', () => {
    const buf = new Uint8Array(4 * 1_000_000);
    expect(countBytesElements(buf, 'x')).toBe(1_000_000);
  });

  it('refuses malformed data as splitBytes does', () => {
    const buf = Buffer.concat([joinBytes(['ab']), Buffer.from([9, 0, 0, 0, 1])]);
    let walked: unknown;
    let split: unknown;
    try {
      walkBytes(buf, "input 'S'");
    } catch (e) {
      walked = e;
    }
    try {
      splitBytes(buf, "input 'S'");
    } catch (e) {
      split = e;
    }
    expect(walked).toBeInstanceOf(ServalError);
    expect((walked as Error).message).toBe((split as Error).message);
    expect((walked as Error).message).toContain('runs past the end');
  });
});

describe('firstNonUtf8Element', () => {
  it('is -1 for ASCII and for valid multi-byte text', () => {
    expect(firstNonUtf8Element(joinBytes(['plain', '', 'ascii']))).toBe(-1);
    expect(firstNonUtf8Element(joinBytes(['héllo', '日本語', '🙂']))).toBe(-1);
  });

  it('names the first element that is not UTF-8, also after an ASCII start', () => {
    const bad = Buffer.from([0x61, 0x62, 0xc3]); // "ab" then a truncated sequence
    expect(firstNonUtf8Element(joinBytes(['ok', 'é', bad, Buffer.from([0xff])]))).toBe(2);
    expect(firstNonUtf8Element(joinBytes([Buffer.from([0xff])]))).toBe(0);
  });

  it('judges each element alone: a sequence split across two elements is not UTF-8', () => {
    const e = Buffer.from('é'); // c3 a9
    expect(firstNonUtf8Element(joinBytes([e.subarray(0, 1), e.subarray(1)]))).toBe(0);
  });
});
