// Prometheus metrics with Triton's names and labels. Per-request metrics are read from the same
// statistics the statistics API reports, at scrape time, so the two always agree. Triton's
// "per interval" metrics (CPU utilization and memory) are sampled every --metrics-interval-ms,
// so every scraper sees the same value whatever its own scrape interval.
import http from 'node:http';
import os from 'node:os';
import client from 'prom-client';
import type { CoreApi, ModelMetricsRow } from '../../core/api.js';
import { pythonCustomMetrics } from '../../kernel/custom_metrics.js';
import { type LatencyObservation, type LatencyObserver, latencyObservers } from '../../kernel/latency_observers.js';
import type { FailureReason } from '../../stats/model_stats.js';

type Labels = { model: string; version: string };

const FAILURE_REASONS: readonly FailureReason[] = ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'];

function labelsOf(row: ModelMetricsRow): Labels {
  return { model: row.model, version: row.version };
}

export interface MetricsOptions {
  /** --metrics-interval-ms: how often the per-interval metrics are sampled. */
  intervalMs: number;
  /** --allow-cpu-metrics. */
  cpuMetrics: boolean;
  /** Triton's --metrics-config histogram_latencies=true (off by default, as in Triton). */
  histogramLatencies?: boolean;
  /** The rest of --metrics-config (RegistryOptions). */
  counterLatencies?: boolean;
  summaryLatencies?: boolean;
  summaryQuantiles?: [number, number][];
}

/** What buildRegistry exports besides the metrics every Triton exports. */
export interface RegistryOptions {
  /** Triton's histogram_latencies: nv_inference_first_response_histogram_ms. */
  histogramLatencies?: boolean;
  /** Triton's counter_latencies (default true): the nv_inference_*_duration_us counters. */
  counterLatencies?: boolean;
  /** Triton's summary_latencies (default false): the nv_inference_*_summary_us summaries. */
  summaryLatencies?: boolean;
  /** Triton's summary_quantiles: [quantile, error] pairs (Triton's defaults when absent). */
  summaryQuantiles?: [number, number][];
}

/** The machine's CPU utilization over the last interval and its memory, sampled on a timer. */
export class CpuSampler {
  utilization = 0;
  memoryTotal = os.totalmem();
  memoryUsed = os.totalmem() - os.freemem();
  private last = CpuSampler.times();
  private readonly timer: NodeJS.Timeout;

  constructor(intervalMs: number) {
    this.timer = setInterval(() => this.sample(), Math.max(1, intervalMs));
    this.timer.unref();
  }

  private static times(): { busy: number; total: number } {
    let busy = 0;
    let total = 0;
    for (const { times: t } of os.cpus()) {
      const all = t.user + t.nice + t.sys + t.irq + t.idle;
      busy += all - t.idle;
      total += all;
    }
    return { busy, total };
  }

  sample(): void {
    const now = CpuSampler.times();
    const total = now.total - this.last.total;
    this.utilization = total > 0 ? Math.min(1, Math.max(0, (now.busy - this.last.busy) / total)) : 0;
    this.last = now;
    this.memoryTotal = os.totalmem();
    this.memoryUsed = this.memoryTotal - os.freemem();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

export function buildRegistry(core: CoreApi, cpu?: CpuSampler, opts: RegistryOptions = {}): client.Registry {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const versions = (): ModelMetricsRow[] => core.metricsSnapshot();

  /** A counter whose value is read from ModelStats at scrape time, for the versions `which` keeps. */
  const counter = (
    name: string,
    help: string,
    read: (row: ModelMetricsRow) => number,
    which: (row: ModelMetricsRow) => boolean = () => true,
  ): void => {
    new client.Counter({
      name,
      help,
      labelNames: ['model', 'version'],
      registers: [registry],
      collect() {
        this.reset();
        for (const mv of versions()) if (which(mv)) this.inc(labelsOf(mv), read(mv));
      },
    });
  };
  const us = (ns: number): number => Math.floor(ns / 1000);

  counter('nv_inference_request_success', 'Number of successful inference requests, all batch sizes', (m) => m.stats.success.count);
  new client.Counter({
    name: 'nv_inference_request_failure',
    help: 'Number of failed inference requests, all batch sizes',
    labelNames: ['model', 'version', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      // Every reason from the first scrape on, 0 until it happens (Triton 2.51 does so too).
      for (const mv of versions()) {
        for (const reason of FAILURE_REASONS) this.inc({ ...labelsOf(mv), reason }, mv.stats.failuresByReason.get(reason) ?? 0);
      }
    },
  });
  counter('nv_inference_count', 'Number of inferences performed (does not include cached requests)', (m) => m.stats.inferenceCount);
  counter(
    'nv_inference_exec_count',
    'Number of model executions performed (does not include cached requests)',
    (m) => m.stats.executionCount,
  );
  // --metrics-config counter_latencies=false leaves out the latency counters (the cache's too, as Triton).
  const latencyCounter: typeof counter = opts.counterLatencies === false ? () => {} : counter;
  latencyCounter(
    'nv_inference_request_duration_us',
    'Cumulative inference request duration in microseconds (includes cached requests)',
    (m) => us(m.stats.success.ns),
  );
  latencyCounter(
    'nv_inference_queue_duration_us',
    'Cumulative inference queuing duration in microseconds (includes cached requests)',
    (m) => us(m.stats.queue.ns),
  );
  latencyCounter(
    'nv_inference_compute_input_duration_us',
    'Cumulative compute input duration in microseconds (does not include cached requests)',
    (m) => us(m.stats.computeInput.ns),
  );
  latencyCounter(
    'nv_inference_compute_infer_duration_us',
    'Cumulative compute inference duration in microseconds (does not include cached requests)',
    (m) => us(m.stats.computeInfer.ns),
  );
  latencyCounter(
    'nv_inference_compute_output_duration_us',
    'Cumulative inference compute output duration in microseconds (does not include cached requests)',
    (m) => us(m.stats.computeOutput.ns),
  );
  // Serval's own (Triton has no such metric): instances replaced after their worker or stub died.
  counter(
    'nv_inference_instance_restarts',
    'Number of model instances restarted after they stopped unexpectedly',
    (m) => m.stats.instanceRestarts,
  );
  new client.Gauge({
    name: 'nv_inference_pending_request_count',
    help: 'Instantaneous number of pending requests awaiting execution per-model.',
    labelNames: ['model', 'version'],
    registers: [registry],
    collect() {
      this.reset();
      for (const mv of versions()) this.set(labelsOf(mv), mv.stats.pending);
    },
  });
  // Serval's own: the latency-budget batcher's current queue delay (docs/batching.md), only for
  // models with a p99 target.
  new client.Gauge({
    name: 'serval_dynamic_batching_queue_delay_us',
    help: 'Current queue delay in microseconds chosen by the latency-budget batcher, per-model.',
    labelNames: ['model', 'version'],
    registers: [registry],
    collect() {
      this.reset();
      for (const mv of versions()) {
        const delay = mv.stats.adaptiveQueueDelayNs;
        if (delay) this.set(labelsOf(mv), delay() / 1000);
      }
    },
  });

  // Triton's response cache metrics, for the versions the cache serves (docs/response_cache.md).
  const cacheCounter = (name: string, help: string, read: (row: ModelMetricsRow) => number): void =>
    latencyCounter(name, help, read, (mv) => mv.stats.cacheEnabled);
  cacheCounter('nv_cache_num_hits_per_model', 'Number of cache hits per model', (m) => m.stats.cacheHit.count);
  cacheCounter('nv_cache_num_misses_per_model', 'Number of cache misses per model', (m) => m.stats.cacheMiss.count);
  cacheCounter('nv_cache_hit_duration_per_model', 'Total cache hit duration per model, in microseconds', (m) => us(m.stats.cacheHit.ns));
  cacheCounter('nv_cache_miss_duration_per_model', 'Total cache miss (insert + lookup) duration per model, in microseconds', (m) =>
    us(m.stats.cacheMiss.ns),
  );

  if (opts.histogramLatencies) firstResponseHistogram(registry, versions);
  if (opts.summaryLatencies) latencySummaries(registry, versions, opts.summaryQuantiles ?? DEFAULT_QUANTILES);

  // Triton's CPU metrics (per interval).
  if (cpu) {
    const gauge = (name: string, help: string, read: () => number): void => {
      new client.Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(read());
        },
      });
    };
    gauge('nv_cpu_utilization', 'CPU utilization rate [0.0 - 1.0]', () => cpu.utilization);
    gauge('nv_cpu_memory_total_bytes', 'CPU total memory (RAM), in bytes', () => cpu.memoryTotal);
    gauge('nv_cpu_memory_used_bytes', 'CPU used memory (RAM), in bytes', () => cpu.memoryUsed);
  }
  return registry;
}

/** Triton's default summary quantiles and allowed errors (core's MetricReporterConfig). */
const DEFAULT_QUANTILES: [number, number][] = [
  [0.5, 0.05],
  [0.9, 0.01],
  [0.95, 0.001],
  [0.99, 0.001],
  [0.999, 0.000001],
];

/** Triton's latency summaries: name, help (Triton's texts), what they observe (µs, truncated as Triton's). */
const SUMMARIES: [string, string, (o: LatencyObservation) => number][] = [
  [
    'nv_inference_request_summary_us',
    'Summary of inference request duration in microseconds (includes cached requests)',
    (o) => o.requestNs,
  ],
  ['nv_inference_queue_summary_us', 'Summary of inference queuing duration in microseconds (includes cached requests)', (o) => o.queueNs],
  [
    'nv_inference_compute_input_summary_us',
    'Cumulative compute input duration in microseconds (does not include cached requests)',
    (o) => o.computeInputNs,
  ],
  [
    'nv_inference_compute_infer_summary_us',
    'Cumulative compute inference duration in microseconds (does not include cached requests)',
    (o) => o.computeInferNs,
  ],
  [
    'nv_inference_compute_output_summary_us',
    'Cumulative inference compute output duration in microseconds (does not include cached requests)',
    (o) => o.computeOutputNs,
  ],
];

/** The observer each registry's summaries listen with, so a closed metrics server stops listening. */
const summaryObservers = new WeakMap<client.Registry, LatencyObserver>();

/**
 * Triton's --metrics-config summary_latencies=true: per model version, a sliding-window summary
 * (prometheus-cpp's defaults: 60 s in 5 age buckets) of every successful request's times, fed as
 * requests complete (kernel/latency_observers.ts). prom-client estimates the quantiles with a
 * t-digest, so the allowed errors of summary_quantiles are accepted but not used. As in Triton, a
 * version the response cache serves has no request summary (cache lookups would skew it), and a
 * cache hit adds nothing to the compute summaries.
 */
function latencySummaries(registry: client.Registry, versions: () => ModelMetricsRow[], quantiles: [number, number][]): void {
  const seen = new Map<string, Labels>();
  const summaries = SUMMARIES.map(
    ([name, help, read]) =>
      [
        new client.Summary({
          name,
          help,
          labelNames: ['model', 'version'],
          percentiles: quantiles.map(([q]) => q),
          maxAgeSeconds: 60,
          ageBuckets: 5,
          // Registered through tritonOrder (below), not directly.
          registers: [],
          // Versions no longer loaded leave the output, as Triton removes an unloaded model's metrics.
          collect() {
            const loaded = new Set(versions().map((r) => `${r.model}\0${r.version}`));
            for (const [key, labels] of seen) if (!loaded.has(key)) this.remove(labels);
          },
        }),
        read,
        name,
      ] as const,
  );
  for (const [summary, , name] of summaries) registry.registerMetric(tritonOrder(summary, name));
  const rows = new WeakMap<object, ModelMetricsRow>();
  const rowOf = (source: object): ModelMetricsRow | undefined => {
    let row = rows.get(source);
    if (!row) {
      row = versions().find((r) => r.stats === source);
      if (row) rows.set(source, row);
    }
    return row;
  };
  const observer: LatencyObserver = (source, o) => {
    const row = rowOf(source);
    if (!row) return;
    const labels = labelsOf(row);
    seen.set(`${labels.model}\0${labels.version}`, labels);
    for (const [summary, read, name] of summaries) {
      if (name === 'nv_inference_request_summary_us' && row.stats.cacheEnabled) continue;
      if (o.cacheHit && name.startsWith('nv_inference_compute_')) continue;
      summary.observe(labels, Math.floor(read(o) / 1000));
    }
  };
  latencyObservers.add(observer);
  summaryObservers.set(registry, observer);
}

/**
 * A summary's lines in Triton's (prometheus-cpp's) order, for the greps people keep for
 * tritonserver's output: per version `_count`, `_sum`, then the quantiles with `quantile` after
 * the model labels (prom-client writes the quantiles first, `quantile` first).
 */
function tritonOrder(summary: client.Summary<'model' | 'version'>, name: string): client.Metric {
  type Value = { metricName?: string; labels: Record<string, string | number>; value: number };
  const rank = (v: Value): number => (v.metricName === `${name}_count` ? 0 : v.metricName === `${name}_sum` ? 1 : 2);
  const get = async () => {
    const got = (await summary.get()) as unknown as { values: Value[] };
    const byVersion = new Map<string, Value[]>();
    for (const v of got.values) {
      const { quantile, ...model } = v.labels;
      const key = `${model.model}\0${model.version}`;
      const list = byVersion.get(key) ?? [];
      byVersion.set(key, list);
      list.push({ metricName: v.metricName ?? name, labels: quantile === undefined ? model : { ...model, quantile }, value: v.value });
    }
    const values = [...byVersion.values()].flatMap((list) => list.sort((x, y) => rank(x) - rank(y)));
    return { ...got, name, values };
  };
  return { name, help: (summary as unknown as { help: string }).help, type: 'summary', aggregator: 'sum', get } as unknown as client.Metric;
}

/** Stops feeding the registry's latency summaries (its metrics server closed). */
export function stopLatencySummaries(registry: client.Registry): void {
  const observer = summaryObservers.get(registry);
  if (observer) latencyObservers.delete(observer);
}

const FIRST_RESPONSE = 'nv_inference_first_response_histogram_ms';

/**
 * Triton's time-to-first-response histogram, for every model version (Triton 2.73 creates it for
 * every model once histogram_latencies is on; 2.51 only for decoupled ones). prom-client's
 * Histogram can only observe, and the counts already live in ModelStats, so this is a metric of
 * its own that reads them at scrape time. Lines come in Triton's (prometheus-cpp's) order: _count,
 * _sum, then the cumulative buckets, `le` after the model labels.
 */
function firstResponseHistogram(registry: client.Registry, versions: () => ModelMetricsRow[]): void {
  const help = 'Duration from request to first response in milliseconds';
  type Sample = { metricName: string; labels: Record<string, string>; value: number };
  const collect = (): { name: string; help: string; type: 'histogram'; values: Sample[]; aggregator: 'sum' } => {
    const values: Sample[] = [];
    for (const mv of versions()) {
      const labels = labelsOf(mv);
      const { boundsMs, counts, sumMs } = mv.stats.firstResponseMs;
      const count = counts.reduce((a, b) => a + b, 0);
      values.push({ metricName: `${FIRST_RESPONSE}_count`, labels, value: count });
      values.push({ metricName: `${FIRST_RESPONSE}_sum`, labels, value: sumMs });
      let below = 0;
      boundsMs.forEach((le, i) => {
        below += counts[i]!;
        values.push({ metricName: `${FIRST_RESPONSE}_bucket`, labels: { ...labels, le: String(le) }, value: below });
      });
      values.push({ metricName: `${FIRST_RESPONSE}_bucket`, labels: { ...labels, le: '+Inf' }, value: count });
    }
    return { name: FIRST_RESPONSE, help, type: 'histogram', values, aggregator: 'sum' };
  };
  const metric = { name: FIRST_RESPONSE, help, type: 'histogram', aggregator: 'sum', get: async () => collect() };
  registry.registerMetric(metric as unknown as client.Metric);
}

export async function startMetricsServer(
  core: CoreApi,
  host: string,
  port: number,
  opts: MetricsOptions,
): Promise<{ server: http.Server; port: number }> {
  const cpu = opts.cpuMetrics ? new CpuSampler(opts.intervalMs) : undefined;
  const registry = buildRegistry(core, cpu, {
    histogramLatencies: opts.histogramLatencies,
    counterLatencies: opts.counterLatencies,
    summaryLatencies: opts.summaryLatencies,
    summaryQuantiles: opts.summaryQuantiles,
  });
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found; metrics are at /metrics\n');
      return;
    }
    registry.metrics().then(
      // Then the Python models' own metrics (pb_utils.MetricFamily), as Triton lists them with its own.
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text + pythonCustomMetrics.render()),
      (e: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(e.message),
    );
  });
  server.once('close', () => {
    cpu?.stop();
    stopLatencySummaries(registry);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => {
      cpu?.stop();
      reject(e);
    });
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  return { server, port: typeof addr === 'object' && addr ? addr.port : port };
}
