// The live dashboard: GET /dashboard serves a static page (static/dashboard/, no build step) that
// polls GET /dashboard/data, one snapshot of every model version's counters. The page turns
// successive snapshots into rates and percentiles, so the server keeps no history of its own.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type CoreApi, LATENCY_BUCKETS, latencyBucketBoundUs, type ModelMetricsRow } from '../../core/api.js';
import { encodeJson } from '../../kernel/json.js';
import { projectRoot } from '../../kernel/paths.js';

const ASSETS: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'dashboard.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
};

export interface DashboardVersion {
  name: string;
  version: string;
  state: string;
  reason: string;
  /** Requests queued or executing now. */
  pending: number;
  max_batch_size: number;
  dynamic_batching: boolean;
  /** Every instance by Triton's name (`<group>_<index>`), with its execution time so far. */
  instances: { name: string; busy_ns: number }[];
  inference_count: number;
  execution_count: number;
  success: { count: number; ns: number };
  fail: { count: number; ns: number };
  queue_ns: number;
  compute_input_ns: number;
  compute_infer_ns: number;
  compute_output_ns: number;
  cache_hit: { count: number; ns: number };
  cache_miss: { count: number; ns: number };
  /** Executions by batch size: [batch_size, executions]. */
  batches: [number, number][];
  /** Successful requests per latency bucket (bounds in `latency_bounds_us`); trailing zeros cut. */
  latency: number[];
  /** Decoupled versions only (absent for the others): what their response statistics say. */
  decoupled?: DecoupledCounters;
}

/** A decoupled version's cumulative response counters (the page turns them into window figures). */
export interface DecoupledCounters {
  /** Requests the model answered at all: response index 0 of Triton's response_stats, every outcome. */
  requests: number;
  /** Responses a client received (outputs or an error, every index); not the final flag alone. */
  responses: number;
  /** Requests per time-to-first-response bucket (bounds in `latency_bounds_us`); trailing zeros cut. */
  first_response: number[];
}

export interface DashboardSnapshot {
  time_ms: number;
  server: { name: string; version: string; live: boolean; ready: boolean };
  latency_bounds_us: number[];
  models: DashboardVersion[];
}

const BOUNDS = Array.from({ length: LATENCY_BUCKETS }, (_, i) => latencyBucketBoundUs(i));

/** Instance names from the config's instance_group (`<group name>_<index>`, as Triton names them). */
function instanceNames(config: Readonly<Record<string, unknown>> | undefined): string[] {
  const groups = (config?.instance_group ?? []) as { name?: string; count?: number }[];
  return groups.flatMap((g) => Array.from({ length: Number(g.count ?? 1) }, (_, i) => `${g.name ?? ''}_${i}`));
}

/** Cumulative counts up to the last non-zero bucket (the page treats missing buckets as 0). */
function trimmed(buckets: Uint32Array): number[] {
  let last = buckets.length;
  while (last > 0 && buckets[last - 1] === 0) last--;
  return Array.from(buckets.subarray(0, last));
}

function decoupledCounters(s: ModelMetricsRow['stats']): DecoupledCounters {
  let responses = 0;
  for (const r of s.responses.values()) responses += r.success.count + r.fail.count;
  const first = s.responses.get(0);
  const requests = first ? first.success.count + first.fail.count + first.empty_response.count + first.cancel.count : 0;
  return { requests, responses, first_response: trimmed(s.firstResponseBuckets) };
}

function versionRow(name: string, version: string, state: string, reason: string, core: CoreApi, row?: ModelMetricsRow): DashboardVersion {
  let config: Readonly<Record<string, unknown>> | undefined;
  try {
    config = row ? core.modelConfig(name, version) : undefined;
  } catch {
    config = undefined; // unloaded between the two calls: show what the counters say
  }
  const s = row?.stats;
  const busy = s?.busyNsByInstance ?? new Map<string, number>();
  const names = instanceNames(config);
  for (const n of busy.keys()) if (!names.includes(n)) names.push(n);
  const policy = config?.model_transaction_policy as { decoupled?: boolean } | undefined;
  const decoupled = policy?.decoupled === true || s?.decoupled === true;
  return {
    name,
    version,
    state,
    reason,
    pending: s?.pending ?? 0,
    max_batch_size: Number(config?.max_batch_size ?? 0),
    dynamic_batching: config?.dynamic_batching !== undefined,
    instances: names.map((n) => ({ name: n, busy_ns: busy.get(n) ?? 0 })),
    inference_count: s?.inferenceCount ?? 0,
    execution_count: s?.executionCount ?? 0,
    success: { count: s?.success.count ?? 0, ns: s?.success.ns ?? 0 },
    fail: { count: s?.fail.count ?? 0, ns: s?.fail.ns ?? 0 },
    queue_ns: s?.queue.ns ?? 0,
    compute_input_ns: s?.computeInput.ns ?? 0,
    compute_infer_ns: s?.computeInfer.ns ?? 0,
    compute_output_ns: s?.computeOutput.ns ?? 0,
    cache_hit: { count: s?.cacheHit.count ?? 0, ns: s?.cacheHit.ns ?? 0 },
    cache_miss: { count: s?.cacheMiss.count ?? 0, ns: s?.cacheMiss.ns ?? 0 },
    batches: s
      ? [...s.batches.values()].map((b): [number, number] => [b.batch_size, b.compute_infer.count]).sort((a, b) => a[0] - b[0])
      : [],
    latency: s ? trimmed(s.latencyBuckets) : [],
    ...(decoupled && { decoupled: s ? decoupledCounters(s) : { requests: 0, responses: 0, first_response: [] } }),
  };
}

/** Every model of the repository, each loaded version with its counters, in name/version order. */
export async function dashboardSnapshot(core: CoreApi): Promise<DashboardSnapshot> {
  const index = await core.repositoryIndex(false);
  const rows = new Map(core.metricsSnapshot().map((r) => [`${r.model}\0${r.version}`, r]));
  const models: DashboardVersion[] = [];
  for (const m of index) {
    const row = m.version ? rows.get(`${m.name}\0${m.version}`) : undefined;
    if (row) rows.delete(`${m.name}\0${m.version}`);
    models.push(versionRow(m.name, m.version ?? '', m.state ?? 'UNAVAILABLE', m.reason ?? '', core, row));
  }
  // Versions serving but not in the index (an older version still draining during a reload).
  for (const r of rows.values()) models.push(versionRow(r.model, r.version, 'READY', '', core, r));
  models.sort((a, b) => a.name.localeCompare(b.name) || Number(a.version) - Number(b.version));
  const meta = core.serverMetadata();
  return {
    time_ms: Date.now(),
    server: { name: meta.name, version: meta.version, live: core.isLive(), ready: core.isReady() },
    latency_bounds_us: BOUNDS,
    models,
  };
}

/** Registers GET /dashboard (the page), its assets, and GET /dashboard/data. */
export function dashboardRoutes(app: FastifyInstance, core: CoreApi): void {
  const dir = path.join(projectRoot(), 'static', 'dashboard');
  // Read once: the page is a few KiB and never changes while the server runs.
  const files = new Map(Object.entries(ASSETS).map(([file, type]) => [file, { type, body: readFileSync(path.join(dir, file)) }]));
  const page = files.get('index.html')!;
  app.get('/dashboard', (_req, reply) => reply.header('content-type', page.type).header('cache-control', 'no-cache').send(page.body));
  app.get('/dashboard/:asset', (req, reply) => {
    const asset = files.get((req.params as { asset: string }).asset);
    if (!asset)
      return reply
        .code(404)
        .header('content-type', 'application/json')
        .send(encodeJson({ error: `no dashboard file ${req.url}` }));
    return reply.header('content-type', asset.type).header('cache-control', 'no-cache').send(asset.body);
  });
  // A static route takes precedence over /dashboard/:asset.
  app.get('/dashboard/data', async (_req, reply) =>
    reply
      .header('content-type', 'application/json')
      .header('cache-control', 'no-store')
      .send(encodeJson(await dashboardSnapshot(core))),
  );
}
