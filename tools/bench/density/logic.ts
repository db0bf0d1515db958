// The density section's arithmetic and report (tools/bench/density.ts), kept apart so it is unit
// tested: what one /proc status says, the cost per model instance, the goals of issue 16 item 3.

export const MiB = 1024 * 1024;

/** Issue 16's targets for many small models. "5 MB" is read as 5·10⁶ bytes (the stricter reading). */
export const GOALS = { overheadBytes: 5e6, loadS: 30, models: 500 } as const;

/** RSS (bytes) and threads from the text of /proc/<pid>/status. */
export function parseStatus(text: string): { rss: number; threads: number } {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(text);
  const th = /^Threads:\s+(\d+)$/m.exec(text);
  if (!kb || !th) throw new Error('no VmRSS / Threads in the status text');
  return { rss: Number(kb[1]) * 1024, threads: Number(th[1]) };
}

/** The sum of a Prometheus counter over all its label sets (lines `name{...} value`). */
export function sumMetric(text: string, name: string): number {
  let total = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'gm'))) total += Number(m[1]);
  return total;
}

/** One server start: `models` models of which the files total `weightBytes`, in one mode. */
export interface DensityPoint {
  mode: 'dedicated' | 'shared';
  models: number;
  weightBytes: number;
  /** From spawning the server to /v2/health/ready answering 200. */
  readyS: number;
  /** After ready (and a short settle). */
  rss: number;
  threads: number;
  /** After serving every model. */
  rssServed?: number;
  /** Requests sent while serving (HTTP + gRPC + perf_analyzer runs) and how many failed. */
  requests?: number;
  errors?: number;
}

/** RSS beyond the 0-model server and beyond the models' own files, per model instance. */
export function perInstance(p: DensityPoint, base: DensityPoint, instancesPerModel = 1): number {
  const instances = p.models * instancesPerModel;
  return instances > 0 ? (p.rss - base.rss - p.weightBytes) / instances : Number.NaN;
}

export interface GoalResult {
  goal: string;
  value: string;
  met: boolean;
}

/** The goals, evaluated on the shared-mode point with GOALS.models models (missed when it is absent). */
export function evaluateGoals(points: readonly DensityPoint[]): GoalResult[] {
  const base = points.find((p) => p.mode === 'shared' && p.models === 0);
  const top = points.find((p) => p.mode === 'shared' && p.models === GOALS.models);
  const none = (goal: string): GoalResult => ({ goal, value: 'not measured', met: false });
  const out: GoalResult[] = [];
  const g1 = `server overhead per small-model instance beyond its weights ≤ ${GOALS.overheadBytes / 1e6} MB (${GOALS.models} models)`;
  if (top && base) {
    const per = perInstance(top, base);
    out.push({ goal: g1, value: `${(per / 1e6).toFixed(2)} MB`, met: per <= GOALS.overheadBytes });
  } else out.push(none(g1));
  const g2 = `${GOALS.models} small models loaded (server ready) in ≤ ${GOALS.loadS} s`;
  out.push(top ? { goal: g2, value: `${top.readyS.toFixed(1)} s`, met: top.readyS <= GOALS.loadS } : none(g2));
  const g3 = `${GOALS.models} small models served without errors`;
  out.push(
    top?.requests !== undefined
      ? { goal: g3, value: `${top.errors ?? 0} errors in ${top.requests} requests`, met: (top.errors ?? 0) === 0 && top.requests > 0 }
      : none(g3),
  );
  return out;
}

const mib = (b: number): string => (b / MiB).toFixed(0);
const mb = (b: number): string => (Number.isFinite(b) ? (b / 1e6).toFixed(2) : '—');

/** The table of every point, before (dedicated) and after (shared), in model-count order. */
export function renderTable(points: readonly DensityPoint[]): string {
  const rows = [
    '| mode | models | server ready (s) | RSS (MiB) | RSS per instance beyond weights (MB) | threads | threads per model | RSS after serving (MiB) | errors serving |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const mode of ['dedicated', 'shared'] as const) {
    const base = points.find((p) => p.mode === mode && p.models === 0);
    for (const p of points.filter((x) => x.mode === mode).sort((a, b) => a.models - b.models)) {
      const per = base && p.models > 0 ? mb(perInstance(p, base)) : '—';
      const th = base && p.models > 0 ? ((p.threads - base.threads) / p.models).toFixed(2) : '—';
      const served = p.rssServed !== undefined ? mib(p.rssServed) : '—';
      const errs = p.requests !== undefined ? `${p.errors ?? 0} / ${p.requests}` : '—';
      rows.push(`| ${mode} | ${p.models} | ${p.readyS.toFixed(1)} | ${mib(p.rss)} | ${per} | ${p.threads} | ${th} | ${served} | ${errs} |`);
    }
  }
  return rows.join('\n');
}

/**
 * Whether the dedicated mode can take `target` models here: its RSS projected from a measured
 * point (per-model growth) must stay under half the available memory, and its load time projected
 * linearly under `maxS`.
 */
export function dedicatedFeasible(
  measured: DensityPoint,
  base: DensityPoint,
  target: number,
  availableBytes: number,
  maxS: number,
): { ok: boolean; why: string } {
  const per = (measured.rss - base.rss) / measured.models;
  const rss = base.rss + per * target;
  const secs = (measured.readyS - base.readyS) * (target / measured.models) + base.readyS;
  if (rss > availableBytes / 2) {
    return { ok: false, why: `projected RSS ${mib(rss)} MiB > half the available memory (${mib(availableBytes)} MiB)` };
  }
  if (secs > maxS) return { ok: false, why: `projected load time ${secs.toFixed(0)} s > ${maxS} s allowed to this section` };
  return { ok: true, why: '' };
}
