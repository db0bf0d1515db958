// The per-interval CPU metrics (Triton's nv_cpu_*): sampled on --metrics-interval-ms, not at
// scrape time, so the utilization covers the last interval whoever scrapes and how often.
import os from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { CpuSampler } from '../../src/frontends/metrics/metrics.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('CpuSampler', () => {
  let sampler: CpuSampler | undefined;
  afterEach(() => sampler?.stop());

  it('reports the busy share of the last interval, between 0 and 1, and the machine memory', async () => {
    sampler = new CpuSampler(60_000); // sampled by hand below
    expect(sampler.utilization).toBe(0); // nothing measured yet
    const end = Date.now() + 300;
    while (Date.now() < end); // one core fully busy for 0.3 s
    sampler.sample();
    // At least this thread's core out of all of them, allowing for clock-tick granularity.
    expect(sampler.utilization).toBeGreaterThan(0.5 / os.cpus().length);
    expect(sampler.utilization).toBeLessThanOrEqual(1);
    expect(sampler.memoryTotal).toBe(os.totalmem());
    expect(sampler.memoryUsed).toBeGreaterThan(0);
    expect(sampler.memoryUsed).toBeLessThanOrEqual(sampler.memoryTotal);
  });

  it('samples on its own timer at the given interval', async () => {
    sampler = new CpuSampler(20);
    const s = sampler;
    const seen: number[] = [];
    const take = s.sample.bind(s);
    s.sample = () => {
      take();
      seen.push(s.utilization);
    };
    const end = Date.now() + 150;
    while (Date.now() < end); // the timer cannot run while this spins
    expect(seen).toEqual([]);
    await sleep(100);
    // The first sample covers the busy stretch; later ones the quieter time after it.
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen[0]).toBeGreaterThan(0);
  });
});
