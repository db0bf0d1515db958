// ExecLayout.lone: the scheduler tells an instance when an execution is its model's only request
// in the server (a client at concurrency 1), and only then: a Python instance lets its stub poll
// for the next message instead of sleeping, which must never happen under load.
import { describe, expect, it } from 'vitest';
import type { Execution } from '../../src/backends/backend.js';
import { UNBOUNDED } from '../../src/config/resolve.js';
import type { BatchingPolicy, InstancePlacement } from '../../src/config/resolved.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { ServerLoad } from '../../src/scheduler/server_load.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { i32 } from '../helpers/tensors.js';

/** Records each execution's `lone`, and holds it until released. */
class Recording extends FakeInstanceBase {
  readonly placement: InstancePlacement = { name: 'rec_0', kind: 'KIND_CPU', deviceId: -1 };
  constructor(readonly capacity: number) {
    super();
  }
  readonly lone: boolean[] = [];

  protected run(b: Batch): Execution {
    this.lone.push(b.lone === true);
    const result = this.hold().then(() => ({ outputs: [], computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 }));
    return { result, held: false, withdraw: () => false };
  }
}

const policy = (dynamic: boolean): BatchingPolicy => ({
  maxBatchSize: dynamic ? 8 : 0,
  dynamic,
  preferredBatchSizes: [],
  maxQueueDelayNs: 0,
  preserveOrdering: false,
  queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
});

const request = (dynamic: boolean) => ({
  batchSize: dynamic ? 1 : 0,
  inputs: [{ name: 'X', datatype: 'INT32' as const, shape: dynamic ? [1, 1] : [1], data: i32([1]) }],
  outputs: [],
  requestStartNs: process.hrtime.bigint(),
});

const tick = () => new Promise((r) => setImmediate(r));

describe('ExecLayout.lone', () => {
  for (const dynamic of [false, true]) {
    it(`is set for a model's only request and not while others wait${dynamic ? ' (dynamic batching)' : ''}`, async () => {
      const inst = new Recording(dynamic ? 1 : 2);
      const sched = new Scheduler([inst], policy(dynamic), new ModelStats());
      // One request at a time, each answered before the next: lone every time.
      for (let i = 0; i < 2; i++) {
        const done = sched.enqueue(request(dynamic));
        await tick();
        inst.release();
        await done;
      }
      expect(inst.lone).toEqual([true, true]);
      // Three at once: the first may go before the others arrive; none after it is alone.
      inst.lone.length = 0;
      const all = [0, 1, 2].map(() => sched.enqueue(request(dynamic)));
      for (let i = 0; i < 3; i++) {
        await tick();
        inst.release();
        await tick();
      }
      await Promise.all(all);
      expect(inst.lone).toContain(false);
      expect(inst.lone.slice(1).every((l) => !l)).toBe(true);
    });
  }

  it('is not set while the server has other requests (a BLS caller’s one is allowed)', async () => {
    const load = new ServerLoad();
    const inst = new Recording(2);
    const sched = new Scheduler([inst], policy(false), new ModelStats(), undefined, load);
    for (const others of [0, 1, 2, 5]) {
      load.pending = others;
      const done = sched.enqueue(request(false));
      await tick();
      inst.release();
      await done;
      expect(load.pending).toBe(others); // its own request came and went
    }
    expect(inst.lone).toEqual([true, true, false, false]);
  });
});
