/**
 * The peer comparison's workloads, how its rounds are combined, and issue 16's goals computed
 * from the numbers (pure: tools/bench/peers.ts measures, test/unit/bench_peers.test.ts tests).
 */

export type Peer = 'serval' | 'mlserver' | 'bare';
export type Protocol = 'grpc' | 'http';

export interface Workload {
  id: string;
  model: string;
  proto: Protocol;
  conc: number;
  /** Also measured against the bare protocol server (bare_http.ts / bare_grpc.ts), `simple` only. */
  bare: boolean;
  label: string;
}

export const WORKLOADS: readonly Workload[] = [
  { id: 'simple_grpc_c1', model: 'simple', proto: 'grpc', conc: 1, bare: true, label: '`simple`, gRPC, concurrency 1' },
  { id: 'simple_grpc_c16', model: 'simple', proto: 'grpc', conc: 16, bare: true, label: '`simple`, gRPC, concurrency 16' },
  {
    id: 'simple_http_c16',
    model: 'simple',
    proto: 'http',
    conc: 16,
    bare: true,
    label: '`simple`, HTTP with JSON tensors, concurrency 16',
  },
  {
    id: 'ranker_mlp_grpc_c32',
    model: 'ranker_mlp',
    proto: 'grpc',
    conc: 32,
    bare: false,
    label: '`ranker_mlp`, gRPC, concurrency 32, batching on',
  },
  {
    id: 'image_classifier_grpc_c8',
    model: 'image_classifier',
    proto: 'grpc',
    conc: 8,
    bare: false,
    label: '`image_classifier`, gRPC, concurrency 8',
  },
];

/** One perf_analyzer measurement. */
export interface Sample {
  throughput: number;
  p50Us: number;
  p99Us: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** The rounds of one workload on one server combined: the median of each number (NaN ones left out). */
export function combineRounds(samples: readonly Sample[]): Sample | undefined {
  const of = (k: keyof Sample) => samples.map((s) => s[k]).filter((x) => Number.isFinite(x));
  const t = of('throughput');
  if (t.length === 0) return undefined;
  const p50 = of('p50Us');
  const p99 = of('p99Us');
  return { throughput: median(t), p50Us: p50.length ? median(p50) : NaN, p99Us: p99.length ? median(p99) : NaN };
}

/** Resident memory of a server's whole process tree, bytes. */
export interface Memory {
  idleRss: number;
  peakRss: number;
  /** Proportional set size (shared pages divided among the processes that map them). */
  idlePss?: number;
  peakPss?: number;
}

export interface PeerNumbers {
  /** Combined samples by workload id and server. */
  perf: Record<string, Partial<Record<Peer, Sample>>>;
  memory: Partial<Record<'serval' | 'mlserver', Memory>>;
}

export interface Goal {
  what: string;
  measured: string;
  required: string;
  /** undefined: a number it needs was not measured. */
  met: boolean | undefined;
}

export const fmtRate = (x: number): string => (x >= 100 ? Math.round(x).toLocaleString('en-US') : x.toPrecision(3));
const fmtMs = (us: number): string => (us / 1000).toFixed(2);
const fmtMiB = (b: number): string => (b / 2 ** 20).toFixed(0);
// A ratio is shown rounded toward failing its goal, so a missed goal never reads as its threshold.
export const down = (x: number, digits: number): string => (Math.floor(x * 10 ** digits + 1e-9) / 10 ** digits).toFixed(digits);
export const up = (x: number, digits: number): string => (Math.ceil(x * 10 ** digits - 1e-9) / 10 ** digits).toFixed(digits);

/** Issue 16's goals for the peer comparison, each met or missed from the numbers. */
export function evaluateGoals(n: PeerNumbers): Goal[] {
  const goals: Goal[] = [];
  const get = (id: string, peer: Peer): Sample | undefined => n.perf[id]?.[peer];

  const ratio = (what: string, id: string, a: Peer, b: Peer, min: number, required: string) => {
    const x = get(id, a);
    const y = get(id, b);
    if (!x || !y || !(y.throughput > 0)) {
      goals.push({ what, measured: 'not measured', required, met: undefined });
      return;
    }
    const r = x.throughput / y.throughput;
    const shown = min < 1 ? `${down(r * 100, 0)}%` : `${down(r, 2)}×`;
    goals.push({
      what,
      measured: `${fmtRate(x.throughput)} vs ${fmtRate(y.throughput)} infer/s = ${shown}`,
      required,
      met: r >= min,
    });
  };

  ratio('`simple` gRPC @16: Serval ≥ 5× MLServer', 'simple_grpc_c16', 'serval', 'mlserver', 5, '≥ 5×');
  ratio('`simple` HTTP @16: Serval ≥ 5× MLServer', 'simple_http_c16', 'serval', 'mlserver', 5, '≥ 5×');
  ratio('`simple` gRPC @16: Serval ≥ 60% of the bare grpc-js handler', 'simple_grpc_c16', 'serval', 'bare', 0.6, '≥ 60%');
  ratio('`simple` HTTP @16: Serval ≥ 60% of the bare fastify route', 'simple_http_c16', 'serval', 'bare', 0.6, '≥ 60%');

  const g = get('simple_grpc_c16', 'serval');
  const h = get('simple_http_c16', 'serval');
  goals.push(
    g && h
      ? {
          what: '`simple` @16: Serval gRPC ≥ Serval HTTP',
          measured: `gRPC ${fmtRate(g.throughput)} vs HTTP ${fmtRate(h.throughput)} infer/s = ${down(g.throughput / h.throughput, 2)}×`,
          required: '≥ 1.00×',
          met: g.throughput >= h.throughput,
        }
      : { what: '`simple` @16: Serval gRPC ≥ Serval HTTP', measured: 'not measured', required: '≥ 1.00×', met: undefined },
  );

  for (const [id, proto] of [
    ['simple_grpc_c16', 'gRPC'],
    ['simple_http_c16', 'HTTP'],
  ] as const) {
    const s = get(id, 'serval');
    const what = `\`simple\` ${proto} @16: Serval p99 ≤ 2× p50`;
    if (!s || !Number.isFinite(s.p50Us) || !Number.isFinite(s.p99Us) || !(s.p50Us > 0)) {
      goals.push({ what, measured: 'not measured', required: '≤ 2×', met: undefined });
      continue;
    }
    const r = s.p99Us / s.p50Us;
    goals.push({ what, measured: `p99 ${fmtMs(s.p99Us)} ms / p50 ${fmtMs(s.p50Us)} ms = ${up(r, 2)}×`, required: '≤ 2×', met: r <= 2 });
  }

  ratio('`ranker_mlp` gRPC @32, batching: Serval ≥ 6× MLServer', 'ranker_mlp_grpc_c32', 'serval', 'mlserver', 6, '≥ 6×');

  const sm = n.memory.serval;
  const mm = n.memory.mlserver;
  for (const [phase, key, pss] of [
    ['idle after load', 'idleRss', 'idlePss'],
    ['peak under load', 'peakRss', 'peakPss'],
  ] as const) {
    const what = `RSS ${phase}: Serval ≤ MLServer (same models; MLServer's whole process tree)`;
    if (!sm || !mm || !(sm[key] > 0) || !(mm[key] > 0)) {
      goals.push({ what, measured: 'not measured', required: '≤ 1.00×', met: undefined });
      continue;
    }
    const extra = sm[pss] !== undefined && mm[pss] !== undefined ? ` (PSS ${fmtMiB(sm[pss])} vs ${fmtMiB(mm[pss])} MiB)` : '';
    goals.push({
      what,
      measured: `${fmtMiB(sm[key])} vs ${fmtMiB(mm[key])} MiB = ${up(sm[key] / mm[key], 2)}×${extra}`,
      required: '≤ 1.00×',
      met: sm[key] <= mm[key],
    });
  }
  return goals;
}
