// Decoupled models' statistics as Triton reports them: response_stats by response index (counted
// as core's InferenceStatsAggregator::UpdateResponse{Success,Fail,Empty,Cancel} count), in the
// statistics JSON over HTTP and in gRPC ModelStatistics, for a backend that reports them ({} for
// the others, Python models among them, as in Triton 2.51); the first-response histogram
// (nv_inference_first_response_histogram_ms, only with histogram_latencies as in Triton); and the
// dashboard's responses per request and time to first response, page included.
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ModelMetricsRow } from '../../src/core/api.js';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { type DashboardSnapshot, dashboardSnapshot } from '../../src/frontends/http/dashboard.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { buildRegistry } from '../../src/frontends/metrics/metrics.js';
import { LATENCY_BUCKETS, latencyBucket, latencyBucketBoundUs, ModelStats } from '../../src/stats/model_stats.js';
import { statisticsOf } from '../../src/stats/report.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';
import { type GrpcClient, grpcClient } from '../helpers/grpc.js';

const MS = 1_000_000;
const d = (count: number, ns: number) => ({ count, ns });
const zero = d(0, 0);
const timing = (startNs: bigint) => ({
  requestStartNs: startNs,
  queueStartNs: startNs,
  computeStartNs: startNs,
  computeInputNs: 0,
  computeInferNs: 0,
  computeOutputNs: 0,
});

/**
 * Two requests of a decoupled model: the first sends two responses with outputs, then the final
 * flag alone; the second one response, then an error raised while its outputs were prepared, then
 * is cancelled.
 */
function decoupledStats(reported = true): ModelStats {
  const s = new ModelStats();
  s.decoupled = true;
  s.reportsResponseStats = reported;
  s.recordResponse(0, 'success', 400, 20);
  s.recordResponse(1, 'success', 300, 10);
  s.recordResponse(2, 'empty_response', 50, 0);
  s.recordResponse(0, 'success', 500, 30);
  s.recordResponse(1, 'fail', 200, 5);
  s.recordResponse(2, 'cancel', 70, 0);
  return s;
}

const EXPECTED = {
  '0': { compute_infer: d(2, 900), compute_output: d(2, 50), success: d(2, 950), fail: zero, empty_response: zero, cancel: zero },
  '1': { compute_infer: d(2, 500), compute_output: d(2, 15), success: d(1, 310), fail: d(1, 205), empty_response: zero, cancel: zero },
  '2': { compute_infer: d(1, 50), compute_output: zero, success: zero, fail: zero, empty_response: d(1, 50), cancel: d(1, 70) },
};

describe('response_stats in the statistics JSON', () => {
  it('counts each outcome as Triton does and keys the responses by their index', () => {
    expect(statisticsOf('gen', 1, decoupledStats()).response_stats).toEqual(EXPECTED);
  });

  it('is {} for a backend that does not report them, as Triton’s Python backend, though counted', () => {
    const s = decoupledStats(false);
    expect(statisticsOf('gen', 1, s).response_stats).toEqual({});
    expect(s.responses.get(1)!.fail.count).toBe(1);
  });

  it('counts compute_output for a failure only when it had output time, and nothing but cancel for a cancellation', () => {
    const s = new ModelStats();
    s.reportsResponseStats = true;
    s.recordResponse(0, 'fail', 1000, 0); // the model sent an error: no outputs were prepared
    s.recordResponse(0, 'cancel', 300, 0);
    expect(statisticsOf('gen', 1, s).response_stats).toEqual({
      '0': { compute_infer: d(1, 1000), compute_output: zero, success: zero, fail: d(1, 1000), empty_response: zero, cancel: d(1, 300) },
    });
  });

  it('orders indices numerically, is empty for a model without responses, and is a copy', () => {
    const s = new ModelStats();
    s.reportsResponseStats = true;
    for (const i of [10, 2, 0, 1]) s.recordResponse(i, 'success', 1, 1);
    const json = statisticsOf('gen', 1, s);
    expect(Object.keys(json.response_stats)).toEqual(['0', '1', '2', '10']);
    s.recordResponse(0, 'success', 1, 1);
    expect(json.response_stats['0']!.success).toEqual(d(1, 2));
    const simple = new ModelStats();
    simple.reportsResponseStats = true;
    expect(statisticsOf('simple', 1, simple).response_stats).toEqual({});
  });
});

describe('response_stats over HTTP and gRPC', () => {
  const stats = decoupledStats();
  const core = { ...fakeCore(), statistics: (name: string) => [statisticsOf(name, 1, stats)] };
  let app: FastifyInstance;
  let g: GrpcServer;
  let client: GrpcClient;

  beforeAll(async () => {
    app = buildHttpServer(core, capturedLogger().log, { maxInputSize: 1 << 20 });
    g = await startGrpcServer(core, capturedLogger().log, '127.0.0.1', 0);
    client = grpcClient(`127.0.0.1:${g.port}`);
  });
  afterAll(async () => {
    client?.close();
    g?.server.forceShutdown();
    await app?.close();
  });

  it('GET /v2/models/{m}/stats carries them next to batch_stats', async () => {
    const res = await app.inject({ method: 'GET', url: '/v2/models/gen/stats' });
    expect(res.statusCode).toBe(200);
    const [model] = res.json().model_stats;
    expect(model.name).toBe('gen');
    expect(model.response_stats).toEqual(EXPECTED);
  });

  it('ModelStatistics carries them as map<string, InferResponseStatistics>', async () => {
    const res = await client.call('ModelStatistics', { name: 'gen', version: '' });
    const got = res.model_stats[0].response_stats as Record<string, Record<string, { count: string; ns: string }>>;
    // uint64 fields arrive as strings (the project's proto loader options).
    const asNumbers = Object.fromEntries(
      Object.entries(got).map(([k, r]) => [
        k,
        Object.fromEntries(Object.entries(r).map(([f, v]) => [f, { count: Number(v.count), ns: Number(v.ns) }])),
      ]),
    );
    expect(asNumbers).toEqual(EXPECTED);
  });
});

describe('nv_inference_first_response_histogram_ms', () => {
  const rows: ModelMetricsRow[] = [];
  const core = { ...fakeCore(), metricsSnapshot: () => rows };
  afterEach(() => {
    rows.length = 0;
  });
  const scrape = (histogramLatencies?: boolean) => buildRegistry(core, undefined, { histogramLatencies }).metrics();
  const lines = (text: string) => text.split('\n').filter((l) => l.startsWith('nv_inference_first_response_histogram_ms'));

  it('is not exported by default, as Triton exports it only with histogram_latencies=true', async () => {
    const s = new ModelStats();
    s.decoupled = true;
    s.recordFirstResponse(5 * MS);
    rows.push({ model: 'gen', version: '1', stats: s });
    expect(await scrape()).not.toContain('first_response');
  });

  it('counts whole milliseconds in Triton’s default buckets, in prometheus-cpp’s line order', async () => {
    const s = new ModelStats();
    s.decoupled = true;
    // 99.9999 ms is 99 ms to Triton (integer division), so it falls in le="100".
    for (const ns of [50 * MS, 99_999_900, 100 * MS + 1, 150 * MS, 600 * MS, 3000 * MS, 7000 * MS]) s.recordFirstResponse(ns);
    rows.push({ model: 'gen', version: '1', stats: s });
    const text = await scrape(true);
    expect(text).toContain('# HELP nv_inference_first_response_histogram_ms Duration from request to first response in milliseconds');
    expect(text).toContain('# TYPE nv_inference_first_response_histogram_ms histogram');
    expect(lines(text)).toEqual([
      'nv_inference_first_response_histogram_ms_count{model="gen",version="1"} 7',
      `nv_inference_first_response_histogram_ms_sum{model="gen",version="1"} ${50 + 99 + 100 + 150 + 600 + 3000 + 7000}`,
      'nv_inference_first_response_histogram_ms_bucket{model="gen",version="1",le="100"} 3',
      'nv_inference_first_response_histogram_ms_bucket{model="gen",version="1",le="500"} 4',
      'nv_inference_first_response_histogram_ms_bucket{model="gen",version="1",le="2000"} 5',
      'nv_inference_first_response_histogram_ms_bucket{model="gen",version="1",le="5000"} 6',
      'nv_inference_first_response_histogram_ms_bucket{model="gen",version="1",le="+Inf"} 7',
    ]);
  });

  it('observes a decoupled request once (its first response), any other request at its completion', async () => {
    const gen = new ModelStats();
    gen.decoupled = true;
    gen.recordFirstResponse(20 * MS);
    gen.recordSuccess(1, timing(0n), BigInt(900 * MS)); // the request's end is not its first response
    const simple = new ModelStats();
    simple.recordSuccess(1, timing(0n), BigInt(700 * MS));
    simple.recordCacheHit(0n, 0n, 1n, BigInt(3 * MS));
    simple.recordFailure(0n, BigInt(40 * MS), 'BACKEND'); // answered with an error response
    simple.recordFailure(0n, BigInt(40 * MS), 'REJECTED'); // refused by the queue: no response at all
    rows.push({ model: 'gen', version: '1', stats: gen }, { model: 'simple', version: '1', stats: simple });
    const text = lines(await scrape(true));
    expect(text).toContain('nv_inference_first_response_histogram_ms_count{model="gen",version="1"} 1');
    expect(text).toContain('nv_inference_first_response_histogram_ms_sum{model="gen",version="1"} 20');
    expect(text).toContain('nv_inference_first_response_histogram_ms_count{model="simple",version="1"} 3');
    expect(text).toContain('nv_inference_first_response_histogram_ms_sum{model="simple",version="1"} 743');
    expect(text).toContain('nv_inference_first_response_histogram_ms_bucket{model="simple",version="1",le="500"} 2');
  });

  it('a version that records responses is decoupled even before it is flagged', () => {
    const s = new ModelStats();
    s.recordResponse(0, 'success', 1, 1);
    expect(s.decoupled).toBe(true);
  });
});

describe('the dashboard for decoupled models', () => {
  const gen = decoupledStats(false); // the dashboard reads the counters whether or not the API shows them
  gen.recordFirstResponse(2 * MS);
  gen.recordFirstResponse(30 * MS);
  const simple = new ModelStats();
  simple.recordSuccess(1, timing(0n), BigInt(MS));
  const configs: Record<string, Record<string, unknown>> = {
    gen: { name: 'gen', max_batch_size: 0, model_transaction_policy: { decoupled: true } },
    simple: { name: 'simple', max_batch_size: 8 },
  };
  const core = {
    ...fakeCore(),
    metricsSnapshot: (): ModelMetricsRow[] => [
      { model: 'gen', version: '1', stats: gen },
      { model: 'simple', version: '1', stats: simple },
    ],
    repositoryIndex: async () => [
      { name: 'gen', version: '1', state: 'READY' as const, reason: '' },
      { name: 'simple', version: '1', state: 'READY' as const, reason: '' },
    ],
    modelConfig: (name: string) => configs[name]!,
  };

  it('/dashboard/data adds response and first-response counters to decoupled versions only', async () => {
    const snap = await dashboardSnapshot(core);
    const byName = Object.fromEntries(snap.models.map((m) => [m.name, m]));
    // Two requests reached the model; four responses carried outputs or an error (the final flag
    // alone and the cancellation are not responses a client receives).
    expect(byName.gen!.decoupled).toMatchObject({ requests: 2, responses: 4 });
    const first = byName.gen!.decoupled!.first_response;
    expect(first.reduce((a, b) => a + b, 0)).toBe(2);
    expect(first[latencyBucket(2 * MS)]).toBe(1);
    expect(first).toHaveLength(latencyBucket(30 * MS) + 1); // trailing zeros cut
    expect(byName.simple).not.toHaveProperty('decoupled');
  });

  it('the page shows responses per request and first-response percentiles over the window', async () => {
    // Two polls: the page shows the difference between them.
    const before = await dashboardSnapshot(core);
    const after: DashboardSnapshot = structuredClone(before);
    after.time_ms = before.time_ms + 1000;
    const g = after.models.find((m) => m.name === 'gen')!;
    g.success.count += 2;
    g.decoupled!.requests += 2;
    g.decoupled!.responses += 7; // 3.5 per request in the window
    const fr = new Array<number>(LATENCY_BUCKETS).fill(0);
    g.decoupled!.first_response.forEach((c, i) => {
      fr[i] = c;
    });
    fr[latencyBucket(4 * MS)]! += 1;
    fr[latencyBucket(80 * MS)]! += 1;
    g.decoupled!.first_response = fr;

    const elements = new Map<string, Record<string, unknown>>();
    const el = (id: string) => {
      if (!elements.has(id))
        elements.set(id, { id, value: '300', checked: false, hidden: false, textContent: '', innerHTML: '', addEventListener() {} });
      return elements.get(id)!;
    };
    const snapshots = [before, after];
    vi.useFakeTimers();
    vi.stubGlobal('document', { getElementById: el });
    vi.stubGlobal('fetch', async () => ({ ok: true, json: async () => snapshots.shift() }));
    try {
      // A plain browser module, not part of the TypeScript program.
      const page = '../../static/dashboard/dashboard.js';
      await import(/* @vite-ignore */ page);
      await vi.advanceTimersByTimeAsync(1000); // the second poll
      const html = String(el('models').innerHTML);
      const card = html.slice(html.indexOf('data-model="gen"'));
      const field = (name: string) => new RegExp(`data-field="${name}">([^<]*)<`).exec(card)?.[1];
      expect(field('responses_per_request')).toBe('3.50');
      // Of the window's two first responses, p50 is the 4 ms one's bucket bound, p99 the 80 ms one's.
      const fmt = (us: number) => (us >= 1e4 ? `${(us / 1e3).toFixed(0)} ms` : `${(us / 1e3).toFixed(1)} ms`);
      expect(field('first_p50')).toBe(fmt(latencyBucketBoundUs(latencyBucket(4 * MS))));
      expect(field('first_p99')).toBe(fmt(latencyBucketBoundUs(latencyBucket(80 * MS))));
      // A model that is not decoupled shows none of it.
      const simpleCard = html.slice(html.indexOf('data-model="simple"'));
      expect(simpleCard.split('</section>')[0]).not.toContain('responses_per_request');
    } finally {
      vi.useRealTimers();
      vi.unstubAllGlobals();
    }
  });
});
