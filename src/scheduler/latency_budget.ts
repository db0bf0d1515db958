// The latency-budget batcher (Serval's own, beyond Triton; docs/batching.md): a model with a p99
// latency target lets the dynamic batcher choose its queue delay itself. A longer delay forms
// larger batches (more throughput per core) but every request may wait it out; this controller
// spends the part of the latency budget the model does not need on waiting, and gives it back
// as soon as the observed p99 approaches the target.
//
// Pure and clock-injected: it never reads the time itself, so tests drive it with fake time.
import type { LatencyBudgetPolicy } from '../config/resolved.js';

/** How the controller reacts; the defaults are the server's, tests may shorten them. */
export interface LatencyBudgetTuning {
  /** Latencies older than this leave the window; no request for this long resets the delay to 0. */
  windowNs: number;
  /** At most this many latencies are kept (the newest). */
  maxSamples: number;
  /** A decision needs at least this many latencies observed since the delay last changed. */
  minSamples: number;
  /** At most one decision per this interval. */
  intervalNs: number;
  /** The delay grows while p99 < growBelow × target … */
  growBelow: number;
  /** … and is cut once p99 ≥ cutAbove × target. */
  cutAbove: number;
  /** Additive growth, as a fraction of the delay's bound. */
  stepFraction: number;
  /** Multiplicative cut. */
  cutFactor: number;
  /** No growth while at least this share of the window's requests went in full batches (the delay cannot make them larger). */
  fullShare: number;
  /**
   * No growth while the model's instances were busy less than this share of the time since the
   * last decision: with capacity to spare, larger batches buy nothing and the wait is pure latency.
   */
  busyShare: number;
}

export const DEFAULT_TUNING: LatencyBudgetTuning = {
  windowNs: 1e9,
  maxSamples: 2048,
  minSamples: 50,
  intervalNs: 50e6,
  growBelow: 0.6,
  cutAbove: 0.9,
  stepFraction: 1 / 16,
  cutFactor: 0.5,
  fullShare: 0.5,
  busyShare: 0.5,
};

/** What the controller did at a decision (for tests and logs). */
export type Decision = 'grow' | 'cut' | 'raise' | 'hold';

/**
 * AIMD over the queue delay: every decision looks at the p99 of the latencies observed since the
 * delay last changed (at most `windowNs` old) and grows the delay by a step while p99 stays under
 * `growBelow` × target, the instances are busy at least `busyShare` of the time and batches are
 * not full, halves it once p99 reaches `cutAbove` × target
 * (or, when halving made p99 worse, doubles it instead: see `correct`), else holds. The delay
 * starts at 0, stays within [0, maxDelayNs], and drops to 0 when no request has completed for a
 * window (a lone request then does not wait for company that is not coming).
 */
export class LatencyBudget {
  readonly tuning: LatencyBudgetTuning;
  private delay = 0;
  private readonly step: number;
  private readonly origin: bigint;
  // Ring buffer of the window's samples: completion time (ns since origin), latency, full batch.
  private readonly at: Float64Array;
  private readonly latency: Float64Array;
  private readonly full: Uint8Array;
  private head = 0;
  private count = 0;
  private lastDecisionNs = 0;
  private lastObservedNs = -Infinity;
  /** Execution time of the model's instances since the last decision, ns. */
  private busyNs = 0;
  private lastP99 = Number.NaN;
  private lastBusy = Number.NaN;
  /** The p99 that started the correction in progress (a cut or a raise), if any. */
  private correcting: number | undefined;
  /** Which way the next correction moves the delay. */
  private direction: 'down' | 'up' = 'down';
  /** Raises from delay 0 that made p99 worse, in a row; … */
  private failedRaises = 0;
  /** … and the decisions to wait at delay 0 before trying another. */
  private waits = 0;

  constructor(
    readonly policy: LatencyBudgetPolicy,
    private readonly clock: () => bigint,
    tuning: Partial<LatencyBudgetTuning> = {},
  ) {
    this.tuning = { ...DEFAULT_TUNING, ...tuning };
    // Whole nanoseconds: the scheduler does bigint arithmetic with the delay.
    this.step = Math.max(1000, Math.round(policy.maxDelayNs * this.tuning.stepFraction));
    this.origin = clock();
    const n = this.tuning.maxSamples;
    this.at = new Float64Array(n);
    this.latency = new Float64Array(n);
    this.full = new Uint8Array(n);
  }

  private elapsed(): number {
    return Number(this.clock() - this.origin);
  }

  /** The queue delay the batcher should use now, in ns. */
  delayNs(): number {
    if (this.delay > 0 && this.elapsed() - this.lastObservedNs > this.tuning.windowNs) {
      this.delay = 0;
      this.count = 0;
    }
    return this.delay;
  }

  /** The p99 of the latencies at the last decision, in ns (NaN before the first). */
  p99Ns(): number {
    return this.lastP99;
  }

  /** The instances' busy share between the last two decisions (NaN before the first). */
  busyShare(): number {
    return this.lastBusy;
  }

  /** An execution of `busyNs` (compute input + infer + output) finished, on any of the model's `instances`. */
  executed(busyNs: number, instances = 1): void {
    this.busyNs += busyNs / Math.max(1, instances);
  }

  /**
   * One request completed successfully after `latencyNs` (arrival to response); `fullBatch`: it
   * ran in a batch of the largest preferred size or more. Returns the decision taken, if any.
   */
  observe(latencyNs: number, fullBatch: boolean): Decision | undefined {
    const t = this.elapsed();
    const { maxSamples, minSamples, intervalNs } = this.tuning;
    const i = (this.head + this.count) % maxSamples;
    this.at[i] = t;
    this.latency[i] = latencyNs;
    this.full[i] = fullBatch ? 1 : 0;
    if (this.count < maxSamples) this.count++;
    else this.head = (this.head + 1) % maxSamples;
    this.lastObservedNs = t;
    this.expire(t);
    if (this.count < minSamples || t - this.lastDecisionNs < intervalNs) return undefined;
    return this.decide(t);
  }

  /** Drops the samples older than the window. */
  private expire(t: number): void {
    const { maxSamples, windowNs } = this.tuning;
    while (this.count > 0 && t - this.at[this.head]! > windowNs) {
      this.head = (this.head + 1) % maxSamples;
      this.count--;
    }
  }

  private decide(t: number): Decision {
    const { maxSamples, growBelow, cutAbove, fullShare, busyShare } = this.tuning;
    const sorted = new Float64Array(this.count);
    let fullCount = 0;
    for (let k = 0; k < this.count; k++) {
      const i = (this.head + k) % maxSamples;
      sorted[k] = this.latency[i]!;
      fullCount += this.full[i]!;
    }
    sorted.sort();
    const p99 = percentile(sorted, 0.99);
    this.lastP99 = p99;
    const busy = t > this.lastDecisionNs ? this.busyNs / (t - this.lastDecisionNs) : 0;
    this.lastBusy = busy;
    this.busyNs = 0;
    this.lastDecisionNs = t;
    const { targetNs, maxDelayNs } = this.policy;
    let decision: Decision = 'hold';
    if (p99 >= cutAbove * targetNs) {
      decision = this.correct(p99);
    } else {
      this.correcting = undefined;
      this.direction = 'down';
      this.failedRaises = 0;
      this.waits = 0;
      const grow = p99 < growBelow * targetNs && fullCount < fullShare * this.count && busy >= busyShare;
      if (grow && this.delay < maxDelayNs) {
        decision = 'grow';
        this.delay = Math.min(maxDelayNs, this.delay + this.step);
      }
    }
    // Judge the new delay on latencies it produced, not on those of the old one.
    if (decision !== 'hold') this.count = 0;
    return decision;
  }

  /**
   * p99 is at or over the cut line. Usually the delay is the cause: cut it. But near the model's
   * capacity the opposite can hold (smaller batches cost more per request, so the queue grows), so
   * a correction that made p99 worse reverses the direction, and at delay 0 the controller tries
   * a larger one, backing off exponentially while such tries keep failing.
   */
  private correct(p99: number): Decision {
    const { cutFactor } = this.tuning;
    const { maxDelayNs } = this.policy;
    if (this.correcting !== undefined && p99 > this.correcting) {
      if (this.direction === 'up') {
        this.failedRaises++;
        this.waits = Math.min(64, 2 ** this.failedRaises);
      }
      this.direction = this.direction === 'up' ? 'down' : 'up';
    }
    if (this.direction === 'up' && this.delay >= maxDelayNs) this.direction = 'down';
    if (this.direction === 'down' && this.delay === 0) {
      if (this.waits > 0 || maxDelayNs === 0) {
        this.waits = Math.max(0, this.waits - 1);
        this.correcting = undefined;
        return 'hold';
      }
      this.direction = 'up';
    }
    this.correcting = p99;
    if (this.direction === 'up') {
      this.delay = Math.min(maxDelayNs, Math.max(this.step, Math.round(this.delay / cutFactor)));
      return 'raise';
    }
    const cut = Math.round(this.delay * cutFactor);
    this.delay = cut < this.step ? 0 : cut;
    return 'cut';
  }
}

/** The q-quantile of ascending `sorted` (nearest rank: the smallest value with at least q of the samples at or below it). */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1]!;
}
