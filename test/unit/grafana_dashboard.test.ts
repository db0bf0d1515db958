// deploy/grafana/serval.json may only query what Serval exports: every metric name in its PromQL
// (panels and template variables) must be one the metrics port serves, and every label it groups
// or filters by must be one those metrics carry or one Prometheus adds to a scraped target.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildRegistry, CpuSampler } from '../../src/frontends/metrics/metrics.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { fakeCore } from '../helpers/frontends.js';
import { ROOT } from '../helpers/paths.js';

const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'deploy', 'grafana', 'serval.json'), 'utf8')) as {
  panels: { type: string; title: string; targets?: { expr: string }[] }[];
  templating: { list: { type: string; query?: string | { query: string } }[] };
};

/** Labels Prometheus (a ServiceMonitor's scrape) puts on every series of a target. */
const TARGET_LABELS = ['instance', 'job', 'namespace', 'pod', 'service', 'endpoint', 'container'];

const FUNCTIONS_AND_KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
]);

/** Metric names and label names a PromQL expression (or a Grafana label_values query) uses. */
function namesIn(expr: string): { metrics: string[]; labels: string[] } {
  const labels: string[] = [];
  let e = expr.replace(/\$__\w+|\$\w+/g, 'VAR'); // Grafana variables
  // label_values(metric{...}, label): the last argument is a label.
  e = e.replace(/label_values\((.*),\s*(\w+)\)\s*$/, (_m, inner: string, label: string) => {
    labels.push(label);
    return inner;
  });
  e = e.replace(/"(?:[^"\\]|\\.)*"/g, '""'); // string literals
  e = e.replace(/\{([^}]*)\}/g, (_m, matchers: string) => {
    for (const m of matchers.matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g)) labels.push(m[1]!);
    return '';
  });
  e = e.replace(/\b(?:by|without|on|ignoring)\s*\(([^)]*)\)/g, (_m, list: string) => {
    for (const l of list.split(',')) if (l.trim()) labels.push(l.trim());
    return '';
  });
  e = e.replace(/\[[^\]]*\]/g, ''); // range selectors
  const metrics: string[] = [];
  for (const m of e.matchAll(/([A-Za-z_:][\w:]*)\s*(\()?/g)) {
    const [, name, call] = m;
    if (call || FUNCTIONS_AND_KEYWORDS.has(name!) || name === 'VAR') continue;
    metrics.push(name!);
  }
  return { metrics, labels };
}

/** The metric families the metrics port exports, and the labels their series carry. */
async function exported(): Promise<{ names: Set<string>; labels: Set<string> }> {
  const stats = new ModelStats();
  stats.failuresByReason.set('REJECTED', 1);
  const core = { ...fakeCore(), metricsSnapshot: () => [{ model: 'm', version: '1', stats }] };
  const cpu = new CpuSampler(60_000);
  try {
    const text = await buildRegistry(core, cpu).metrics();
    const names = new Set<string>();
    const labels = new Set<string>();
    for (const line of text.split('\n')) {
      const type = /^# TYPE (\S+) (\w+)/.exec(line);
      if (type) {
        const [, name, kind] = type;
        names.add(name!);
        if (kind === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
        if (kind === 'summary') for (const s of ['_sum', '_count']) names.add(name + s);
      } else if (line && !line.startsWith('#')) {
        const sample = /^([\w:]+)(?:\{([^}]*)\})?/.exec(line);
        if (sample) names.add(sample[1]!);
        for (const l of (sample?.[2] ?? '').matchAll(/(\w+)="/g)) labels.add(l[1]!);
      }
    }
    return { names, labels };
  } finally {
    cpu.stop();
  }
}

const queries = (): string[] => [
  ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
  ...dashboard.templating.list
    .filter((v) => v.type === 'query')
    .map((v) => (typeof v.query === 'string' ? v.query : (v.query?.query ?? ''))),
];

describe('deploy/grafana/serval.json', () => {
  it('the PromQL reader finds metric and label names, and not functions or keywords', () => {
    expect(namesIn('sum by (model, pod) (rate(nv_x{model=~"$model", a!="b"}[$__rate_interval])) / sum(rate(nv_y[5m]))')).toEqual({
      metrics: ['nv_x', 'nv_y'],
      labels: ['model', 'a', 'model', 'pod'],
    });
    expect(namesIn('label_values(nv_z{namespace=~"$namespace"}, model)')).toEqual({ metrics: ['nv_z'], labels: ['model', 'namespace'] });
  });

  it('queries only metrics Serval exports, grouped by labels they carry', async () => {
    const { names, labels } = await exported();
    expect(names).toContain('nv_inference_request_success'); // the registry was read
    const all = queries();
    expect(all.length).toBeGreaterThan(10);
    const used = new Set<string>();
    for (const q of all) {
      const found = namesIn(q);
      expect(found.metrics.length, `no metric in ${q}`).toBeGreaterThan(0);
      for (const m of found.metrics) {
        expect(names.has(m), `${m} (in ${q}) is not a metric Serval exports`).toBe(true);
        used.add(m);
      }
      for (const l of found.labels) expect([...labels, ...TARGET_LABELS], `label ${l} in ${q}`).toContain(l);
    }
    // The Triton metrics an operator looks at first are all on the dashboard.
    for (const m of [
      'nv_inference_request_success',
      'nv_inference_request_failure',
      'nv_inference_pending_request_count',
      'nv_inference_queue_duration_us',
      'nv_inference_compute_infer_duration_us',
      'nv_inference_exec_count',
      'nv_cpu_utilization',
    ]) {
      expect(used, m).toContain(m);
    }
  });

  it('is a Grafana dashboard with a panel per query and a model variable', () => {
    const panels = dashboard.panels.filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThan(5);
    for (const p of panels) expect(p.targets?.length, p.title).toBeGreaterThan(0);
    expect(dashboard.templating.list.map((v) => (v as { name?: string }).name)).toEqual(['datasource', 'namespace', 'model']);
  });
});
