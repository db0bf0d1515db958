/**
 * Pure logic of the seeds' replays (tools/bench/seeds.ts): splitting the images among jobs,
 * parsing ApacheBench's report, summarising a job run, the ratios each study reported and
 * whether this machine reproduces them. No I/O here, so all of it is unit-tested
 * (test/unit/bench_seeds.test.ts).
 */

/** Contiguous shares of `m` images for `n` jobs; the first `m % n` jobs take one more. */
export function shares(m: number, n: number): { first: number; count: number }[] {
  if (!Number.isInteger(m) || !Number.isInteger(n) || m < 0 || n < 1) throw new Error(`shares: bad m=${m} n=${n}`);
  const base = Math.floor(m / n);
  const extra = m % n;
  const out: { first: number; count: number }[] = [];
  let first = 0;
  for (let i = 0; i < n; i++) {
    const count = base + (i < extra ? 1 : 0);
    out.push({ first, count });
    first += count;
  }
  return out;
}

export function median(xs: readonly number[]): number {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

/** a / b, NaN when either is missing or b is not positive. */
export function ratio(a: number | undefined, b: number | undefined): number {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b <= 0) return NaN;
  return a / b;
}

/** A ratio as the study wrote it: "+26.5%" for gains under 2×, "3.75×" otherwise. */
export function formatGain(r: number): string {
  if (!Number.isFinite(r)) return '–';
  if (r >= 2) return `${r.toFixed(2)}×`;
  const pct = (r - 1) * 100;
  return `${pct >= 0 ? '+' : '−'}${Math.abs(pct).toFixed(1)}%`;
}

// ------------------------------------------------------------------ ApacheBench

export interface AbResult {
  complete: number;
  failed: number;
  non2xx: number;
  requestsPerS: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  longestMs: number;
}

/**
 * Parses `ab`'s report. "Non-2xx responses" only appears when there were some, so its absence
 * means 0; the percentiles come from "Percentage of the requests served within a certain time".
 */
export function parseAb(text: string): AbResult | undefined {
  const num = (re: RegExp): number | undefined => {
    const m = text.match(re);
    return m ? Number(m[1]) : undefined;
  };
  const complete = num(/^Complete requests:\s+(\d+)/m);
  const rps = num(/^Requests per second:\s+([\d.]+)/m);
  if (complete === undefined || rps === undefined) return undefined;
  const pct = (p: number): number => num(new RegExp(`^\\s*${p}%\\s+(\\d+)`, 'm')) ?? NaN;
  return {
    complete,
    failed: num(/^Failed requests:\s+(\d+)/m) ?? 0,
    non2xx: num(/^Non-2xx responses:\s+(\d+)/m) ?? 0,
    requestsPerS: rps,
    meanMs: num(/^Time per request:\s+([\d.]+) \[ms\] \(mean\)$/m) ?? NaN,
    p50Ms: pct(50),
    p99Ms: pct(99),
    longestMs: pct(100),
  };
}

/**
 * The body `ab -p` posts: a KServe v2 request with Triton's binary tensor data extension — a JSON
 * header, then the raw bytes of the input. `Inference-Header-Content-Length` must be the header's
 * byte length. The output is asked for in binary too, so neither direction carries JSON numbers.
 */
export function binaryInferBody(
  input: { name: string; shape: number[]; datatype: string; data: Buffer },
  output: string,
): { body: Buffer; headerLength: number } {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: input.name, shape: input.shape, datatype: input.datatype, parameters: { binary_data_size: input.data.length } }],
      outputs: [{ name: output, parameters: { binary_data: true } }],
    }),
  );
  return { body: Buffer.concat([header, input.data]), headerLength: header.length };
}

// ------------------------------------------------------------------ study 1: the jobs

/** What tools/bench/seeds/job.py prints. */
export interface JobResult {
  first: number;
  images: number;
  top1: number[];
  /** Per image, the sum of |scores|: compares the numbers, which random weights make necessary. */
  sums: number[];
  load_s: number;
  loop_s: number;
  cpu_s: number;
  maxrss_kib: number;
}

export function parseJobOutput(text: string): JobResult | undefined {
  for (const line of text.split('\n').reverse()) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      const j = JSON.parse(t) as Partial<JobResult>;
      if (typeof j.images === 'number' && Array.isArray(j.top1)) return j as JobResult;
    } catch {
      /* not the result line */
    }
  }
  return undefined;
}

export interface JobsSummary {
  images: number;
  wallS: number;
  imagesPerS: number;
  /** Mean per-job time from start to model ready (local: session created; served: client made). */
  loadS: number;
  jobsCpuS: number;
  /** Top-1 classes and sums of |scores| in image order (shares are contiguous: ordering by `first` restores it). */
  top1: number[];
  sums: number[];
}

export function summarizeJobs(results: readonly JobResult[], wallS: number): JobsSummary {
  const ordered = [...results].sort((a, b) => a.first - b.first);
  const images = ordered.reduce((s, r) => s + r.images, 0);
  return {
    images,
    wallS,
    imagesPerS: wallS > 0 ? images / wallS : NaN,
    loadS: ordered.length ? ordered.reduce((s, r) => s + r.load_s, 0) / ordered.length : NaN,
    jobsCpuS: ordered.reduce((s, r) => s + r.cpu_s, 0),
    top1: ordered.flatMap((r) => r.top1),
    sums: ordered.flatMap((r) => r.sums ?? []),
  };
}

/**
 * How many images got the same answer in two runs (same inputs, same ONNX file): the same top-1
 * class and sums of |scores| within `rel` of each other (batched and unbatched kernels may round
 * differently). Images missing from either side count as different.
 */
export function agreement(
  a: { top1: readonly number[]; sums: readonly number[] },
  b: { top1: readonly number[]; sums: readonly number[] },
  rel = 1e-3,
): { same: number; of: number } {
  const of = Math.max(a.top1.length, b.top1.length);
  let same = 0;
  for (let i = 0; i < Math.min(a.top1.length, b.top1.length); i++) {
    const x = a.sums[i];
    const y = b.sums[i];
    if (a.top1[i] !== b.top1[i] || x === undefined || y === undefined) continue;
    if (Math.abs(x - y) <= rel * Math.max(Math.abs(x), Math.abs(y), 1e-12)) same++;
  }
  return { same, of };
}

/** A tool's error output made safe for one Markdown table cell (no pipes, no newlines, short). */
export function cellText(s: string, max = 80): string {
  const t = s.replace(/\s+/g, ' ').replace(/\|/g, '/').trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** Peak of the summed RSS over samples taken at the same instants (pid → KiB per sample). */
export function peakSum(samples: readonly Map<number, number>[], pids?: ReadonlySet<number>): number {
  let peak = 0;
  for (const s of samples) {
    let sum = 0;
    for (const [pid, kib] of s) if (!pids || pids.has(pid)) sum += kib;
    peak = Math.max(peak, sum);
  }
  return peak;
}

// ------------------------------------------------------------------ the studies' ratios

export interface Study1Throughput {
  /** images/s of N local jobs (the study's decentralized baseline). */
  local: number;
  /** N jobs calling Serval: no dynamic batching, dynamic batching, dynamic batching + 2 instances. */
  servedNoBatching: number;
  servedBatching: number;
  servedBatchingX2: number;
}

export interface StudyRatio {
  what: string;
  reported: number;
  measured: number;
}

/** The study's reported ratios (issue 16): +26.5% from batching, +36% from workers, 3.75× in total. */
export const STUDY1_REPORTED = { batching: 1.265, workers: 1.36, total: 3.75 } as const;
/** The batching-worker study: 2.5× from dynamic batching under `ab -n 1000 -c 32` (on a GPU). */
export const STUDY2_REPORTED = { batching: 2.5 } as const;

export function study1Ratios(t: Study1Throughput): StudyRatio[] {
  return [
    {
      what: 'dynamic batching (served, batching / served, none)',
      reported: STUDY1_REPORTED.batching,
      measured: ratio(t.servedBatching, t.servedNoBatching),
    },
    {
      what: 'a second instance (batching, 2 instances / batching, 1)',
      reported: STUDY1_REPORTED.workers,
      measured: ratio(t.servedBatchingX2, t.servedBatching),
    },
    // The study's last configuration (batching and a second worker) against its baseline.
    {
      what: 'in total (served, batching, 2 instances / local jobs)',
      reported: STUDY1_REPORTED.total,
      measured: ratio(t.servedBatchingX2, t.local),
    },
  ];
}

/**
 * Whether a measured ratio reproduces a reported gain: it must be a gain (> 1 by more than the
 * noise margin) and reach at least half of the reported gain over 1×. Deliberately loose — the
 * point is the direction and rough size on different hardware, not the exact figure.
 */
export function reproduces(reported: number, measured: number, noise = 0.05): boolean {
  if (!Number.isFinite(measured)) return false;
  if (measured <= 1 + noise) return false;
  return measured - 1 >= (reported - 1) / 2;
}

/** Cores a process used over a run: CPU seconds / wall seconds. */
export function cores(cpuS: number, wallS: number): number {
  return wallS > 0 ? cpuS / wallS : NaN;
}

/**
 * The Triton tutorial's perf_analyzer numbers at concurrency 16 (`-b 2`, text recognition, A100;
 * Conceptual Guide part 2): infer/s without dynamic batching, with it, with it and 2 instances.
 */
export const TUTORIAL_REPORTED = { noBatching: 975.048, batching: 3187.76, batchingX2: 4134.09 } as const;
