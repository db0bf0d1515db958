import { describe, expect, it } from 'vitest';
import { Cadence } from '../../src/backends/python/cadence.js';

const US = 1000n;

/** Runs executions one after another: each answered `answerUs` after it is sent, the next sent `gapUs` after that answer. */
function run(c: Cadence, n: number, answerUs: bigint, gapUs: bigint, lone = true): { spin: boolean[]; awake: boolean[] } {
  const spin: boolean[] = [];
  const awake: boolean[] = [];
  let t = 1_000_000n;
  for (let i = 0; i < n; i++) {
    awake.push(c.awake(lone));
    spin.push(c.sending(t, lone));
    const sent = t;
    t += answerUs * US;
    c.answered(sent, t);
    t += gapUs * US;
  }
  return { spin, awake };
}

describe('Cadence', () => {
  it('asks the stub to poll while the next execution comes soon after each answer', () => {
    const { spin } = run(new Cadence(300n * US, 400n * US), 20, 50n, 100n);
    expect(spin.every(Boolean)).toBe(true);
  });

  it('stops asking once executions come later than the poll would last (a large answer still on its way out)', () => {
    const c = new Cadence(300n * US, 400n * US);
    const { spin } = run(c, 20, 500n, 1500n);
    // The first has no gap to go by; the moving average passes 400 µs after a couple of gaps.
    expect(spin[0]).toBe(true);
    expect(spin.slice(5).some(Boolean)).toBe(false);
    // And asks again once they come soon again.
    const again = run(c, 20, 50n, 50n).spin;
    expect(again.slice(10).every(Boolean)).toBe(true);
  });

  it('never asks for executions that are not lone (the stub has more to read anyway)', () => {
    const { spin, awake } = run(new Cadence(300n * US, 400n * US), 10, 50n, 50n, false);
    expect(spin.some(Boolean)).toBe(false);
    expect(awake.some(Boolean)).toBe(false);
  });

  it('keeps the loop awake only for models whose answers have lately come within the limit', () => {
    const quick = run(new Cadence(300n * US, 400n * US), 10, 100n, 50n).awake;
    expect(quick.every(Boolean)).toBe(true);
    const slow = run(new Cadence(300n * US, 400n * US), 10, 2000n, 50n).awake;
    expect(slow[0]).toBe(true);
    expect(slow.slice(3).some(Boolean)).toBe(false);
  });
});
