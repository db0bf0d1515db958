/**
 * Summarises a V8 .cpuprofile (as written by `node --cpu-prof`): where one thread's time went,
 * grouped into buckets (idle, GC, native "(program)", node core, each npm package, Serval's
 * own source folders) plus the top functions by self time.
 *
 *   node dist/tools/bench/cpuprofile.js FILE.cpuprofile [--top 15]
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  file: string;
  /** Sampled time counted (the window's, when one was given). */
  totalMs: number;
  idleMs: number;
  /** Share of the profiled time the thread was not idle. */
  busyFraction: number;
  buckets: { bucket: string; ms: number; share: number }[];
  top: { fn: string; where: string; bucket: string; ms: number; share: number }[];
  /** Serval's own functions (dist/src) by inclusive time (self + callees). */
  servalInclusive: { fn: string; where: string; ms: number; share: number }[];
}

/** The bucket a frame's self time counts towards. */
export function bucketOf(cf: CallFrame): string {
  const name = cf.functionName;
  const url = cf.url;
  if (name === '(idle)') return 'idle';
  if (name === '(garbage collector)') return 'GC';
  if (name === '(program)') return 'native / unattributed "(program)"';
  if (name === '(root)') return 'root';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + '/node_modules/'.length).split('/');
    return `npm: ${parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  if (url.startsWith('node:')) {
    const mod = url.slice(5).replace(/^internal\//, '');
    const top = mod.split('/')[0]!;
    return `node: ${top}`;
  }
  const src = url.match(/\/dist\/(src|tools)\/(.*)$/);
  if (src) {
    const dir = src[2]!.split('/');
    return `serval: ${src[1]}/${dir.length > 1 ? dir.slice(0, -1).join('/') : dir[0]}`;
  }
  if (!url) return 'native builtins (no url)';
  return 'other';
}

/**
 * `window` ([start, end] in CLOCK_MONOTONIC µs, the clock of the profile's timestamps) keeps
 * only the samples taken inside it.
 */
export function summarizeProfile(file: string, topN = 15, window?: [number, number]): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  for (const n of p.nodes) byId.set(n.id, n);
  const selfUs = new Map<number, number>();
  // timeDeltas[i] is the time from sample i-1 to sample i; the time until the next sample is
  // spent where sample i was taken.
  let ts = p.startTime;
  let windowed = 0;
  for (let i = 0; i < p.samples.length; i++) {
    ts += p.timeDeltas[i] ?? 0;
    if (window && (ts < window[0] || ts > window[1])) continue;
    windowed++;
    const dt = p.timeDeltas[i + 1] ?? 0;
    selfUs.set(p.samples[i]!, (selfUs.get(p.samples[i]!) ?? 0) + Math.max(0, dt));
  }
  if (window && windowed === 0) throw new Error(`${file}: no samples inside the window (clock mismatch?)`);
  let total = 0;
  const buckets = new Map<string, number>();
  const fns = new Map<string, { fn: string; where: string; bucket: string; us: number }>();
  for (const [id, us] of selfUs) {
    const cf = byId.get(id)!.callFrame;
    total += us;
    const b = bucketOf(cf);
    buckets.set(b, (buckets.get(b) ?? 0) + us);
    const where = cf.url ? `${cf.url.replace(/^.*\/(node_modules|dist)\//, '$1/').replace(/^file:\/\//, '')}:${cf.lineNumber + 1}` : '';
    const key = `${cf.functionName}@${where}`;
    const e = fns.get(key) ?? { fn: cf.functionName || '(anonymous)', where, bucket: b, us: 0 };
    e.us += us;
    fns.set(key, e);
  }
  // Inclusive time of Serval's functions: walk the tree from the root, counting each function
  // once per path (recursion does not double count).
  const childIds = new Set<number>();
  for (const n of p.nodes) for (const c of n.children ?? []) childIds.add(c);
  const incl = new Map<string, { fn: string; where: string; us: number }>();
  const subtree = new Map<number, number>();
  const total0 = (id: number): number => {
    const cached = subtree.get(id);
    if (cached !== undefined) return cached;
    const n = byId.get(id)!;
    let t = selfUs.get(id) ?? 0;
    for (const c of n.children ?? []) t += total0(c);
    subtree.set(id, t);
    return t;
  };
  const walk = (id: number, onPath: Set<string>): void => {
    const n = byId.get(id)!;
    const cf = n.callFrame;
    let key: string | undefined;
    if (/\/dist\/src\//.test(cf.url)) {
      key = `${cf.functionName}@${cf.url}:${cf.lineNumber}`;
      if (!onPath.has(key)) {
        const where = `${cf.url.replace(/^.*\/dist\//, 'dist/')}:${cf.lineNumber + 1}`;
        const e = incl.get(key) ?? { fn: cf.functionName || '(anonymous)', where, us: 0 };
        e.us += total0(id);
        incl.set(key, e);
        onPath.add(key);
      } else key = undefined;
    }
    for (const c of n.children ?? []) walk(c, onPath);
    if (key) onPath.delete(key);
  };
  for (const n of p.nodes) if (!childIds.has(n.id)) walk(n.id, new Set());

  const idle = buckets.get('idle') ?? 0;
  const share = (us: number) => (total > 0 ? us / total : 0);
  return {
    file,
    totalMs: total / 1000,
    idleMs: idle / 1000,
    busyFraction: total > 0 ? 1 - idle / total : 0,
    buckets: [...buckets].map(([bucket, us]) => ({ bucket, ms: us / 1000, share: share(us) })).sort((a, b) => b.ms - a.ms),
    top: [...fns.values()]
      .filter((f) => f.bucket !== 'idle')
      .sort((a, b) => b.us - a.us)
      .slice(0, topN)
      .map((f) => ({ fn: f.fn, where: f.where, bucket: f.bucket, ms: f.us / 1000, share: share(f.us) })),
    servalInclusive: [...incl.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, topN)
      .map((f) => ({ fn: f.fn, where: f.where, ms: f.us / 1000, share: share(f.us) })),
  };
}

export function formatSummary(s: ProfileSummary, maxBuckets = 12): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const lines = [
    `${s.file}: ${s.totalMs.toFixed(0)} ms profiled, busy ${pct(s.busyFraction)} (idle ${s.idleMs.toFixed(0)} ms)`,
    '  buckets (self time):',
    ...s.buckets.slice(0, maxBuckets).map((b) => `    ${pct(b.share).padStart(6)}  ${b.ms.toFixed(0).padStart(7)} ms  ${b.bucket}`),
    '  top functions (self time):',
    ...s.top.map((f) => `    ${pct(f.share).padStart(6)}  ${f.fn}  ${f.where}`),
    "  Serval's functions (inclusive time):",
    ...s.servalInclusive.map((f) => `    ${pct(f.share).padStart(6)}  ${f.fn}  ${f.where}`),
  ];
  return lines.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const ti = args.indexOf('--top');
  const top = ti >= 0 ? Number(args[ti + 1]) : 15;
  const files = args.filter((a, i) => !a.startsWith('--') && (ti < 0 || i !== ti + 1));
  for (const f of files) console.log(formatSummary(summarizeProfile(f, top)));
}
