// Prometheus metrics with Triton's names and labels. Per-request metrics are read from the same
// statistics the statistics API reports, at scrape time, so the two always agree. Triton's
// "per interval" metrics (CPU utilization and memory) are sampled every --metrics-interval-ms,
// so every scraper sees the same value whatever its own scrape interval.
import http from 'node:http';
import os from 'node:os';
import client from 'prom-client';
import type { CoreApi, ModelMetricsRow } from '../../core/api.js';

type Labels = { model: string; version: string };

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
}

/** What buildRegistry exports besides the metrics every Triton exports. */
export interface RegistryOptions {
  /** Triton's histogram_latencies: nv_inference_first_response_histogram_ms. */
  histogramLatencies?: boolean;
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
      for (const mv of versions()) {
        for (const [reason, n] of mv.stats.failuresByReason) this.inc({ ...labelsOf(mv), reason }, n);
      }
    },
  });
  counter('nv_inference_count', 'Number of inferences performed (does not include cached requests)', (m) => m.stats.inferenceCount);
  counter(
    'nv_inference_exec_count',
    'Number of model executions performed (does not include cached requests)',
    (m) => m.stats.executionCount,
  );
  counter('nv_inference_request_duration_us', 'Cumulative inference request duration in microseconds (includes cached requests)', (m) =>
    us(m.stats.success.ns),
  );
  counter('nv_inference_queue_duration_us', 'Cumulative inference queuing duration in microseconds (includes cached requests)', (m) =>
    us(m.stats.queue.ns),
  );
  counter(
    'nv_inference_compute_input_duration_us',
    'Cumulative compute input duration in microseconds (does not include cached requests)',
    (m) => us(m.stats.computeInput.ns),
  );
  counter(
    'nv_inference_compute_infer_duration_us',
    'Cumulative compute inference duration in microseconds (does not include cached requests)',
    (m) => us(m.stats.computeInfer.ns),
  );
  counter(
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
    counter(name, help, read, (mv) => mv.stats.cacheEnabled);
  cacheCounter('nv_cache_num_hits_per_model', 'Number of cache hits per model', (m) => m.stats.cacheHit.count);
  cacheCounter('nv_cache_num_misses_per_model', 'Number of cache misses per model', (m) => m.stats.cacheMiss.count);
  cacheCounter('nv_cache_hit_duration_per_model', 'Total cache hit duration per model, in microseconds', (m) => us(m.stats.cacheHit.ns));
  cacheCounter('nv_cache_miss_duration_per_model', 'Total cache miss (insert + lookup) duration per model, in microseconds', (m) =>
    us(m.stats.cacheMiss.ns),
  );

  if (opts.histogramLatencies) firstResponseHistogram(registry, versions);

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
  const registry = buildRegistry(core, cpu, { histogramLatencies: opts.histogramLatencies });
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found; metrics are at /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (e: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(e.message),
    );
  });
  server.once('close', () => cpu?.stop());
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
