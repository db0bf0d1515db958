// When a side-by-side benchmark set is measured again (tools/bench/disturbance.ts).
import { describe, expect, it } from 'vitest';
import { disturbance, NOISY_CORES, UNEVEN_STEAL } from '../../tools/bench/disturbance.js';

describe('disturbance', () => {
  it('passes sides measured alike, even when both lost the same steal', () => {
    expect(
      disturbance([
        { other: 0.01, steal: 0.15 },
        { other: 0.02, steal: 0.12 },
      ]),
    ).toBe('');
  });

  it("names other load on either side first, with each side's cores", () => {
    const why = disturbance([
      { other: 0.01, steal: 0 },
      { other: NOISY_CORES + 0.05, steal: 0.5 },
    ]);
    expect(why).toBe('other load (0.01, 0.30 cores)');
  });

  it('names steal that differs between the sides by more than the limit', () => {
    expect(
      disturbance([
        { other: 0, steal: 0.02 },
        { other: 0, steal: 0.02 + UNEVEN_STEAL + 0.01 },
      ]),
    ).toBe('uneven steal (0.02, 0.11 cores)');
    expect(
      disturbance([
        { other: 0, steal: 0.02 },
        { other: 0, steal: 0.02 + UNEVEN_STEAL - 0.01 },
      ]),
    ).toBe('');
  });

  it('never calls a lone side uneven', () => {
    expect(disturbance([{ other: 0, steal: 0.4 }])).toBe('');
  });
});
