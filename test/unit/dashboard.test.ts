// GET /dashboard and its data endpoint, in process over a real core (test backend): the page and
// its assets are served, /dashboard/data reports each model version's counters as they change
// with requests, --allow-dashboard false removes the routes, and the statistics restriction covers
// them. The page itself runs in a real browser in test/deploy/dashboard_browser.test.ts.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DashboardSnapshot } from '../../src/frontends/http/dashboard.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { parseRestrictions } from '../../src/frontends/restricted.js';
import { parseArgs } from '../../src/options.js';
import { LATENCY_BUCKETS, latencyBucket, latencyBucketBoundUs } from '../../src/stats/model_stats.js';
import { capturedLogger } from '../helpers/frontends.js';
import { SIMPLE_TEST_MODEL, startTestCore, type TestCore } from '../helpers/test_core.js';

const simpleRequest = {
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, (_, i) => i) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, () => 1) },
  ],
};

describe('the latency histogram behind the percentiles', () => {
  it('puts a duration in the bucket whose bound is the first at or above it', () => {
    for (const us of [0.5, 1, 1.5, 7, 100, 999, 12_345, 2_000_000]) {
      const i = latencyBucket(us * 1000);
      expect(latencyBucketBoundUs(i), `${us} µs`).toBeGreaterThanOrEqual(us);
      if (i > 0) expect(latencyBucketBoundUs(i - 1), `${us} µs`).toBeLessThanOrEqual(us);
    }
    expect(latencyBucket(1e15)).toBe(LATENCY_BUCKETS - 1);
  });
});

describe('GET /dashboard', () => {
  let t: TestCore;
  let app: FastifyInstance;

  beforeAll(async () => {
    t = await startTestCore([SIMPLE_TEST_MODEL]);
    app = buildHttpServer(t.core, capturedLogger().log, { maxInputSize: 1 << 20 });
  });
  afterAll(async () => {
    await app?.close();
    await t?.close();
  });

  const data = async (): Promise<DashboardSnapshot> => {
    const res = await app.inject({ method: 'GET', url: '/dashboard/data' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    return res.json() as DashboardSnapshot;
  };

  it('serves the page and its script and stylesheet, nothing else under /dashboard', async () => {
    const page = await app.inject({ method: 'GET', url: '/dashboard' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toContain('<script type="module" src="dashboard/dashboard.js">');
    const js = await app.inject({ method: 'GET', url: '/dashboard/dashboard.js' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toMatch(/^text\/javascript/);
    expect(js.body).toContain("fetch('dashboard/data'");
    expect((await app.inject({ method: 'GET', url: '/dashboard/dashboard.css' })).statusCode).toBe(200);
    const missing = await app.inject({ method: 'GET', url: '/dashboard/secrets.txt' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ error: 'no dashboard file /dashboard/secrets.txt' });
  });

  it('reports every model version with its state, instances and counters, which follow the requests', async () => {
    const before = await data();
    expect(before.server).toMatchObject({ live: true, ready: true });
    expect(before.latency_bounds_us).toHaveLength(LATENCY_BUCKETS);
    const simple0 = before.models.find((m) => m.name === 'simple')!;
    expect(simple0).toMatchObject({ version: '1', state: 'READY', pending: 0, max_batch_size: 8, dynamic_batching: false });
    expect(simple0.instances.map((i) => i.name)).toEqual(['simple_0_0']);

    for (let i = 0; i < 3; i++) {
      const res = await app.inject({ method: 'POST', url: '/v2/models/simple/infer', payload: simpleRequest });
      expect(res.statusCode).toBe(200);
    }
    const after = (await data()).models.find((m) => m.name === 'simple')!;
    expect(after.success.count).toBe(simple0.success.count + 3);
    expect(after.inference_count).toBe(simple0.inference_count + 3);
    // Every success is in the latency histogram once.
    expect(after.latency.reduce((a, b) => a + b, 0)).toBe(after.success.count);
    expect(after.batches).toEqual([[1, after.execution_count]]);
    // The instance's execution time is the executions' compute time.
    const busy = after.instances[0]!.busy_ns;
    expect(busy).toBeGreaterThan(simple0.instances[0]!.busy_ns);
    expect(busy).toBeLessThanOrEqual(after.compute_input_ns + after.compute_infer_ns + after.compute_output_ns);
  });

  it('is on unless --allow-dashboard false', () => {
    expect(parseArgs(['--model-repository=/m']).allowDashboard).toBe(true);
    expect(parseArgs(['--model-repository=/m', '--allow-dashboard', 'false']).allowDashboard).toBe(false);
  });

  it('is not served with --allow-dashboard false', async () => {
    const off = buildHttpServer(t.core, capturedLogger().log, { maxInputSize: 1 << 20, dashboard: false });
    try {
      for (const url of ['/dashboard', '/dashboard/data', '/dashboard/dashboard.js']) {
        expect((await off.inject({ method: 'GET', url })).statusCode, url).toBe(404);
      }
    } finally {
      await off.close();
    }
  });

  it('belongs to the statistics API group when that group is restricted', async () => {
    const restricted = buildHttpServer(t.core, capturedLogger().log, {
      maxInputSize: 1 << 20,
      restrictions: parseRestrictions(['statistics:admin-key=k'], 'http-restricted-api'),
    });
    try {
      for (const url of ['/dashboard', '/dashboard/data']) {
        const refused = await restricted.inject({ method: 'GET', url });
        expect(refused.statusCode, url).toBe(403);
        expect(refused.json()).toEqual({ error: "This API is restricted, expecting header 'admin-key'" });
        expect((await restricted.inject({ method: 'GET', url, headers: { 'admin-key': 'k' } })).statusCode, url).toBe(200);
      }
    } finally {
      await restricted.close();
    }
  });
});
