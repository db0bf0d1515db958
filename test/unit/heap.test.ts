// The heap growing factor the CLI sets (kernel/heap.ts): only when the process was not given
// its own. What it does to collections is measured by the triton bench (docs/benchmarks.md), not here.
import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_PERCENT, tuneHeapGrowth } from '../../src/kernel/heap.js';

describe('heap growth tuning', () => {
  it('leaves a growing factor the process was started with alone', () => {
    expect(tuneHeapGrowth(['--heap-growing-percent=50'], '')).toBeUndefined();
    expect(tuneHeapGrowth([], '--max-old-space-size=512 --heap_growing_percent=50')).toBeUndefined();
  });

  it('sets its own factor otherwise', () => {
    expect(tuneHeapGrowth(['--enable-source-maps'], '--max-old-space-size=512')).toBe(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  });
});
