// The latency-budget batcher (docs/batching.md, "Latency-budget batching"): the AIMD controller of
// src/scheduler/latency_budget.ts driven by a fake clock, its config parameter
// (src/config/latency_target.ts), the scheduler using its delay and the metric that shows it.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ExecResult, Execution } from '../../src/backends/backend.js';
import { LATENCY_TARGET_PARAMETER } from '../../src/config/latency_target.js';
import { UNBOUNDED } from '../../src/config/resolve.js';
import type { InstancePlacement, LatencyBudgetPolicy } from '../../src/config/resolved.js';
import type { ModelConfig } from '../../src/config/types.js';
import { buildRegistry } from '../../src/frontends/metrics/metrics.js';
import { DEFAULT_TUNING, type Decision, LatencyBudget, percentile } from '../../src/scheduler/latency_budget.js';
import { Scheduler, type SchedulerRequest } from '../../src/scheduler/scheduler.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { expectServalError } from '../helpers/errors.js';
import { fakeCore } from '../helpers/frontends.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { resolveForTest } from '../helpers/resolve.js';
import { simpleConfig } from '../helpers/simple.js';
import { i32 } from '../helpers/tensors.js';

const MS = 1e6;

/** A controller on a clock the test moves by hand. */
function controller(policy: LatencyBudgetPolicy) {
  let t = 1_000_000_000_000n;
  const budget = new LatencyBudget(policy, () => t);
  const advanceNs = (ns: number): void => {
    t += BigInt(Math.round(ns));
  };
  return { budget, advanceNs };
}

/** A deterministic pseudo-random sequence in [0, 1) (mulberry32), so runs repeat exactly. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A synthetic model under steady load: `ratePerS` requests a second complete, each after
 * `computeNs(delay)` plus a share of the current delay (a request waits between none and all of it
 * for company), with the instances busy `busy` of the time. Returns the latencies and delays seen,
 * one per request.
 */
function drive(
  c: ReturnType<typeof controller>,
  seconds: number,
  ratePerS: number,
  computeNs: (delayNs: number) => number,
  rnd: () => number,
  fullBatch = false,
  busy = 0.8,
): { latency: number[]; delay: number[]; decisions: Decision[] } {
  const out = { latency: [] as number[], delay: [] as number[], decisions: [] as Decision[] };
  for (let i = 0; i < seconds * ratePerS; i++) {
    c.advanceNs(1e9 / ratePerS);
    c.budget.executed(busy * (1e9 / ratePerS));
    const delay = c.budget.delayNs();
    const latency = computeNs(delay) + delay * rnd();
    const d = c.budget.observe(latency, fullBatch);
    if (d) out.decisions.push(d);
    out.latency.push(latency);
    out.delay.push(delay);
    // The scheduler turns the delay into a bigint: it must stay a whole number of ns.
    if (!Number.isInteger(delay)) throw new Error(`delay ${delay} ns is not a whole number`);
  }
  return out;
}

const p99 = (xs: number[]): number => percentile(Float64Array.from(xs).sort(), 0.99);

describe('LatencyBudget (AIMD queue delay, fake clock)', () => {
  it('stays at 0 without load, however long it waits', () => {
    const c = controller({ targetNs: 10 * MS, maxDelayNs: 5 * MS });
    for (let i = 0; i < 100; i++) {
      c.advanceNs(1e9);
      expect(c.budget.delayNs()).toBe(0);
    }
    expect(c.budget.p99Ns()).toBeNaN(); // no decision was taken
  });

  it('converges under a synthetic load: spends the budget on waiting but keeps p99 under the target', () => {
    const target = 10 * MS;
    const c = controller({ targetNs: target, maxDelayNs: target });
    const rnd = random(1);
    // 2 ms of compute with ±0.5 ms of jitter; 2000 requests/s for 20 s.
    const run = drive(c, 20, 2000, () => 1.5 * MS + rnd() * MS, rnd);
    const last5s = run.latency.slice(-5 * 2000);
    const delays = run.delay.slice(-5 * 2000);
    // Under the target, with the latency the compute alone does not need mostly spent on waiting.
    expect(p99(last5s)).toBeLessThanOrEqual(target);
    expect(p99(last5s)).toBeGreaterThan(0.6 * target);
    expect(Math.min(...delays)).toBeGreaterThan(2 * MS);
    expect(run.decisions).toContain('grow');
  });

  it('backs off when latency rises towards the target, down to 0 when the compute alone needs it all', () => {
    const target = 10 * MS;
    const c = controller({ targetNs: target, maxDelayNs: target });
    const rnd = random(2);
    drive(c, 10, 2000, () => 2 * MS, rnd);
    const grown = c.budget.delayNs();
    expect(grown).toBeGreaterThan(3 * MS);
    // The model slows down: 9.5 ms of compute leaves no room for any delay.
    const slow = drive(c, 2, 2000, () => 9.5 * MS, rnd);
    expect(slow.decisions.filter((d) => d === 'cut').length).toBeGreaterThan(0);
    expect(c.budget.delayNs()).toBe(0);
    expect(slow.decisions).not.toContain('grow');
    // A smaller rise (p99 just over 0.9 × target) cuts it without emptying it in one step.
    const d = controller({ targetNs: target, maxDelayNs: target });
    drive(d, 10, 2000, () => 2 * MS, random(3));
    const before = d.budget.delayNs();
    const rise = drive(
      d,
      0.2,
      2000,
      () => 9.2 * MS - before,
      () => 1,
    );
    expect(rise.decisions[0]).toBe('cut');
    expect(rise.delay.at(-1)).toBeLessThan(before);
  });

  it('raises the delay when cutting it made p99 worse (near capacity, small batches cost more)', () => {
    const target = 10 * MS;
    const c = controller({ targetNs: target, maxDelayNs: 5 * MS });
    const rnd = random(7);
    // Without a delay, each request costs so much that the queue alone nearly fills the budget
    // (10 ms at delay 0); every millisecond of delay makes batches cheaper.
    const run = drive(c, 10, 2000, (delay) => 2 * MS + (8 * MS * MS) / (delay + MS), rnd);
    expect(run.decisions).toContain('raise');
    const last = run.latency.slice(-5 * 2000);
    expect(p99(last)).toBeLessThanOrEqual(target);
    expect(run.delay.slice(-5 * 2000).filter((d) => d > 0).length).toBeGreaterThan(0.9 * 5 * 2000);
  });

  it('never exceeds its upper bound, with all the budget to spare', () => {
    const c = controller({ targetNs: 1e9, maxDelayNs: 2 * MS });
    const rnd = random(4);
    const run = drive(c, 10, 1000, () => 100_000, rnd);
    expect(Math.max(...run.delay)).toBe(2 * MS);
    expect(c.budget.delayNs()).toBe(2 * MS);
  });

  it('does not grow while the instances have capacity to spare: waiting would buy nothing', () => {
    const c = controller({ targetNs: 10 * MS, maxDelayNs: 5 * MS });
    const light = drive(c, 5, 2000, () => MS, random(8), false, 0.3);
    expect(Math.max(...light.delay)).toBe(0);
    expect(c.budget.busyShare()).toBeCloseTo(0.3, 1);
    // Once they are busy most of the time, the same latencies let it grow.
    const busy = drive(c, 1, 2000, () => MS, random(9), false, 0.9);
    expect(busy.decisions).toContain('grow');
    expect(c.budget.delayNs()).toBeGreaterThan(0);
  });

  it('does not grow while batches leave full: a longer delay cannot make them larger', () => {
    const c = controller({ targetNs: 10 * MS, maxDelayNs: 5 * MS });
    const run = drive(c, 5, 2000, () => MS, random(5), true);
    expect(Math.max(...run.delay)).toBe(0);
    expect(run.decisions.length).toBeGreaterThan(0);
    expect(run.decisions.every((d) => d === 'hold')).toBe(true);
  });

  it('returns to 0 once requests stop for a window', () => {
    const c = controller({ targetNs: 10 * MS, maxDelayNs: 5 * MS });
    drive(c, 5, 2000, () => MS, random(6));
    expect(c.budget.delayNs()).toBeGreaterThan(0);
    c.advanceNs(DEFAULT_TUNING.windowNs / 2);
    expect(c.budget.delayNs()).toBeGreaterThan(0);
    c.advanceNs(DEFAULT_TUNING.windowNs);
    expect(c.budget.delayNs()).toBe(0);
  });

  it('decides only with enough fresh samples, at most once per interval', () => {
    const c = controller({ targetNs: 10 * MS, maxDelayNs: 5 * MS });
    const { minSamples, intervalNs, windowNs } = DEFAULT_TUNING;
    // Samples further apart than the window never add up to a decision.
    for (let i = 0; i < minSamples * 2; i++) {
      c.advanceNs(windowNs * 0.6);
      c.budget.executed(windowNs * 0.6);
      expect(c.budget.observe(MS, false)).toBeUndefined();
    }
    // Fewer than minSamples within the window: no decision; the minSamples-th: one.
    for (let i = 0; i < minSamples - 2; i++) {
      c.advanceNs(windowNs / (2 * minSamples));
      c.budget.executed(windowNs / (2 * minSamples));
      expect(c.budget.observe(MS, false)).toBeUndefined();
    }
    c.advanceNs(windowNs / (2 * minSamples));
    c.budget.executed(windowNs / (2 * minSamples));
    expect(c.budget.observe(MS, false)).toBe('grow');
    // A burst right after: the new delay is judged on its own latencies, a full set of them, and
    // not before the interval has passed.
    for (let i = 0; i < minSamples * 3; i++) expect(c.budget.observe(MS, false)).toBeUndefined();
    c.advanceNs(intervalNs);
    c.budget.executed(intervalNs);
    expect(c.budget.observe(MS, false)).toBe('grow');
  });

  it('keeps the delay a whole number of nanoseconds through any mix of growth and cuts (the scheduler makes it a bigint)', () => {
    const { minSamples, intervalNs } = DEFAULT_TUNING;
    /** One decision's worth of samples, all of latency `ns`. */
    const decision = (c: ReturnType<typeof controller>, ns: number): void => {
      for (let i = 0; i < minSamples; i++) {
        c.advanceNs(intervalNs / minSamples);
        c.budget.executed(intervalNs / minSamples);
        c.budget.observe(ns, false);
      }
    };
    for (let grown = 1; grown <= 16; grown++) {
      const c = controller({ targetNs: 10 * MS, maxDelayNs: 5 * MS });
      for (let i = 0; i < grown; i++) decision(c, MS);
      expect(c.budget.delayNs()).toBe((grown * 5 * MS) / 16);
      for (let i = 0; i < 12; i++) {
        decision(c, i % 3 === 2 ? MS : 20 * MS); // mostly over the target, now and then under it
        expect(Number.isInteger(c.budget.delayNs())).toBe(true);
      }
    }
  });

  it('percentile is the nearest rank', () => {
    const xs = Float64Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(xs, 0.99)).toBe(99);
    expect(percentile(xs, 0.5)).toBe(50);
    expect(percentile([7], 0.99)).toBe(7);
    expect(percentile([], 0.99)).toBeNaN();
  });
});

describe(`config parameter ${LATENCY_TARGET_PARAMETER}`, () => {
  const config = (value: string | undefined, dynamic: ModelConfig['dynamic_batching'] | null = {}): ModelConfig => ({
    ...simpleConfig(),
    ...(dynamic && { dynamic_batching: dynamic }),
    ...(value !== undefined && { parameters: { [LATENCY_TARGET_PARAMETER]: { string_value: value } } }),
  });

  it('sets the target; the delay is bounded by max_queue_delay_microseconds when set, and never beyond the target', () => {
    expect(resolveForTest(config('20000')).batching.latencyBudget).toEqual({ targetNs: 20 * MS, maxDelayNs: 20 * MS });
    expect(resolveForTest(config('20000', { max_queue_delay_microseconds: 5000 })).batching.latencyBudget).toEqual({
      targetNs: 20 * MS,
      maxDelayNs: 5 * MS,
    });
    expect(resolveForTest(config('2000', { max_queue_delay_microseconds: 5000 })).batching.latencyBudget).toEqual({
      targetNs: 2 * MS,
      maxDelayNs: 2 * MS,
    });
    // The configured delay itself is unchanged in the policy and in the config the endpoints report.
    const r = resolveForTest(config('20000', { max_queue_delay_microseconds: 5000 }));
    expect(r.batching.maxQueueDelayNs).toBe(5 * MS);
    expect(r.json.parameters).toEqual({ [LATENCY_TARGET_PARAMETER]: { string_value: '20000' } });
  });

  it('without the parameter there is no latency budget', () => {
    expect(resolveForTest(config(undefined)).batching.latencyBudget).toBeUndefined();
  });

  it.each(['abc', '0', '-5', '1.5', '', '10ms', '1e4', '99999999999'])('refuses %j with a clear text', (value) => {
    const e = expectServalError(() => resolveForTest(config(value), { folderName: 'simple' }), 'INVALID_ARG');
    expect(e.message).toBe(
      `model 'simple': parameter '${LATENCY_TARGET_PARAMETER}' must be a whole number of microseconds from 1 to 3600000000, got '${value}'`,
    );
  });

  it('requires dynamic_batching', () => {
    const e = expectServalError(() => resolveForTest(config('10000', null), { folderName: 'simple' }), 'INVALID_ARG');
    expect(e.message).toBe(`model 'simple': parameter '${LATENCY_TARGET_PARAMETER}' requires dynamic_batching`);
  });
});

/** Runs every batch at once, answering Y = X, and reports `computeNs` of compute for it. */
class InstantInstance extends FakeInstanceBase {
  readonly placement: InstancePlacement = { name: 'instant_0', kind: 'KIND_CPU', deviceId: -1 };
  readonly capacity = 1;
  readonly sizes: number[] = [];

  constructor(private readonly computeNs = 0) {
    super();
  }

  protected run(b: Batch): Execution {
    const slot = b.inputs[0]!;
    this.sizes.push(slot.dims[0]!);
    const result = Promise.resolve<ExecResult>({
      outputs: [{ name: 'Y', datatype: 'INT32', dims: slot.dims, data: b.data.slice(slot.offset, slot.offset + slot.byteLength) }],
      computeInputNs: 0,
      computeInferNs: this.computeNs,
      computeOutputNs: 0,
    });
    return { result, held: false, withdraw: () => false };
  }
}

const request = (): SchedulerRequest => ({
  batchSize: 1,
  inputs: [{ name: 'X', datatype: 'INT32', shape: [1, 1], data: i32([1]) }],
  outputs: ['Y'],
  requestStartNs: process.hrtime.bigint(),
});

describe('the scheduler with a latency budget (fake clock)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('starts with no delay, grows it up to the bound while the instance is busy, and shows it in the metric', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'hrtime', 'performance', 'Date'] });
    // Each execution reports 4 ms of compute: with a request every 5 ms or more, busy ≥ 50% of the time.
    const inst = new InstantInstance(4 * MS);
    const stats = new ModelStats();
    const sched = new Scheduler(
      [inst],
      {
        maxBatchSize: 8,
        dynamic: true,
        preferredBatchSizes: [],
        maxQueueDelayNs: 10_000 * MS, // the configured delay is not used: the budget's bound is
        preserveOrdering: false,
        queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
        latencyBudget: { targetNs: 10 * MS, maxDelayNs: 4 * MS },
      },
      stats,
    );
    expect(stats.adaptiveQueueDelayNs?.()).toBe(0);
    // A lone request goes at once: the delay starts at 0.
    const first = sched.enqueue(request());
    await vi.advanceTimersByTimeAsync(0);
    expect(inst.sizes).toEqual([1]);
    await first;
    // One request every 5 ms, each alone: its latency is the delay, far under the target.
    for (let i = 0; i < 1000; i++) {
      const p = sched.enqueue(request());
      await vi.advanceTimersByTimeAsync(5);
      await p;
    }
    expect(stats.adaptiveQueueDelayNs?.()).toBe(4 * MS);
    // Now a lone request waits out the adaptive delay (4 ms), not the configured 10 s.
    const before = inst.sizes.length;
    const p = sched.enqueue(request());
    await vi.advanceTimersByTimeAsync(3.9);
    expect(inst.sizes.length).toBe(before);
    await vi.advanceTimersByTimeAsync(0.2);
    expect(inst.sizes.length).toBe(before + 1);
    await p;
    const core = { ...fakeCore(), metricsSnapshot: () => [{ model: 'm', version: '1', stats }] };
    const text = await buildRegistry(core).metrics();
    expect(text).toContain('serval_dynamic_batching_queue_delay_us{model="m",version="1"} 4000');
    // Idle for longer than the window: back to no delay.
    await vi.advanceTimersByTimeAsync(DEFAULT_TUNING.windowNs / MS + 1);
    expect(stats.adaptiveQueueDelayNs?.()).toBe(0);
    await sched.drain();
  });

  it('models without a target keep the configured delay and no metric', async () => {
    const stats = new ModelStats();
    new Scheduler(
      [new InstantInstance()],
      {
        maxBatchSize: 8,
        dynamic: true,
        preferredBatchSizes: [],
        maxQueueDelayNs: MS,
        preserveOrdering: false,
        queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
      },
      stats,
    );
    expect(stats.adaptiveQueueDelayNs).toBeUndefined();
    const core = { ...fakeCore(), metricsSnapshot: () => [{ model: 'm', version: '1', stats }] };
    const text = await buildRegistry(core).metrics();
    expect(text).not.toMatch(/serval_dynamic_batching_queue_delay_us\{/);
  });
});
