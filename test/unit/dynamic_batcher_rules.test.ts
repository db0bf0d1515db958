// Triton's dynamic-batcher dispatch rules (core's DynamicBatchScheduler::GetDynamicBatch), one
// test per rule, driving src/scheduler/scheduler.ts with a fake instance and a fake clock (vitest
// fake timers, process.hrtime included): when a batch goes and what is in it. docs/batching.md
// lists the rules with these test names.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ExecResult, Execution } from '../../src/backends/backend.js';
import { UNBOUNDED } from '../../src/config/resolve.js';
import type { BatchingPolicy, InstancePlacement } from '../../src/config/resolved.js';
import { ServalError } from '../../src/kernel/errors.js';
import { type ScheduledOutput, Scheduler, type SchedulerRequest } from '../../src/scheduler/scheduler.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { fromI32, i32 } from '../helpers/tensors.js';

/** Runs batches of X (INT32) into Y = X + 1; executions finish only when released. */
class GatedInstance extends FakeInstanceBase {
  readonly placement: InstancePlacement = { name: 'gated_0', kind: 'KIND_CPU', deviceId: -1 };
  readonly capacity = 1;
  readonly batches: number[][] = [];

  protected run(b: Batch): Execution {
    const slot = b.inputs[0]!;
    const x = fromI32(b.data.subarray(slot.offset, slot.offset + slot.byteLength));
    this.batches.push(x);
    const result = this.hold().then(
      (): ExecResult => ({
        outputs: [{ name: 'Y', datatype: 'INT32', dims: slot.dims, data: i32(x.map((v) => v + 1)) }],
        computeInputNs: 0,
        computeInferNs: 0,
        computeOutputNs: 0,
      }),
    );
    return { result, held: false, withdraw: () => false };
  }
}

let next = 0;
/** A request of `batch` rows of `width` elements with values unique to it. */
function req(batch: number, width = 1, priority?: number): SchedulerRequest & { x: number[] } {
  const x = Array.from({ length: batch * width }, () => ++next);
  return {
    batchSize: batch,
    inputs: [{ name: 'X', datatype: 'INT32', shape: [batch, width], data: i32(x) }],
    outputs: ['Y'],
    requestStartNs: process.hrtime.bigint(),
    priority,
    x,
  };
}

function setup(p: Partial<BatchingPolicy>) {
  const inst = new GatedInstance();
  const sched = new Scheduler(
    [inst],
    {
      maxBatchSize: 8,
      dynamic: true,
      preferredBatchSizes: [],
      maxQueueDelayNs: 0,
      preserveOrdering: false,
      queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
      ...p,
    },
    new ModelStats(),
  );
  /** Sizes of the batches run so far (requests are one element wide unless a test says otherwise). */
  const sizes = (): number[] => inst.batches.map((b) => b.length);
  return { inst, sched, sizes, maxBatchSize: p.maxBatchSize ?? 8 };
}

const SECOND_NS = 1e9;
/** Moves the fake clock (timers and hrtime) on, running what falls due and pending promises. */
const advance = async (ms: number): Promise<void> => {
  await vi.advanceTimersByTimeAsync(ms);
};

/**
 * Occupies the only instance so later requests queue up (a full batch: it goes at once under
 * every rule); returns a function that frees it.
 */
async function occupy(s: ReturnType<typeof setup>): Promise<() => Promise<void>> {
  const p = s.sched.enqueue(req(s.maxBatchSize));
  await advance(0);
  expect(s.inst.batches).toHaveLength(1);
  return async () => {
    s.inst.release();
    await p;
    await advance(0);
  };
}

const values = (rs: { x: number[] }[]): number[] => rs.flatMap((r) => r.x);

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'hrtime', 'performance', 'Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Triton dynamic-batcher dispatch rules (fake clock)', () => {
  it('the fake clock drives process.hrtime.bigint', async () => {
    const t0 = process.hrtime.bigint();
    await advance(1500);
    expect(process.hrtime.bigint() - t0).toBe(1_500_000_000n);
  });

  it('rule preferred: a pending batch of a preferred size goes at once, without waiting out the delay', async () => {
    const s = setup({ preferredBatchSizes: [4], maxQueueDelayNs: 10 * SECOND_NS });
    const a = req(3);
    s.sched.enqueue(a);
    await advance(1000);
    expect(s.inst.batches).toHaveLength(0); // 3 is not preferred: wait
    const b = req(1);
    s.sched.enqueue(b);
    await advance(0);
    expect(s.inst.batches).toEqual([values([a, b])]);
  });

  it('rule largest-preferred: of several preferred sizes reachable in queue order, the last (largest) one goes', async () => {
    const s = setup({ preferredBatchSizes: [2, 4], maxQueueDelayNs: 10 * SECOND_NS });
    const free = await occupy(s);
    const rs = [req(1), req(1), req(1), req(1), req(1)];
    for (const r of rs) s.sched.enqueue(r);
    await free(); // sizes 1, 2*, 3, 4*, then 5 > 4 (the largest preferred): send 4
    expect(s.sizes()).toEqual([8, 4]);
    expect(s.inst.batches[1]).toEqual(values(rs.slice(0, 4)));
  });

  it('rule past-largest-preferred: one request larger than the largest preferred size goes at once (batch 7, preferred [2, 6])', async () => {
    const s = setup({ preferredBatchSizes: [2, 6], maxQueueDelayNs: 10 * SECOND_NS });
    const r = req(7);
    const p = s.sched.enqueue(r);
    await advance(0);
    expect(s.inst.batches).toEqual([r.x]);
    s.inst.release();
    const out = (await p) as ScheduledOutput[];
    expect(fromI32(out[0]!.data)).toEqual(r.x.map((v) => v + 1));
  });

  it('rule no-room-to-grow: when the next request would pass the largest preferred size, the pending batch goes at once', async () => {
    const s = setup({ preferredBatchSizes: [4], maxQueueDelayNs: 10 * SECOND_NS });
    const free = await occupy(s);
    const a = req(3);
    const b = req(2);
    s.sched.enqueue(a);
    s.sched.enqueue(b);
    await free(); // 3 is not preferred, but 3 + 2 passes 4: Triton sends the 3 now
    expect(s.inst.batches[1]).toEqual(a.x);
    s.inst.release();
    await advance(0);
    // b alone: 2 cannot reach 4 without more requests, so it waits for the delay.
    expect(s.inst.batches).toHaveLength(2);
    await advance(10_000);
    expect(s.inst.batches[2]).toEqual(b.x);
  });

  it('rule shape: a request whose shapes differ from the pending batch ends it, and the pending batch goes at once', async () => {
    const s = setup({ preferredBatchSizes: [4], maxQueueDelayNs: 10 * SECOND_NS });
    const free = await occupy(s);
    const a = req(1, 2);
    const b = req(1, 3);
    s.sched.enqueue(a);
    s.sched.enqueue(b);
    await free();
    expect(s.inst.batches[1]).toEqual(a.x); // not held for the 10 s delay
    s.inst.release();
    await advance(0);
    expect(s.inst.batches).toHaveLength(2); // b alone waits for the delay (nothing follows it)
    await advance(10_000);
    expect(s.inst.batches[2]).toEqual(b.x);
  });

  it('rule max-batch-size: a batch never passes max_batch_size; the request that would overflow it starts the next one', async () => {
    const s = setup({ maxBatchSize: 4, preferredBatchSizes: [2], maxQueueDelayNs: 100e6 });
    const free = await occupy(s);
    const rs = [req(1), req(1), req(1), req(1), req(1), req(1)];
    for (const r of rs) s.sched.enqueue(r);
    await advance(200); // the delay of the oldest has passed: everything pending goes, up to 4
    await free();
    expect(s.sizes()).toEqual([4, 4]);
    s.inst.release();
    await advance(0);
    expect(s.sizes()).toEqual([4, 4, 2]); // the rest: 2 is preferred
  });

  it('rule delay: with no preferred size reachable the batch waits exactly max_queue_delay_microseconds for its oldest request', async () => {
    const s = setup({ preferredBatchSizes: [8], maxQueueDelayNs: 500e6 });
    const a = req(1);
    s.sched.enqueue(a);
    await advance(300);
    const b = req(2);
    s.sched.enqueue(b);
    await advance(199);
    expect(s.inst.batches).toHaveLength(0);
    await advance(1); // 500 ms after a arrived, not after b
    expect(s.inst.batches).toEqual([values([a, b])]);
  });

  it('rule delay-passed: once the delay has passed, everything pending goes even beyond a preferred size', async () => {
    const s = setup({ preferredBatchSizes: [2], maxQueueDelayNs: 100e6 });
    const free = await occupy(s);
    const rs = [req(1), req(1), req(1)];
    for (const r of rs) s.sched.enqueue(r);
    await advance(150);
    await free(); // 2 is preferred, but the delay has passed: Triton sends all 3
    expect(s.inst.batches[1]).toEqual(values(rs));
  });

  it('rule no-delay: with max_queue_delay 0 whatever is queued goes at once', async () => {
    const s = setup({ preferredBatchSizes: [4] });
    const free = await occupy(s);
    const rs = [req(1), req(2)];
    for (const r of rs) s.sched.enqueue(r);
    await free();
    expect(s.inst.batches[1]).toEqual(values(rs));
  });

  it('rule default-preferred: without preferred_batch_size, max_batch_size is the preferred size', async () => {
    const s = setup({ maxBatchSize: 4, maxQueueDelayNs: 10 * SECOND_NS });
    const a = req(2);
    s.sched.enqueue(a);
    await advance(1000);
    expect(s.inst.batches).toHaveLength(0);
    const b = req(2);
    s.sched.enqueue(b);
    await advance(0);
    expect(s.inst.batches).toEqual([values([a, b])]);
  });

  it('rule priority: the walk goes level by level, so a later high-priority request leads the batch', async () => {
    const s = setup({ maxBatchSize: 4, queue: { levels: 2, defaultLevel: 2, policies: [UNBOUNDED, UNBOUNDED] } });
    const free = await occupy(s);
    const low1 = req(1, 1, 2);
    const low2 = req(1, 1, 2);
    const high = req(1, 1, 1);
    for (const r of [low1, low2, high]) s.sched.enqueue(r);
    await free();
    expect(s.inst.batches[1]).toEqual(values([high, low1, low2]));
  });

  it('rule full-queue: a request over max_queue_size is refused at once with UNAVAILABLE', async () => {
    const s = setup({ queue: { levels: 1, defaultLevel: 1, policies: [{ ...UNBOUNDED, maxQueueSize: 1 }] } });
    await occupy(s);
    s.sched.enqueue(req(1));
    const err = await s.sched.enqueue(req(1)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServalError);
    expect((err as ServalError).code).toBe('UNAVAILABLE');
    expect((err as ServalError).message).toBe('Exceeds maximum queue size');
  });

  it('rule ragged: inputs with allow_ragged_batch batch together whatever their shapes', async () => {
    const ragged = { raggedInputs: new Set(['X']), batchInputs: [], batchOutputs: [] };
    const s = setup({ preferredBatchSizes: [2], maxQueueDelayNs: 10 * SECOND_NS, ragged });
    const a = req(1, 2);
    const b = req(1, 5);
    s.sched.enqueue(a);
    s.sched.enqueue(b);
    await advance(0);
    expect(s.inst.batches).toEqual([values([a, b])]);
  });
});
