// A held trace (RequestTrace.hold): a decoupled request whose final response comes before its
// execute() returns is released only when both have happened, as Triton releases it. Its
// REQUEST_END is stamped at the release and the trace is written then, so the queue and compute
// times the scheduler stamps when the execution returns are kept.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TRACE_DEFAULTS } from '../../src/trace/settings.js';
import { TraceManager } from '../../src/trace/trace_manager.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'serval-trace-release-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const names = (file: string): string[] =>
  (JSON.parse(readFileSync(file, 'utf8')) as { timestamps?: { name: string }[] }[]).flatMap((r) => (r.timestamps ?? []).map((s) => s.name));

describe('a held trace', () => {
  it('stamps REQUEST_END and ends at the release, keeping what was stamped after the final response', async () => {
    const m = new TraceManager({ ...TRACE_DEFAULTS, file: path.join(dir, 'trace.json'), level: 1, rate: 1 });
    const t = m.sample('simple')!;
    const release = t.hold!();
    t.stamp('REQUEST_START', 1n);
    // The final response: the core stamps REQUEST_END, the front-end ends the trace.
    t.stamp('REQUEST_END', 2n);
    t.stamp('HTTP_SEND_END', 3n);
    t.end();
    // execute() returns: the scheduler's stamps.
    t.stamp('COMPUTE_START', 4n);
    const before = process.hrtime.bigint();
    release();
    release(); // once only
    t.stamp('COMPUTE_END', 5n); // after the end: dropped
    await m.close();
    const file = path.join(dir, 'trace.json');
    expect(names(file)).toEqual(['REQUEST_START', 'HTTP_SEND_END', 'COMPUTE_START', 'REQUEST_END']);
    const records = JSON.parse(readFileSync(file, 'utf8')) as { timestamps?: { name: string; ns: number }[] }[];
    const end = records.flatMap((r) => r.timestamps ?? []).find((s) => s.name === 'REQUEST_END')!;
    expect(BigInt(end.ns)).toBeGreaterThanOrEqual(before);
  });

  it('released before the final response changes nothing', async () => {
    const m = new TraceManager({ ...TRACE_DEFAULTS, file: path.join(dir, 'trace.json'), level: 1, rate: 1 });
    const t = m.sample('simple')!;
    const release = t.hold!();
    t.stamp('REQUEST_START', 1n);
    t.stamp('COMPUTE_START', 2n);
    release();
    t.stamp('REQUEST_END', 3n);
    t.end();
    await m.close();
    const records = JSON.parse(readFileSync(path.join(dir, 'trace.json'), 'utf8')) as { timestamps?: { name: string; ns: number }[] }[];
    expect(records.flatMap((r) => r.timestamps ?? [])).toEqual([
      { name: 'REQUEST_START', ns: 1 },
      { name: 'COMPUTE_START', ns: 2 },
      { name: 'REQUEST_END', ns: 3 },
    ]);
  });
});
