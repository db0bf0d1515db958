// Who hears a request's cancel once its execution has started: the instance, not the scheduler.
// A batch the instance holds behind a running one gets the scheduler's withdraw listener; when it
// starts, the instance puts its own in place (a Python instance: the model's is_cancelled()).
// The scheduler must then leave that listener alone when the execution's result settles (a
// decoupled model's execute() returns long before its last response), or a client's later
// cancel reaches nobody: decoupled_python.test.ts's "a client's cancel reaches the running model"
// failed that way under load.
import { describe, expect, it } from 'vitest';
import type { ExecResult, Execution } from '../../src/backends/backend.js';
import { UNBOUNDED } from '../../src/config/resolve.js';
import type { InstancePlacement } from '../../src/config/resolved.js';
import { Cancellation } from '../../src/kernel/cancel.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { i32 } from '../helpers/tensors.js';

/** Holds each execution until start(); started, it listens to its requests' cancels and returns at once. */
class HoldingInstance extends FakeInstanceBase {
  readonly placement: InstancePlacement = { name: 'holding_0', kind: 'KIND_CPU', deviceId: -1 };
  readonly capacity = 1;
  readonly heard: string[] = [];
  private starts: (() => void)[] = [];

  protected run(b: Batch): Execution {
    let started = false;
    const result = new Promise<ExecResult>((resolve) => {
      this.starts.push(() => {
        started = true;
        for (const r of b.requests ?? []) r.cancellation?.onCancel(() => this.heard.push('instance'));
        resolve({ outputs: [], computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 });
      });
    });
    return { result, held: true, withdraw: () => !started };
  }

  start(): void {
    this.starts.shift()?.();
  }
}

describe('a held execution that has started', () => {
  it('keeps the instance as the listener of its cancellation after its result settles', async () => {
    const inst = new HoldingInstance();
    const sched = new Scheduler(
      [inst],
      {
        maxBatchSize: 0,
        dynamic: false,
        preferredBatchSizes: [],
        maxQueueDelayNs: 0,
        preserveOrdering: false,
        queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
      },
      new ModelStats(),
    );
    const cancellation = new Cancellation();
    const done = sched.enqueue({
      batchSize: 0,
      inputs: [{ name: 'X', datatype: 'INT32', shape: [1], data: i32([1]) }],
      outputs: [],
      requestStartNs: process.hrtime.bigint(),
      cancellation,
    });
    await new Promise((r) => setImmediate(r));
    inst.start();
    await done;
    cancellation.cancel();
    expect(inst.heard).toEqual(['instance']);
  });
});
