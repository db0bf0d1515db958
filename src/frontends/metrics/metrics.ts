// Prometheus metrics with Triton's names and labels, read from the same statistics the
// statistics API reports (collected at scrape time, so the two always agree).
import http from 'node:http';
import os from 'node:os';
import client from 'prom-client';
import type { InferenceCore } from '../../core/server_core.js';
import type { ModelVersion } from '../../repository/model.js';

type Labels = { model: string; version: string };

function labelsOf(mv: ModelVersion): Labels {
  return { model: mv.name, version: String(mv.version) };
}

export function buildRegistry(core: InferenceCore): client.Registry {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const versions = (): ModelVersion[] => core.repository.loadedVersions();

  /** A counter whose value is read from ModelStats at scrape time. */
  const counter = (name: string, help: string, read: (mv: ModelVersion) => number): void => {
    new client.Counter({
      name,
      help,
      labelNames: ['model', 'version'],
      registers: [registry],
      collect() {
        this.reset();
        for (const mv of versions()) this.inc(labelsOf(mv), read(mv));
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
  counter('nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)', (m) => m.stats.executionCount);
  counter('nv_inference_request_duration_us', 'Cumulative inference request duration in microseconds (includes cached requests)', (m) => us(m.stats.success.ns));
  counter('nv_inference_queue_duration_us', 'Cumulative inference queuing duration in microseconds (includes cached requests)', (m) => us(m.stats.queue.ns));
  counter('nv_inference_compute_input_duration_us', 'Cumulative compute input duration in microseconds (does not include cached requests)', (m) => us(m.stats.computeInput.ns));
  counter('nv_inference_compute_infer_duration_us', 'Cumulative compute inference duration in microseconds (does not include cached requests)', (m) => us(m.stats.computeInfer.ns));
  counter('nv_inference_compute_output_duration_us', 'Cumulative inference compute output duration in microseconds (does not include cached requests)', (m) => us(m.stats.computeOutput.ns));
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

  // Triton's CPU metrics.
  let lastCpu = os.cpus().map((c) => c.times);
  new client.Gauge({
    name: 'nv_cpu_utilization',
    help: 'CPU utilization rate [0.0 - 1.0]',
    registers: [registry],
    collect() {
      const now = os.cpus().map((c) => c.times);
      let busy = 0;
      let total = 0;
      now.forEach((t, i) => {
        const p = lastCpu[i] ?? t;
        const idle = t.idle - p.idle;
        const all = t.user + t.nice + t.sys + t.irq + t.idle - (p.user + p.nice + p.sys + p.irq + p.idle);
        busy += all - idle;
        total += all;
      });
      lastCpu = now;
      this.set(total > 0 ? busy / total : 0);
    },
  });
  new client.Gauge({
    name: 'nv_cpu_memory_total_bytes',
    help: 'CPU total memory (RAM), in bytes',
    registers: [registry],
    collect() {
      this.set(os.totalmem());
    },
  });
  new client.Gauge({
    name: 'nv_cpu_memory_used_bytes',
    help: 'CPU used memory (RAM), in bytes',
    registers: [registry],
    collect() {
      this.set(os.totalmem() - os.freemem());
    },
  });
  return registry;
}

export async function startMetricsServer(core: InferenceCore, host: string, port: number): Promise<{ server: http.Server; port: number }> {
  const registry = buildRegistry(core);
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
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  return { server, port: typeof addr === 'object' && addr ? addr.port : port };
}
