// The density benchmark's arithmetic (tools/bench/density/logic.ts): /proc status parsing, cost per
// instance, the goals of issue 16 item 3 and whether the dedicated mode fits the machine.
import { describe, expect, it } from 'vitest';
import {
  type DensityPoint,
  dedicatedFeasible,
  evaluateGoals,
  MiB,
  parseStatus,
  perInstance,
  renderTable,
  sumMetric,
} from '../../tools/bench/density/logic.js';

const point = (mode: DensityPoint['mode'], models: number, rssMiB: number, extra: Partial<DensityPoint> = {}): DensityPoint => ({
  mode,
  models,
  weightBytes: models * 1000,
  readyS: 1 + models / 100,
  rss: rssMiB * MiB,
  threads: 11 + (mode === 'dedicated' ? 2 * models : Math.min(models, 2)),
  ...extra,
});

describe('density logic', () => {
  it('reads VmRSS and Threads from /proc/<pid>/status text', () => {
    expect(parseStatus('Name:\tnode\nVmRSS:\t  345600 kB\nThreads:\t14\n')).toEqual({ rss: 345600 * 1024, threads: 14 });
    expect(() => parseStatus('Name:\tnode\n')).toThrow('no VmRSS');
  });

  it('per instance: RSS beyond the 0-model server and the weights, divided by instances', () => {
    const base = point('shared', 0, 80);
    const p = point('shared', 100, 180);
    expect(perInstance(p, base)).toBeCloseTo((100 * MiB - 100_000) / 100);
    expect(perInstance(p, base, 2)).toBeCloseTo((100 * MiB - 100_000) / 200);
    expect(perInstance(base, base)).toBeNaN();
  });

  it('goals are computed from the 500-model shared point, and missed when it is absent or over target', () => {
    const base = point('shared', 0, 80);
    const good = point('shared', 500, 80 + 500 * 2, { requests: 1000, errors: 0 });
    expect(evaluateGoals([base, good]).map((g) => g.met)).toEqual([true, true, true]);
    const fat = point('shared', 500, 80 + 500 * 6, { readyS: 31, requests: 1000, errors: 2 });
    const r = evaluateGoals([base, fat]);
    expect(r.map((g) => g.met)).toEqual([false, false, false]);
    expect(r[2]!.value).toBe('2 errors in 1000 requests');
    expect(evaluateGoals([base]).every((g) => !g.met && g.value === 'not measured')).toBe(true);
  });

  it('the table lists both modes with per-instance cost and threads per model', () => {
    const t = renderTable([point('dedicated', 0, 80), point('dedicated', 20, 340), point('shared', 0, 80), point('shared', 20, 100)]);
    const rows = t.split('\n');
    expect(rows).toHaveLength(6);
    expect(rows[3]).toMatch(/^\| dedicated \| 20 \| 1\.2 \| 340 \| 13\.63 \| 51 \| 2\.00 \|/);
    expect(rows[5]).toMatch(/^\| shared \| 20 \| 1\.2 \| 100 \| 1\.05 \| 13 \| 0\.10 \|/);
  });

  it('the dedicated mode runs a size only when its projected memory and time fit', () => {
    const base = point('dedicated', 0, 80, { readyS: 1 });
    const at100 = point('dedicated', 100, 80 + 1000, { readyS: 11 });
    expect(dedicatedFeasible(at100, base, 500, 20_000 * MiB, 150)).toEqual({ ok: true, why: '' });
    expect(dedicatedFeasible(at100, base, 500, 8_000 * MiB, 150).why).toMatch(/^projected RSS 5080 MiB > half/);
    expect(dedicatedFeasible(at100, base, 500, 20_000 * MiB, 30).why).toBe('projected load time 51 s > 30 s allowed to this section');
  });
});

describe('sumMetric', () => {
  it('adds a counter over every label set, and nothing of longer names', () => {
    const text = [
      '# TYPE nv_inference_request_success counter',
      'nv_inference_request_success{model="a",version="1"} 3',
      'nv_inference_request_success{model="b",version="1"} 4',
      'nv_inference_request_success_total{model="b"} 100',
      'nv_inference_request_failure{model="a",version="1"} 1',
    ].join('\n');
    expect(sumMetric(text, 'nv_inference_request_success')).toBe(7);
    expect(sumMetric(text, 'nv_inference_request_failure')).toBe(1);
    expect(sumMetric(text, 'nv_inference_count')).toBe(0);
  });
});
