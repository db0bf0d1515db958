// src/scheduler/scheduler.ts with fake model instances: Triton's default scheduler, the dynamic
// batcher (max_batch_size, preferred sizes, queue delay, shape compatibility), scatter of the
// results, cancellation, failures and statistics.
import { afterEach, describe, expect, it } from 'vitest';
import type { ExecOutput, ExecResult, Execution as InstanceExecution } from '../../src/backends/backend.js';
import { UNBOUNDED } from '../../src/config/resolve.js';
import type { BatchingPolicy, InstancePlacement, QueuePolicy } from '../../src/config/resolved.js';
import type { ModelConfig } from '../../src/config/types.js';
import { Cancellation } from '../../src/kernel/cancel.js';
import { joinBytes } from '../../src/kernel/datatypes.js';
import { ServalError } from '../../src/kernel/errors.js';
import { assemble, type ScheduledOutput, Scheduler, type SchedulerRequest, scatter } from '../../src/scheduler/scheduler.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { expectServalErrorAsync } from '../helpers/errors.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { resolveForTest } from '../helpers/resolve.js';
import { fromI32, i32, stringsOf } from '../helpers/tensors.js';

// ---------------------------------------------------------------------------------------------
// A fake instance of a model with input X (INT32 [batch, ...]) and outputs
//   Y = 2 * X (INT32, same shape)      S = String(X) per element (BYTES, same shape)

interface Execution {
  instance: string;
  dims: number[];
  x: number[];
  outputs: string[];
}

class FakeInstance extends FakeInstanceBase {
  readonly placement: InstancePlacement;
  readonly capacity = 1;
  manual = false;
  fail: Error | undefined;

  constructor(
    name: string,
    private readonly log: Execution[],
  ) {
    super();
    this.placement = { name, kind: 'KIND_CPU', deviceId: -1 };
  }

  protected run(req: Batch): InstanceExecution {
    return { result: this.compute(req), held: false, withdraw: () => false };
  }

  private async compute(req: Batch): Promise<ExecResult> {
    const slot = req.inputs[0]!;
    const x = fromI32(req.data.subarray(slot.offset, slot.offset + slot.byteLength));
    this.log.push({ instance: this.placement.name, dims: slot.dims, x, outputs: [...req.outputs] });
    if (this.manual) await this.hold();
    else await Promise.resolve();
    if (this.fail) throw this.fail;
    const outputs: ExecOutput[] = [];
    for (const name of req.outputs) {
      if (name === 'Y') {
        outputs.push({ name, datatype: 'INT32', dims: slot.dims, data: i32(x.map((v) => 2 * v)) });
      } else {
        outputs.push({ name, datatype: 'BYTES', dims: slot.dims, data: joinBytes(x.map(String)) });
      }
    }
    return { outputs, computeInputNs: 10, computeInferNs: 1000, computeOutputNs: 20 };
  }
}

let nextValue = 1;
/** A request with unique values: `batch` rows of `width` elements (batch 0 = no batching). */
function req(
  batch: number,
  width = 2,
  opts: { outputs?: string[]; cancellation?: Cancellation; priority?: number; timeoutUs?: number } = {},
): SchedulerRequest & { x: number[] } {
  const rows = Math.max(batch, 1);
  const x = Array.from({ length: rows * width }, () => nextValue++);
  return {
    batchSize: batch,
    inputs: [{ name: 'X', datatype: 'INT32', shape: batch ? [batch, width] : [width], data: i32(x) }],
    outputs: opts.outputs ?? ['Y', 'S'],
    requestStartNs: process.hrtime.bigint(),
    cancellation: opts.cancellation,
    priority: opts.priority,
    timeoutUs: opts.timeoutUs,
    x,
  };
}

function setup(policy: Partial<BatchingPolicy>, instances = 1, manual = false) {
  const log: Execution[] = [];
  const inst = Array.from({ length: instances }, (_, i) => {
    const f = new FakeInstance(`fake_${i}`, log);
    f.manual = manual;
    return f;
  });
  const stats = new ModelStats();
  const sched = new Scheduler(
    inst,
    {
      maxBatchSize: 8,
      dynamic: false,
      preferredBatchSizes: [],
      maxQueueDelayNs: 0,
      preserveOrdering: false,
      queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
      ...policy,
    },
    stats,
  );
  return { log, inst, stats, sched };
}

/** Every request got exactly its own rows: Y = 2x and S = String(x). */
function expectOwnResult(r: ReturnType<typeof req>, out: ScheduledOutput[], width = 2): void {
  const byName = Object.fromEntries(out.map((o) => [o.name, o]));
  if (r.outputs.includes('Y')) {
    expect(byName.Y!.shape).toEqual(r.batchSize ? [r.batchSize, width] : [width]);
    expect(fromI32(byName.Y!.data)).toEqual(r.x.map((v) => 2 * v));
  }
  if (r.outputs.includes('S')) {
    expect(byName.S!.datatype).toBe('BYTES');
    expect(stringsOf(byName.S!.data)).toEqual(r.x.map(String));
  }
  expect(out.map((o) => o.name).sort()).toEqual([...r.outputs].sort());
}

/** expectOwnResult for every request, in order; `width(r)` is the row width of request r. */
function expectOwnResults(
  rs: ReturnType<typeof req>[],
  outs: ScheduledOutput[][],
  width: (r: ReturnType<typeof req>) => number = () => 2,
): void {
  expect(outs).toHaveLength(rs.length);
  for (const [i, r] of rs.entries()) expectOwnResult(r, outs[i]!, width(r));
}

const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

afterEach(() => {
  nextValue = 1;
});

// ---------------------------------------------------------------------------------------------

describe('default scheduler (no dynamic batching)', () => {
  it('runs each request alone, at most one per free instance', async () => {
    const { log, inst, sched } = setup({}, 2, true);
    const rs = [req(1), req(2), req(1), req(3), req(1)];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick();
    expect(log).toHaveLength(2);
    expect(inst.map((i) => i.held)).toEqual([1, 1]);
    inst[0]!.release();
    await tick();
    expect(log).toHaveLength(3);
    // Drain everything.
    while (log.length < 5 || inst.some((i) => i.held)) {
      for (const i of inst) i.release();
      await tick();
    }
    const outs = await Promise.all(ps);
    expectOwnResults(rs, outs);
    // Every execution held exactly one request's rows, in arrival order.
    expect(log.map((e) => e.x)).toEqual(rs.map((r) => r.x));
    expect(log.map((e) => e.dims[0])).toEqual([1, 2, 1, 3, 1]);
  });

  it('with dynamic batching off, queued requests are never merged', async () => {
    const { log, inst, sched } = setup({ dynamic: false }, 1, true);
    const rs = [req(1), req(1), req(1)];
    const ps = rs.map((r) => sched.enqueue(r));
    for (let k = 0; k < 3; k++) {
      await tick();
      inst[0]!.release();
    }
    await Promise.all(ps);
    expect(log.map((e) => e.dims[0])).toEqual([1, 1, 1]);
  });

  it('a model without batching (batch size 0) keeps its shapes', async () => {
    const { sched, log } = setup({ maxBatchSize: 0 });
    const r = req(0, 5);
    expectOwnResult(r, await sched.enqueue(r), 5);
    expect(log[0]!.dims).toEqual([5]);
  });
});

describe('dynamic batching', () => {
  it('merges requests queued behind a busy instance, up to max_batch_size, in arrival order', async () => {
    const { log, inst, sched } = setup({ dynamic: true, maxBatchSize: 8 }, 1, true);
    const first = req(1);
    const p1 = sched.enqueue(first);
    await tick();
    expect(log).toHaveLength(1); // starts at once: the instance was idle and the delay is 0
    const rs = [req(2), req(3), req(4), req(1)];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick();
    expect(log).toHaveLength(1);
    inst[0]!.release(); // first done → the queue [2,3,4,1] becomes [2,3] (5; +4 would exceed 8)
    await tick();
    expect(log).toHaveLength(2);
    expect(log[1]!.dims).toEqual([5, 2]);
    expect(log[1]!.x).toEqual([...rs[0]!.x, ...rs[1]!.x]);
    inst[0]!.release(); // → [4, 1] = 5
    await tick();
    expect(log[2]!.dims).toEqual([5, 2]);
    expect(log[2]!.x).toEqual([...rs[2]!.x, ...rs[3]!.x]);
    inst[0]!.release();
    expectOwnResult(first, await p1);
    expectOwnResults(rs, await Promise.all(ps));
  });

  it('fills a batch exactly to max_batch_size', async () => {
    const { log, inst, sched } = setup({ dynamic: true, maxBatchSize: 4 }, 1, true);
    const blocker = sched.enqueue(req(1));
    await tick();
    const rs = [req(1), req(1), req(1), req(1), req(1)];
    const ps = rs.map((r) => sched.enqueue(r));
    inst[0]!.release();
    await tick();
    expect(log[1]!.dims[0]).toBe(4);
    inst[0]!.release();
    await tick();
    expect(log[2]!.dims[0]).toBe(1);
    inst[0]!.release();
    await blocker;
    expectOwnResults(rs, await Promise.all(ps));
  });

  it('waits up to max_queue_delay for more requests, then runs what it has', async () => {
    const { log, sched } = setup({ dynamic: true, maxBatchSize: 8, maxQueueDelayNs: 150e6 });
    const t0 = performance.now();
    const rs = [req(1), req(2)];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick(60);
    expect(log).toHaveLength(0);
    const outs = await Promise.all(ps);
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(waited).toBeLessThan(1000);
    expect(log).toHaveLength(1);
    expect(log[0]!.dims).toEqual([3, 2]);
    expectOwnResults(rs, outs);
  });

  it('goes at once when a preferred batch size is reached, without waiting for the delay', async () => {
    const { log, sched } = setup({ dynamic: true, maxBatchSize: 8, preferredBatchSizes: [4], maxQueueDelayNs: 10e9 });
    const rs = [req(1), req(2)];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick(30);
    expect(log).toHaveLength(0); // 3 is not preferred: keep waiting
    const last = req(1);
    const t0 = performance.now();
    const pl = sched.enqueue(last);
    const outs = await Promise.all([...ps, pl]);
    expect(performance.now() - t0).toBeLessThan(500);
    expect(log).toHaveLength(1);
    expect(log[0]!.dims[0]).toBe(4);
    expectOwnResults([...rs, last], outs);
  });

  it('picks the largest preferred size reachable with whole requests', async () => {
    const { log, inst, sched } = setup({ dynamic: true, maxBatchSize: 8, preferredBatchSizes: [2, 4, 6], maxQueueDelayNs: 10e9 }, 1, true);
    const blocker = req(2); // 2 is preferred: runs at once
    const pb = sched.enqueue(blocker);
    await tick();
    expect(log[0]!.dims[0]).toBe(2);
    const rs = [req(1), req(1), req(3), req(2)]; // prefix sums 1,2,5,7: 2 is the only preferred one
    const ps = rs.map((r) => sched.enqueue(r));
    inst[0]!.release();
    await tick();
    expect(log[1]!.dims[0]).toBe(2);
    expect(log[1]!.x).toEqual([...rs[0]!.x, ...rs[1]!.x]);
    inst[0]!.release(); // then [3, 2]: sums 3, 5 — none preferred, wait for the delay…
    await tick(20);
    expect(log).toHaveLength(2);
    const extra = req(1); // …until 3+2+1 = 6 is preferred
    const pe = sched.enqueue(extra);
    await tick();
    expect(log[2]!.dims[0]).toBe(6);
    inst[0]!.release();
    await pb;
    expectOwnResults([...rs, extra], await Promise.all([...ps, pe]));
  });

  it('never merges requests whose non-batch shapes differ: a batch ends at the first one that differs', async () => {
    const { log, inst, sched } = setup({ dynamic: true, maxBatchSize: 8 }, 1, true);
    const blocker = sched.enqueue(req(1, 3));
    await tick();
    // Triton walks the queue in order and stops at a shape change (no skipping ahead).
    const rs = [req(1, 3), req(1, 3), req(2, 5), req(1, 3), req(1, 5)];
    const ps = rs.map((r) => sched.enqueue(r));
    for (let k = 0; k < 5; k++) {
      inst[0]!.release();
      await tick();
    }
    inst[0]!.release();
    await blocker;
    const outs = await Promise.all(ps);
    expectOwnResults(rs, outs, (r) => r.inputs[0]!.shape[1]!);
    const widths = log.slice(1).map((e) => [e.dims[0], e.dims[1]]);
    expect(widths).toEqual([
      [2, 3],
      [2, 5],
      [1, 3],
      [1, 5],
    ]);
    for (const e of log) expect(e.x.length).toBe(e.dims[0]! * e.dims[1]!);
  });

  it('scatter gives each request its own BYTES rows even with variable-length strings', async () => {
    const { inst, sched } = setup({ dynamic: true, maxBatchSize: 8 }, 1, true);
    const blocker = sched.enqueue(req(1));
    await tick();
    nextValue = 7; // values 7..: mixed string lengths ("7", "10", "100", …)
    const rs = [req(1, 3), req(2, 3), req(3, 3)];
    for (let i = 0; i < rs[2]!.x.length; i++) rs[2]!.x[i] = 10 ** i;
    rs[2]!.inputs[0]!.data = i32(rs[2]!.x);
    const ps = rs.map((r) => sched.enqueue(r));
    inst[0]!.release();
    await tick();
    inst[0]!.release();
    await blocker;
    expectOwnResults(rs, await Promise.all(ps), () => 3);
  });

  it('each request gets only the outputs it asked for, even in a shared batch', async () => {
    const { log, inst, sched } = setup({ dynamic: true, maxBatchSize: 8 }, 1, true);
    const blocker = sched.enqueue(req(1));
    await tick();
    const a = req(1, 2, { outputs: ['Y'] });
    const b = req(1, 2, { outputs: ['S'] });
    const ps = [sched.enqueue(a), sched.enqueue(b)];
    inst[0]!.release();
    await tick();
    inst[0]!.release();
    await blocker;
    expect(log[1]!.outputs.sort()).toEqual(['S', 'Y']);
    const [oa, ob] = await Promise.all(ps);
    expectOwnResult(a, oa!);
    expectOwnResult(b, ob!);
  });

  it('uses every instance: two instances run two batches at once', async () => {
    const { log, inst, sched } = setup({ dynamic: true, maxBatchSize: 4 }, 2, true);
    const ps = [req(1), req(1)].map((r) => sched.enqueue(r));
    await tick();
    expect(log.map((e) => e.instance).sort()).toEqual(['fake_0', 'fake_1']);
    for (const i of inst) i.release();
    await Promise.all(ps);
  });
});

describe('cancellation', () => {
  it('a cancelled queued request is dropped: rejected with CANCELLED and never executed', async () => {
    const { log, inst, sched, stats } = setup({ dynamic: true, maxBatchSize: 8 }, 1, true);
    const running = req(1);
    const p1 = sched.enqueue(running);
    await tick();
    const ac = new Cancellation();
    const victim = req(2, 2, { cancellation: ac });
    const keeper = req(1);
    const pv = sched.enqueue(victim);
    const pk = sched.enqueue(keeper);
    expect(stats.pending).toBe(3);
    ac.cancel();
    await expectServalErrorAsync(pv, 'CANCELLED');
    expect(stats.pending).toBe(2);
    inst[0]!.release();
    await tick();
    inst[0]!.release();
    expectOwnResult(running, await p1);
    expectOwnResult(keeper, await pk);
    expect(log.flatMap((e) => e.x)).toEqual([...running.x, ...keeper.x]);
    expect(stats.failuresByReason.get('CANCELED')).toBe(1);
    expect(stats.fail.count).toBe(1);
    expect(stats.pending).toBe(0);
  });

  it('a request already cancelled is refused at once', async () => {
    const { log, sched } = setup({});
    const ac = new Cancellation();
    ac.cancel();
    await expect(sched.enqueue(req(1, 2, { cancellation: ac }))).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(log).toHaveLength(0);
  });

  it('cancelling a request that is already executing does not disturb it', async () => {
    const { inst, sched } = setup({}, 1, true);
    const ac = new Cancellation();
    const r = req(1, 2, { cancellation: ac });
    const p = sched.enqueue(r);
    await tick();
    ac.cancel();
    inst[0]!.release();
    expectOwnResult(r, await p);
  });
});

describe('failures and shutdown', () => {
  it('an execution failure rejects every request of the batch and the next batch still runs', async () => {
    const { inst, sched, stats } = setup({ dynamic: true, maxBatchSize: 8 }, 1, true);
    const blocker = expectServalErrorAsync(sched.enqueue(req(1)), 'INTERNAL');
    await tick();
    const ps = [req(1), req(2)].map((r) => expectServalErrorAsync(sched.enqueue(r), 'INTERNAL'));
    inst[0]!.fail = new ServalError('INTERNAL', 'boom');
    inst[0]!.release(); // the blocker fails
    await tick();
    inst[0]!.release(); // the batch of two fails
    for (const e of await Promise.all([blocker, ...ps])) expect(e.message).toBe('boom');
    expect(stats.failuresByReason.get('BACKEND')).toBe(3);
    inst[0]!.fail = undefined;
    inst[0]!.manual = false;
    const ok = req(1);
    expectOwnResult(ok, await sched.enqueue(ok));
    expect(stats.pending).toBe(0);
  });

  it('drain waits for queued and running requests, then refuses new ones', async () => {
    const { inst, sched } = setup({ dynamic: true, maxBatchSize: 2 }, 1, true);
    const rs = [req(1), req(2), req(1)];
    const ps = rs.map((r) => sched.enqueue(r));
    let drained = false;
    const d = sched.drain().then(() => (drained = true));
    for (let k = 0; k < 3; k++) {
      await tick();
      expect(drained).toBe(false);
      inst[0]!.release();
    }
    await d;
    expectOwnResults(rs, await Promise.all(ps));
    await expect(sched.enqueue(req(1))).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });
});

describe('statistics', () => {
  it('inference_count counts batch items, execution_count executions, batch stats per executed size', async () => {
    const { inst, sched, stats } = setup({ dynamic: true, maxBatchSize: 8 }, 1, true);
    const p0 = sched.enqueue(req(1)); // alone: size 1
    await tick();
    const ps = [req(2), req(3), req(4), req(1)].map((r) => sched.enqueue(r)); // batches 2+3 and 4+1
    for (let k = 0; k < 3; k++) {
      inst[0]!.release();
      await tick();
    }
    await Promise.all([p0, ...ps]);
    expect(stats.inferenceCount).toBe(1 + 2 + 3 + 4 + 1);
    expect(stats.executionCount).toBe(3);
    expect(stats.success.count).toBe(5);
    expect(stats.queue.count).toBe(5);
    expect(stats.computeInfer.count).toBe(5);
    expect(stats.computeInfer.ns).toBe(5 * 1000);
    expect([...stats.batches.values()].map((b) => [b.batch_size, b.compute_infer.count]).sort((a, b) => a[0]! - b[0]!)).toEqual([
      [1, 1],
      [5, 2],
    ]);
    const rows = [...stats.batches.values()].reduce((s, b) => s + b.batch_size * b.compute_infer.count, 0);
    expect(rows).toBe(stats.inferenceCount);
    expect(stats.pending).toBe(0);
    expect(stats.fail.count).toBe(0);
  });

  it('a model without batching counts each request as 1 inference of batch size 1', async () => {
    const { sched, stats } = setup({ maxBatchSize: 0 });
    await Promise.all([req(0, 3), req(0, 3), req(0, 3)].map((r) => sched.enqueue(r)));
    expect(stats.inferenceCount).toBe(3);
    expect(stats.executionCount).toBe(3);
    expect([...stats.batches.keys()]).toEqual([1]);
  });
});

describe('assemble and scatter', () => {
  it('assemble copies each input of every request into one buffer, 64-byte aligned per input', () => {
    const mk = (x: number[], y: number[]): SchedulerRequest => ({
      batchSize: 1,
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [1, x.length], data: i32(x) },
        { name: 'B', datatype: 'INT32', shape: [1, y.length], data: i32(y) },
      ],
      outputs: ['O'],
      requestStartNs: 0n,
    });
    const e = assemble([mk([1, 2, 3], [7]), mk([4, 5, 6], [8])], 2);
    expect(e.outputs).toEqual(['O']);
    const [a, b] = e.inputs;
    expect(a).toMatchObject({ name: 'A', dims: [2, 3], offset: 0, byteLength: 24 });
    expect(b).toMatchObject({ name: 'B', dims: [2, 1], byteLength: 8 });
    expect(b!.offset % 64).toBe(0);
    expect(b!.offset).toBeGreaterThanOrEqual(24);
    expect(fromI32(e.data.subarray(a!.offset, a!.offset + 24))).toEqual([1, 2, 3, 4, 5, 6]);
    expect(fromI32(e.data.subarray(b!.offset, b!.offset + 8))).toEqual([7, 8]);
  });

  it('scatter splits numeric and BYTES outputs by batch sizes', () => {
    const y = i32([1, 2, 3, 4, 5, 6]);
    const s = joinBytes(['a', 'bb', '', 'dddd', 'e', 'ff']);
    const per = scatter(
      {
        outputs: [
          { name: 'Y', datatype: 'INT32', dims: [3, 2], data: y },
          { name: 'S', datatype: 'BYTES', dims: [3, 2], data: s },
        ],
        computeInputNs: 0,
        computeInferNs: 0,
        computeOutputNs: 0,
      },
      [1, 2],
      true,
    );
    expect(per[0]!.map((o) => o.shape)).toEqual([
      [1, 2],
      [1, 2],
    ]);
    expect(fromI32(per[0]![0]!.data)).toEqual([1, 2]);
    expect(fromI32(per[1]![0]!.data)).toEqual([3, 4, 5, 6]);
    expect(stringsOf(per[0]![1]!.data)).toEqual(['a', 'bb']);
    expect(stringsOf(per[1]![1]!.data)).toEqual(['', 'dddd', 'e', 'ff']);
  });

  it('scatter refuses an output whose batch dimension does not match the batch', () => {
    expect(() =>
      scatter(
        {
          outputs: [{ name: 'Y', datatype: 'INT32', dims: [2, 1], data: i32([1, 2]) }],
          computeInputNs: 0,
          computeInferNs: 0,
          computeOutputNs: 0,
        },
        [1, 2],
        true,
      ),
    ).toThrow("output 'Y' has batch dimension 2 but the batch held 3 items");
  });
});

// ---------------------------------------------------------------------------------------------

const policy = (p: Partial<QueuePolicy> = {}): QueuePolicy => ({ ...UNBOUNDED, ...p });

describe('queue policy, priorities and ordering (dynamic batcher)', () => {
  it('serves the highest priority level first, and the default level for priority 0 or out of range', async () => {
    const { log, inst, sched } = setup(
      { dynamic: true, maxBatchSize: 1, queue: { levels: 3, defaultLevel: 2, policies: [policy(), policy(), policy()] } },
      1,
      true,
    );
    const first = req(1, 2);
    const low = req(1, 2, { priority: 3 });
    const dflt = req(1, 2, { priority: 0 });
    const outOfRange = req(1, 2, { priority: 9 });
    const high = req(1, 2, { priority: 1 });
    const all = [first, low, dflt, outOfRange, high].map((r) => sched.enqueue(r));
    await tick();
    for (let i = 0; i < 5; i++) {
      inst[0]!.release();
      await tick();
    }
    await Promise.all(all);
    expect(log.map((e) => e.x)).toEqual([first.x, high.x, dflt.x, outOfRange.x, low.x]);
  });

  it('a full queue rejects at once with UNAVAILABLE "Exceeds maximum queue size", counted as REJECTED', async () => {
    const { inst, sched, stats } = setup(
      { dynamic: true, maxBatchSize: 1, queue: { levels: 1, defaultLevel: 1, policies: [policy({ maxQueueSize: 2 })] } },
      1,
      true,
    );
    // Each request says when it was taken in (InferRequest.admitted); a refused one never is.
    const admitted: number[] = [];
    const numbered = (n: number) => ({ ...req(1), admitted: () => admitted.push(n) });
    const running = sched.enqueue(numbered(1));
    await tick();
    const queued = [sched.enqueue(numbered(2)), sched.enqueue(numbered(3))];
    const rejected = await expectServalErrorAsync(sched.enqueue(numbered(4)), 'UNAVAILABLE');
    expect(rejected.message).toBe('Exceeds maximum queue size');
    expect(admitted).toEqual([1, 2, 3]);
    expect(stats.failuresByReason.get('REJECTED')).toBe(1);
    for (let i = 0; i < 3; i++) {
      inst[0]!.release();
      await tick();
    }
    await Promise.all([running, ...queued]);
    expect(stats.success.count).toBe(3);
  });

  it('REJECT: a request still queued after its timeout fails with "Request timeout expired" and never runs', async () => {
    const { log, inst, sched, stats } = setup(
      { dynamic: true, maxBatchSize: 1, queue: { levels: 1, defaultLevel: 1, policies: [policy({ defaultTimeoutUs: 20_000 })] } },
      1,
      true,
    );
    const running = sched.enqueue(req(1));
    await tick();
    const late = req(1);
    const p = expectServalErrorAsync(sched.enqueue(late), 'UNAVAILABLE');
    await tick(60);
    expect((await p).message).toBe('Request timeout expired');
    inst[0]!.release();
    await running;
    expect(log.some((e) => e.x.join() === late.x.join())).toBe(false);
    expect(stats.pending).toBe(0);
  });

  it('DELAY: a timed-out request goes behind those that have not timed out', async () => {
    const { log, inst, sched } = setup(
      {
        dynamic: true,
        maxBatchSize: 1,
        queue: {
          levels: 1,
          defaultLevel: 1,
          policies: [policy({ defaultTimeoutUs: 100_000, allowTimeoutOverride: true, timeoutAction: 'DELAY' })],
        },
      },
      1,
      true,
    );
    const running = sched.enqueue(req(1));
    await tick();
    const delayed = req(1, 2, { timeoutUs: 10_000 });
    const pd = sched.enqueue(delayed);
    await tick(40); // `delayed` has timed out
    const fresh = req(1);
    const pf = sched.enqueue(fresh);
    for (let i = 0; i < 3; i++) {
      inst[0]!.release();
      await tick();
    }
    await Promise.all([running, pd, pf]);
    expect(log.slice(1).map((e) => e.x)).toEqual([fresh.x, delayed.x]);
  });

  it('a request timeout applies only with allow_timeout_override, and never lengthens the default', async () => {
    const { effectiveTimeout } = await import('../../src/scheduler/queue.js');
    expect(effectiveTimeout(policy({ defaultTimeoutUs: 500 }), 100)).toBe(500);
    expect(effectiveTimeout(policy({ defaultTimeoutUs: 500, allowTimeoutOverride: true }), 100)).toBe(100);
    expect(effectiveTimeout(policy({ defaultTimeoutUs: 500, allowTimeoutOverride: true }), 900)).toBe(500);
    expect(effectiveTimeout(policy({ allowTimeoutOverride: true }), 900)).toBe(900);
    expect(effectiveTimeout(policy(), 900)).toBe(0);
  });

  it('preserve_ordering: responses come back in arrival order across instances', async () => {
    const { inst, sched } = setup({ dynamic: true, maxBatchSize: 1, preserveOrdering: true }, 2, true);
    const order: number[] = [];
    const ps = [0, 1].map((i) => sched.enqueue(req(1)).then(() => order.push(i)));
    await tick();
    inst[1]!.release(); // the second request finishes first ...
    await tick();
    expect(order).toEqual([]); // ... but waits for the first
    inst[0]!.release();
    await Promise.all(ps);
    expect(order).toEqual([0, 1]);
  });

  it('without preserve_ordering a later request may answer first', async () => {
    const { inst, sched } = setup({ dynamic: true, maxBatchSize: 1 }, 2, true);
    const order: number[] = [];
    const ps = [0, 1].map((i) => sched.enqueue(req(1)).then(() => order.push(i)));
    await tick();
    inst[1]!.release();
    await tick();
    expect(order).toEqual([1]);
    inst[0]!.release();
    await Promise.all(ps);
  });
});

describe('the batching policy resolved from a model config', () => {
  const batchingPolicy = (c: ModelConfig) => resolveForTest(c).batching;
  it('maps priority levels and per-level queue policies', () => {
    const p = batchingPolicy({
      name: 'm',
      max_batch_size: 8,
      dynamic_batching: {
        priority_levels: 2,
        default_priority_level: 2,
        default_queue_policy: { max_queue_size: 4 },
        priority_queue_policy: { '1': { timeout_action: 'DELAY', default_timeout_microseconds: 7 } },
      },
    });
    expect(p.preserveOrdering).toBe(false);
    // Triton allows preserve_ordering with one priority level only (test/unit/config_checks.test.ts).
    expect(batchingPolicy({ name: 'm', max_batch_size: 8, dynamic_batching: { preserve_ordering: true } }).preserveOrdering).toBe(true);
    expect(p.queue.levels).toBe(2);
    expect(p.queue.defaultLevel).toBe(2);
    expect(p.queue.policies[0]).toMatchObject({ timeoutAction: 'DELAY', defaultTimeoutUs: 7, maxQueueSize: 0 });
    expect(p.queue.policies[1]).toMatchObject({ maxQueueSize: 4, timeoutAction: 'REJECT' });
  });

  it('rejects a default level outside the configured levels', () => {
    expect(() =>
      batchingPolicy({ name: 'm', max_batch_size: 8, dynamic_batching: { priority_levels: 2, default_priority_level: 3 } }),
    ).toThrow(/default priority level must be in range \[1, 2\]/);
    expect(() =>
      batchingPolicy({
        name: 'm',
        max_batch_size: 8,
        dynamic_batching: { priority_levels: 2, default_priority_level: 1, priority_queue_policy: { '5': {} } },
      }),
    ).toThrow(/priority queue policy must have priority level in range \[1, 2\]/);
  });
});

// ---------------------------------------------------------------------------------------------

/** An instance that holds one execution behind the running one (like OrtInstance) and can withdraw it. */
class HoldingInstance extends FakeInstanceBase {
  readonly placement: InstancePlacement = { name: 'holding_0', kind: 'KIND_CPU', deviceId: -1 };
  readonly capacity = 2;
  readonly calls: number[][] = [];
  readonly ran: number[][] = [];
  private readonly slots: {
    x: number[];
    dims: number[];
    started: boolean;
    startNs: bigint;
    withdrawn: boolean;
    resolve: (r: ExecResult) => void;
    reject: (e: Error) => void;
  }[] = [];

  protected run(req: Batch): InstanceExecution {
    const slot = req.inputs[0]!;
    const x = fromI32(req.data.subarray(slot.offset, slot.offset + slot.byteLength));
    this.calls.push(x);
    const held = this.slots.length > 0;
    let entry: (typeof this.slots)[number] | undefined;
    const result = new Promise<ExecResult>((resolve, reject) => {
      entry = { x, dims: slot.dims, started: !held, startNs: process.hrtime.bigint(), withdrawn: false, resolve, reject };
      this.slots.push(entry);
    });
    const e = entry!;
    const withdraw = (): boolean => {
      if (!held || e.started) return false;
      e.withdrawn = true;
      return true;
    };
    return { result, held, withdraw };
  }

  /** Finishes the running execution; the next one starts (a withdrawn one is skipped). */
  finish(): void {
    const e = this.slots.shift()!;
    this.ran.push(e.x);
    e.resolve({
      outputs: [{ name: 'Y', datatype: 'INT32', dims: e.dims, data: i32(e.x.map((v) => 2 * v)) }],
      computeStartNs: e.startNs,
      computeInputNs: 1,
      computeInferNs: 2,
      computeOutputNs: 3,
    });
    while (this.slots[0]?.withdrawn) this.slots.shift()!.reject(new ServalError('CANCELLED', 'withdrawn'));
    if (this.slots[0]) {
      this.slots[0].started = true;
      this.slots[0].startNs = process.hrtime.bigint();
    }
  }
}

function holdingSetup(dynamic: boolean) {
  const inst = new HoldingInstance();
  const stats = new ModelStats();
  const sched = new Scheduler(
    [inst],
    {
      maxBatchSize: 8,
      dynamic,
      preferredBatchSizes: [],
      maxQueueDelayNs: 0,
      preserveOrdering: false,
      queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
    },
    stats,
  );
  return { inst, stats, sched };
}

describe('an instance that holds the next execution (capacity 2)', () => {
  it('without dynamic batching, the next request waits inside the instance while one runs; the third stays queued', async () => {
    const { inst, stats, sched } = holdingSetup(false);
    const rs = [req(1, 2, { outputs: ['Y'] }), req(1, 2, { outputs: ['Y'] }), req(1, 2, { outputs: ['Y'] })];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick();
    expect(inst.calls).toEqual([rs[0]!.x, rs[1]!.x]);
    expect(stats.pending).toBe(3);
    inst.finish();
    expectOwnResult(rs[0]!, await ps[0]!);
    await tick();
    expect(inst.calls).toEqual([rs[0]!.x, rs[1]!.x, rs[2]!.x]);
    inst.finish();
    inst.finish();
    expectOwnResult(rs[1]!, await ps[1]!);
    expectOwnResult(rs[2]!, await ps[2]!);
    expect(inst.ran).toEqual(rs.map((r) => r.x));
    expect(stats.executionCount).toBe(3);
  });

  it('cancelling the held request withdraws it at once: CANCELLED, counted, never run; its slot frees when the instance skips it', async () => {
    const { inst, stats, sched } = holdingSetup(false);
    const held = new Cancellation();
    const rs = [req(1, 2, { outputs: ['Y'] }), req(1, 2, { outputs: ['Y'], cancellation: held }), req(1, 2, { outputs: ['Y'] })];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick();
    expect(inst.calls).toHaveLength(2);
    held.cancel();
    await expect(ps[1]).rejects.toMatchObject({ code: 'CANCELLED', message: 'request was cancelled by the client while queued' });
    expect(stats.failuresByReason.get('CANCELED')).toBe(1);
    expect(stats.pending).toBe(2);
    await tick();
    expect(inst.calls).toHaveLength(2); // the withdrawn one still occupies its slot
    inst.finish();
    expectOwnResult(rs[0]!, await ps[0]!);
    await tick();
    expect(inst.calls).toEqual([rs[0]!.x, rs[1]!.x, rs[2]!.x]);
    inst.finish();
    expectOwnResult(rs[2]!, await ps[2]!);
    expect(inst.ran).toEqual([rs[0]!.x, rs[2]!.x]);
    expect(stats.failuresByReason.get('CANCELED')).toBe(1);
    expect(stats.fail.count).toBe(1);
    expect(stats.pending).toBe(0);
  });

  it('time held inside the busy instance counts as queue time (Triton: queue ends when execution starts)', async () => {
    const { inst, stats, sched } = holdingSetup(false);
    const rs = [req(1, 2, { outputs: ['Y'] }), req(1, 2, { outputs: ['Y'] })];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick();
    expect(inst.calls).toHaveLength(2); // the second is held, not running
    await new Promise((r) => setTimeout(r, 30));
    inst.finish();
    await ps[0];
    const queuedBefore = stats.queue.ns;
    expect(queuedBefore).toBeLessThan(10e6); // the first started at once
    inst.finish();
    await ps[1];
    expect(stats.queue.count).toBe(2);
    expect(stats.queue.ns - queuedBefore).toBeGreaterThanOrEqual(25e6); // the second's 30 ms behind the first
  });

  it('cancelling after the held request has started changes nothing: it completes', async () => {
    const { inst, sched } = holdingSetup(false);
    const c = new Cancellation();
    const rs = [req(1, 2, { outputs: ['Y'] }), req(1, 2, { outputs: ['Y'], cancellation: c })];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick();
    inst.finish();
    await ps[0];
    c.cancel();
    inst.finish();
    expectOwnResult(rs[1]!, await ps[1]!);
  });

  it('the dynamic batcher keeps requests in its queue until the instance is idle, then batches them', async () => {
    const { inst, sched } = holdingSetup(true);
    const rs = [req(1, 2, { outputs: ['Y'] }), req(1, 2, { outputs: ['Y'] }), req(2, 2, { outputs: ['Y'] })];
    const ps = rs.map((r) => sched.enqueue(r));
    await tick();
    expect(inst.calls).toEqual([rs[0]!.x]);
    inst.finish();
    await ps[0];
    await tick();
    expect(inst.calls).toEqual([rs[0]!.x, [...rs[1]!.x, ...rs[2]!.x]]);
    inst.finish();
    expectOwnResult(rs[1]!, await ps[1]!);
    expectOwnResult(rs[2]!, await ps[2]!);
  });
});
