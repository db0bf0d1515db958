// The pure logic of the latency-budget benchmark (tools/bench/latency_search.ts): reading a
// perf_analyzer request-rate report, the rate bisection and the goal.
import { describe, expect, it } from 'vitest';
import { evaluateGoal, meetsTarget, parseRateReport, RateSearch } from '../../tools/bench/latency_search.js';

const REPORT = `*** Measurement Settings ***
  Request Rate limit: 250 requests per seconds
  Using poisson distribution on request generation

Request Rate: 250 inference requests per seconds
  Client: 
    Request count: 857
    Throughput: 237.737 infer/sec
    Avg latency: 4300 usec (standard deviation 1630 usec)
    p50 latency: 4128 usec
    p90 latency: 6467 usec
    p95 latency: 7064 usec
    p99 latency: 7942 usec
    Avg gRPC time: 4293 usec ((un)marshal request/response 9 usec + response wait 4284 usec)
  Server: 
    Inference count: 857
    Execution count: 499
    Successful request count: 857
    Avg request latency: 3353 usec (overhead 145 usec + queue 2266 usec + compute input 19 usec + compute infer 907 usec + compute output 14 usec)

Inferences/Second vs. Client Average Batch Latency
Request Rate: 250, throughput: 237.737 infer/sec, latency 4300 usec
`;

describe('parseRateReport', () => {
  it('reads the client and server sections of a request-rate report, not its closing summary line', () => {
    expect(parseRateReport(REPORT)).toMatchObject({
      throughput: 237.737,
      p50Us: 4128,
      p99Us: 7942,
      inferenceCount: 857,
      executionCount: 499,
      queueUs: 2266,
      computeInferUs: 907,
    });
  });

  it('gives nothing for output without a report', () => {
    expect(parseRateReport('error: failed to connect\n')).toBeUndefined();
  });
});

describe('meetsTarget', () => {
  it('needs a report, p99 within the target and the offered rate kept up with', () => {
    expect(meetsTarget({ rate: 1000, throughput: 980, p99Us: 9000 }, 10_000)).toBe(true);
    expect(meetsTarget({ rate: 1000, throughput: 980, p99Us: 10_001 }, 10_000)).toBe(false);
    expect(meetsTarget({ rate: 1000, throughput: 700, p99Us: 9000 }, 10_000)).toBe(false);
    expect(meetsTarget({ rate: 1000 }, 10_000)).toBe(false);
  });
});

/** A server that meets the target up to `capacity` requests/s. */
const fakeRun = (capacity: number) => (rate: number) => ({
  rate,
  throughput: Math.min(rate, capacity),
  p99Us: rate <= capacity ? 5000 : 50_000,
});

describe('RateSearch (log bisection)', () => {
  it('brackets the highest rate within the target, to the resolution its steps allow', () => {
    for (const capacity of [300, 1234, 4000, 7900]) {
      const s = new RateSearch(250, 8000, 10_000);
      const run = fakeRun(capacity);
      for (let i = 0; i < 6; i++) s.record(run(s.next()));
      const [lo, hi] = s.bracket;
      expect(lo).toBeLessThanOrEqual(capacity);
      expect(hi).toBeGreaterThan(capacity);
      // 6 halvings of log(32): within a factor 32^(1/64) (plus rounding to whole rates).
      expect(s.resolution).toBeLessThan(32 ** (1 / 64) + 0.01);
      if (s.best !== undefined) expect(s.best).toBe(lo);
    }
  });

  it('measures geometric midpoints and moves the side the result rules out', () => {
    const s = new RateSearch(250, 8000, 10_000);
    expect(s.next()).toBe(1414);
    s.record({ rate: 1414, throughput: 1400, p99Us: 20_000 });
    expect(s.bracket).toEqual([250, 1414]);
    expect(s.best).toBeUndefined();
    expect(s.next()).toBe(595);
    s.record({ rate: 595, throughput: 590, p99Us: 4000 });
    expect(s.bracket).toEqual([595, 1414]);
    expect(s.best).toBe(595);
  });

  it('refuses an empty range', () => {
    expect(() => new RateSearch(100, 100, 1)).toThrow(/0 < lo < hi/);
  });
});

describe('evaluateGoal', () => {
  const fixed = [
    { name: 'd0', best: 3000, resolution: 1.05 },
    { name: 'd500', best: 4000, resolution: 1.05 },
    { name: 'd5000', best: undefined, resolution: 2 },
  ];

  it('compares against the best fixed delay and allows the search resolution as noise', () => {
    const met = evaluateGoal({ name: 'p99', best: 3850, resolution: 1.05 }, fixed);
    expect(met.bestFixed?.name).toBe('d500');
    expect(met.ratio).toBeCloseTo(3850 / 4000);
    expect(met.threshold).toBeCloseTo(0.95 / 1, 5); // min(0.95, 1/1.05 = 0.952)
    expect(met.met).toBe(true);
    const missed = evaluateGoal({ name: 'p99', best: 3700, resolution: 1.05 }, fixed);
    expect(missed.met).toBe(false);
    // A coarse search (quick run) tolerates more.
    const coarse = evaluateGoal({ name: 'p99', best: 3000, resolution: 1.54 }, fixed);
    expect(coarse.threshold).toBeCloseTo(1 / 1.54);
    expect(coarse.met).toBe(true);
  });

  it('repeated runs at the best fixed rate can show a lower bisection result was noise', () => {
    const low = { name: 'p99', best: 3000, resolution: 1.05 };
    expect(evaluateGoal(low, fixed).met).toBe(false);
    const same = evaluateGoal(low, fixed, { runs: 2, fixedMet: 1, adaptiveMet: 1 });
    expect(same).toMatchObject({ met: true, byConfirmation: true });
    expect(evaluateGoal(low, fixed, { runs: 2, fixedMet: 2, adaptiveMet: 1 }).met).toBe(false);
    // Never met by confirmation alone when the adaptive batcher missed the target every time.
    expect(evaluateGoal(low, fixed, { runs: 2, fixedMet: 0, adaptiveMet: 0 }).met).toBe(false);
    // A ratio that meets the threshold does not need the repeated runs.
    expect(evaluateGoal({ name: 'p99', best: 4000, resolution: 1.05 }, fixed, { runs: 2, fixedMet: 2, adaptiveMet: 0 })).toMatchObject({
      met: true,
      byConfirmation: false,
    });
  });

  it('an adaptive batcher that never met the target misses; with no fixed delay meeting it, any success is met', () => {
    expect(evaluateGoal({ name: 'p99', best: undefined, resolution: 1.05 }, fixed).met).toBe(false);
    const none = [{ name: 'd0', best: undefined, resolution: 2 }];
    expect(evaluateGoal({ name: 'p99', best: 500, resolution: 2 }, none).met).toBe(true);
    expect(evaluateGoal({ name: 'p99', best: undefined, resolution: 2 }, none).met).toBe(false);
  });
});
