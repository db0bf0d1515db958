// The event loop kept turning while one quick answer is awaited (src/kernel/awake.ts).
import { describe, expect, it } from 'vitest';
import { awaitAnswer, keptAwake } from '../../src/kernel/awake.js';

const turnOnce = (): Promise<void> => new Promise((r) => setImmediate(r));
const MS = 1_000_000n;

describe('awaitAnswer', () => {
  it('keeps the loop turning while the one answer awaited has not come, and stops when it comes', async () => {
    const answered = awaitAnswer(true, 10_000n * MS);
    expect(keptAwake()).toBe(true);
    await turnOnce();
    await turnOnce();
    expect(keptAwake()).toBe(true);
    answered();
    await turnOnce();
    await turnOnce();
    expect(keptAwake()).toBe(false);
    // Once: a second call does not count another answer.
    answered();
    const next = awaitAnswer(true, 10_000n * MS);
    expect(keptAwake()).toBe(true);
    next();
    await turnOnce();
    await turnOnce();
    expect(keptAwake()).toBe(false);
  });

  it('stops after its time even without the answer', async () => {
    const answered = awaitAnswer(true, 20n * MS);
    expect(keptAwake()).toBe(true);
    await new Promise((r) => setTimeout(r, 60));
    expect(keptAwake()).toBe(false);
    answered();
  });

  it('lets the loop sleep when asked not to spin, or when two answers are awaited', async () => {
    const slow = awaitAnswer(false, 10_000n * MS);
    expect(keptAwake()).toBe(false);
    const quick = awaitAnswer(true, 10_000n * MS);
    expect(keptAwake()).toBe(false);
    slow();
    quick();
    const first = awaitAnswer(true, 10_000n * MS);
    const second = awaitAnswer(true, 10_000n * MS);
    await turnOnce();
    await turnOnce();
    expect(keptAwake()).toBe(false);
    first();
    second();
  });
});
