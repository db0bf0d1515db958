// `npm run fuzz -- --cases N [--seed S]`: the fuzzer of test/fuzz/fuzz.ts for longer runs than CI's.
// Exits 1 when any case failed (each failure is printed with the input that caused it).
import { formatReports, runFuzz } from './fuzz.js';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isSafeInteger(v) || v < 0) {
    console.error(`--${name} takes a non-negative integer`);
    process.exit(2);
  }
  return v;
}

const cases = flag('cases', 100_000);
const seed = flag('seed', Date.now() % 2 ** 31);
const started = Date.now();
const reports = await runFuzz({ cases, seed });
console.log(formatReports(reports, seed));
console.log(`fuzz took ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(reports.some((r) => r.failures.length) ? 1 : 0);
