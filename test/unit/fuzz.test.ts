// The bounded fuzzer (test/fuzz/fuzz.ts) in CI: 24,000 seeded cases over the HTTP JSON and binary
// codecs, raw HTTP/1.1 bytes on sockets (the lean inference path), the gRPC ModelInfer decoder, the config.pbtxt parser and the repository API, with no
// crash, hang or undocumented 5xx. The counts are printed; a failure prints its input. A fixed seed
// keeps CI repeatable; SERVAL_FUZZ_SEED picks another.
import { describe, expect, it } from 'vitest';
import { jsonToRaw } from '../../src/kernel/datatypes.js';
import { parseJsonExact } from '../../src/kernel/json.js';
import { formatReports, mutateBytes, mutateJson, Rng, runFuzz } from '../fuzz/fuzz.js';
import { expectServalError } from '../helpers/errors.js';

const CASES = 24_000;
const SEED = Number(process.env.SERVAL_FUZZ_SEED ?? 20_261_123);

describe('fuzzing', () => {
  it('the mutators are seeded: one seed, one sequence of cases', () => {
    const a = new Rng(7);
    const b = new Rng(7);
    const doc = { inputs: [{ name: 'X', shape: [1, 2], data: [1, 2] }] };
    for (let i = 0; i < 50; i++) {
      expect(mutateJson(a, doc)).toEqual(mutateJson(b, doc));
      expect(mutateBytes(a, Buffer.from('hello world'))).toEqual(mutateBytes(b, Buffer.from('hello world')));
    }
    expect(doc).toEqual({ inputs: [{ name: 'X', shape: [1, 2], data: [1, 2] }] }); // the seed is never changed
  });

  it('found by fuzzing: an exact big integer inside a bad JSON element is reported, not a 500', () => {
    const data = parseJsonExact('[{"binary_data":[4294967296,-9007199254740993]},1]') as unknown[];
    expect(expectServalError(() => jsonToRaw('INT32', data, "input 'X'"), 'INVALID_ARG').message).toBe(
      `input 'X': value {"binary_data":[4294967296,"-9007199254740993"]} is not a valid INT32`,
    );
  });

  it(`${CASES} cases: no crash, hang or undocumented server error`, async () => {
    const reports = await runFuzz({ cases: CASES, seed: SEED });
    const text = formatReports(reports, SEED);
    console.log(text);
    expect(reports.reduce((n, r) => n + r.cases, 0)).toBeGreaterThanOrEqual(20_000);
    // Every target saw accepted and refused cases: the mutations neither all pass nor all miss.
    for (const r of reports) {
      expect(r.refused, r.target).toBeGreaterThan(0);
      expect(r.ok, r.target).toBeGreaterThan(0);
    }
    expect(
      reports.flatMap((r) => r.failures),
      text,
    ).toEqual([]);
  }, 600_000);
});
