// --metrics-config in the metrics front-end: summary_latencies (Triton's nv_inference_*_summary_us
// summaries, fed by every successful request as it completes), summary_quantiles, and
// counter_latencies=false (no nv_inference_*_duration_us counters). Against a fake core whose one
// version's ModelStats records requests with known times.

import type client from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { buildRegistry, stopLatencySummaries } from '../../src/frontends/metrics/metrics.js';
import { latencyObservers } from '../../src/kernel/latency_observers.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { fakeCore } from '../helpers/frontends.js';

const registries: client.Registry[] = [];
afterEach(() => {
  for (const r of registries.splice(0)) stopLatencySummaries(r);
  expect(latencyObservers.size).toBe(0);
});

/** A core with the given versions loaded (their ModelStats), changeable between scrapes. */
function coreWith(rows: { model: string; version: string; stats: ModelStats }[]) {
  return { ...fakeCore(), metricsSnapshot: () => rows };
}

/** One successful request: `queueUs` queued, then compute input/infer/output of 1, `inferUs`, 2 µs. */
function succeed(stats: ModelStats, queueUs: number, inferUs: number): void {
  const start = 1_000_000n;
  const computeStart = start + BigInt(queueUs * 1000);
  const end = computeStart + BigInt((3 + inferUs) * 1000);
  stats.recordSuccess(
    1,
    {
      requestStartNs: start,
      queueStartNs: start,
      computeStartNs: computeStart,
      computeInputNs: 1000,
      computeInferNs: inferUs * 1000,
      computeOutputNs: 2000,
    },
    end,
  );
}

function build(core: ReturnType<typeof coreWith>, opts: Parameters<typeof buildRegistry>[2]): client.Registry {
  const r = buildRegistry(core, undefined, opts);
  registries.push(r);
  return r;
}

const L = 'model="m",version="1"';

describe('--metrics-config summary_latencies=true', () => {
  it('exports Triton’s five latency summaries with the default quantiles, _count and _sum', async () => {
    const stats = new ModelStats();
    const registry = build(coreWith([{ model: 'm', version: '1', stats }]), { summaryLatencies: true });
    for (let i = 1; i <= 100; i++) succeed(stats, i, 10 * i);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE nv_inference_queue_summary_us summary\n');
    expect(text).toContain(
      '# HELP nv_inference_request_summary_us Summary of inference request duration in microseconds (includes cached requests)\n',
    );
    for (const name of ['request', 'queue', 'compute_input', 'compute_infer', 'compute_output']) {
      expect(text).toContain(`nv_inference_${name}_summary_us_count{${L}} 100\n`);
      for (const q of ['0.5', '0.9', '0.95', '0.99', '0.999'])
        expect(text).toMatch(new RegExp(`nv_inference_${name}_summary_us\\{${L},quantile="${q}"\\} \\d`));
    }
    // Sums in µs, as the counters would have them: queue 1+…+100, compute infer 10×(1+…+100).
    expect(text).toContain(`nv_inference_queue_summary_us_sum{${L}} 5050\n`);
    expect(text).toContain(`nv_inference_compute_infer_summary_us_sum{${L}} 50500\n`);
    expect(text).toContain(`nv_inference_compute_input_summary_us_sum{${L}} 100\n`);
    const median = Number(/nv_inference_compute_infer_summary_us\{model="m",version="1",quantile="0.5"\} (\S+)/.exec(text)![1]);
    expect(median).toBeGreaterThanOrEqual(450);
    expect(median).toBeLessThanOrEqual(550);
    // Triton's (prometheus-cpp's) line order: _count, _sum, then the quantiles.
    const lines = text.split('\n').filter((l) => l.startsWith('nv_inference_queue_summary_us'));
    expect(lines.map((l) => l.replace(/ \S+$/, ''))).toEqual([
      `nv_inference_queue_summary_us_count{${L}}`,
      `nv_inference_queue_summary_us_sum{${L}}`,
      ...['0.5', '0.9', '0.95', '0.99', '0.999'].map((q) => `nv_inference_queue_summary_us{${L},quantile="${q}"}`),
    ]);
    // The counters stay by default.
    expect(text).toContain(`nv_inference_queue_duration_us{${L}} 5050\n`);
  });

  it('uses summary_quantiles, leaves the request summary out for a cached model, and drops unloaded versions', async () => {
    const stats = new ModelStats();
    stats.cacheEnabled = true;
    const rows = [{ model: 'm', version: '1', stats }];
    const registry = build(coreWith(rows), {
      summaryLatencies: true,
      summaryQuantiles: [
        [0.25, 0.01],
        [0.75, 0.01],
      ],
    });
    succeed(stats, 5, 5);
    stats.recordCacheHit(0n, 7000n, 8000n, 9000n);
    let text = await registry.metrics();
    expect(text).toMatch(new RegExp(`nv_inference_queue_summary_us\\{${L},quantile="0.25"\\} `));
    expect(text).not.toMatch(/quantile="0.5"/);
    expect(text).not.toContain(`nv_inference_request_summary_us_count{${L}}`);
    // The hit is a queue observation (7 µs), not a compute one.
    expect(text).toContain(`nv_inference_queue_summary_us_count{${L}} 2\n`);
    expect(text).toContain(`nv_inference_queue_summary_us_sum{${L}} 12\n`);
    expect(text).toContain(`nv_inference_compute_infer_summary_us_count{${L}} 1\n`);
    rows.length = 0;
    text = await registry.metrics();
    expect(text).not.toContain('model="m"');
  });

  it('is off by default: no summaries, no observer', async () => {
    const stats = new ModelStats();
    const registry = build(coreWith([{ model: 'm', version: '1', stats }]), {});
    expect(latencyObservers.size).toBe(0);
    succeed(stats, 1, 1);
    expect(await registry.metrics()).not.toContain('_summary_us');
  });
});

describe('--metrics-config counter_latencies=false', () => {
  it('leaves out the latency counters and keeps the request counts', async () => {
    const stats = new ModelStats();
    const registry = build(coreWith([{ model: 'm', version: '1', stats }]), { counterLatencies: false });
    succeed(stats, 1, 1);
    const text = await registry.metrics();
    expect(text).not.toContain('_duration_us');
    expect(text).toContain(`nv_inference_request_success{${L}} 1\n`);
  });
});
