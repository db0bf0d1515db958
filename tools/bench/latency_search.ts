// The pure logic of the latency-budget benchmark (tools/bench/latency_budget.ts): the search for
// the highest request rate whose p99 stays within the target, and the goal computed from the
// results. Unit-tested in test/unit/latency_budget_bench.test.ts.
import { type PaResult, parsePerfAnalyzer } from './harness.js';

/**
 * perf_analyzer's report of one request rate. Its block is headed "Request Rate: R inference
 * requests per seconds" where a concurrency report says "Request concurrency: C", and the rest is
 * the same, so harness.ts's parser reads it once the header is renamed (only the header: the
 * closing summary "Request Rate: R, throughput: …" must not start a block).
 */
export function parseRateReport(text: string): PaResult | undefined {
  return parsePerfAnalyzer(text.replace(/^Request Rate: (?=[\d.]+ inference requests)/gm, 'Request concurrency: '));
}

/** One measured point: perf_analyzer at a fixed Poisson request rate. */
export interface RatePoint {
  rate: number;
  /** Undefined when perf_analyzer gave no report. */
  throughput?: number;
  p99Us?: number;
}

/**
 * A point meets the target when perf_analyzer reported, its p99 is within the target, and the
 * server kept up with the offered rate (an overloaded server answers fewer than it is sent; its
 * latencies then only describe the requests that made it).
 */
export function meetsTarget(p: RatePoint, targetUs: number, keptUp = 0.9): boolean {
  return p.throughput !== undefined && p.p99Us !== undefined && p.p99Us <= targetUs && p.throughput >= keptUp * p.rate;
}

/**
 * Bisection in log space for the highest rate that meets the target, between `lo` (assumed to
 * meet it, never measured unless nothing above it does) and `hi` (assumed not to). Each step
 * halves the ratio hi/lo, so the answer's resolution is relative: after n steps it is within a
 * factor (hi/lo)^(1/2^n) of the boundary.
 */
export class RateSearch {
  private low: number;
  private high: number;
  /** The highest rate measured that met the target. */
  best: number | undefined;
  readonly points: RatePoint[] = [];

  constructor(
    lo: number,
    hi: number,
    private readonly targetUs: number,
  ) {
    if (!(lo > 0 && hi > lo)) throw new Error(`rate search needs 0 < lo < hi, got ${lo}, ${hi}`);
    this.low = lo;
    this.high = hi;
  }

  /** The next rate to measure (whole requests per second). */
  next(): number {
    return Math.round(Math.sqrt(this.low * this.high));
  }

  record(p: RatePoint): boolean {
    this.points.push(p);
    const ok = meetsTarget(p, this.targetUs);
    if (ok) {
      this.low = Math.max(this.low, p.rate);
      if (this.best === undefined || p.rate > this.best) this.best = p.rate;
    } else {
      this.high = Math.min(this.high, p.rate);
    }
    return ok;
  }

  /** The current bracket [lo, hi]: the boundary lies between them. */
  get bracket(): [number, number] {
    return [this.low, this.high];
  }

  /** hi / lo of the current bracket: the answer's relative resolution. */
  get resolution(): number {
    return this.high / this.low;
  }
}

export interface VariantOutcome {
  name: string;
  /** Highest rate measured within the target (undefined: none was). */
  best: number | undefined;
  /** hi / lo of its final bracket. */
  resolution: number;
}

export interface Goal {
  met: boolean;
  adaptive: number;
  bestFixed: VariantOutcome | undefined;
  /** adaptive / best fixed. */
  ratio: number;
  /** The ratio at or above which the adaptive batcher counts as matching the best fixed delay. */
  threshold: number;
  /** Met by the confirmation runs rather than by the ratio. */
  byConfirmation: boolean;
}

/** Repeated, interleaved runs of the best fixed delay and the adaptive batcher at the best fixed delay's rate. */
export interface Confirmation {
  runs: number;
  fixedMet: number;
  adaptiveMet: number;
}

/**
 * The goal: the adaptive batcher's highest rate within the target is at least the best fixed
 * delay's, within noise. Noise is judged two ways. The search only knows each boundary to within
 * its final bracket, so the adaptive one counts as matching when its rate is at least the best
 * fixed rate divided by the larger of the two brackets' ratios (and never stricter than `floor`, a
 * 5% allowance). And one point per rate is one sample of a noisy machine, so the two are run again,
 * interleaved, at the best fixed delay's rate: if the adaptive batcher meets the target there at
 * least as often as the best fixed delay (and at least once), it matches too.
 */
export function evaluateGoal(adaptive: VariantOutcome, fixed: readonly VariantOutcome[], confirm?: Confirmation, floor = 0.95): Goal {
  const ranked = fixed.filter((f) => f.best !== undefined).sort((a, b) => b.best! - a.best!);
  const bestFixed = ranked[0];
  const a = adaptive.best ?? 0;
  if (!bestFixed) {
    return { met: a > 0, adaptive: a, bestFixed: undefined, ratio: Number.POSITIVE_INFINITY, threshold: 0, byConfirmation: false };
  }
  const threshold = Math.min(floor, 1 / Math.max(adaptive.resolution, bestFixed.resolution));
  const ratio = a / bestFixed.best!;
  const byRatio = ratio >= threshold;
  const byConfirmation = !byRatio && confirm !== undefined && confirm.adaptiveMet > 0 && confirm.adaptiveMet >= confirm.fixedMet;
  return { met: byRatio || byConfirmation, adaptive: a, bestFixed, ratio, threshold, byConfirmation };
}
