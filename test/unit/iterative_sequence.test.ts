// Iterative sequences in src/scheduler/sequence_batcher.ts: a request the model releases with
// RESCHEDULE (ExecResult.rescheduled, as a Python instance reports it) runs again as its
// sequence's next step, unanswered until an execution releases it for good; a request without a
// correlation ID gets one; the release ends the sequence. A fake instance answers each request on
// its own (as the Python backend does) and reschedules it until it ran INPUT times.
import { describe, expect, it } from 'vitest';
import type { ExecResult, Execution } from '../../src/backends/backend.js';
import type { InstancePlacement } from '../../src/config/resolved.js';
import type { ModelConfig } from '../../src/config/types.js';
import { Cancellation } from '../../src/kernel/cancel.js';
import type { Params } from '../../src/kernel/types.js';
import type { SchedulerRequest } from '../../src/scheduler/scheduler.js';
import { SequenceBatcher } from '../../src/scheduler/sequence_batcher.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { expectServalErrorAsync } from '../helpers/errors.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { resolveForTest } from '../helpers/resolve.js';
import { fromI32, i32 } from '../helpers/tensors.js';

/** One row of an execution: the request's INPUT, its controls and the parameters it showed. */
interface Row {
  input: number;
  start: number;
  end: number;
  corrid: number;
  params: Params;
}

class IterativeInstance extends FakeInstanceBase {
  readonly placement: InstancePlacement = { name: 'it_0', kind: 'KIND_CPU', deviceId: -1 };
  readonly capacity = 8;
  manual = false;
  readonly log: Row[][] = [];
  /** Executions so far, by correlation ID. */
  private readonly runs = new Map<number, number>();

  protected run(b: Batch): Execution {
    return { result: this.compute(b), held: false, withdraw: () => false };
  }

  private async compute(b: Batch): Promise<ExecResult> {
    const ints = (name: string): number[] => {
      const s = b.inputs.find((t) => t.name === name)!;
      return fromI32(b.data.slice(s.offset, s.offset + s.byteLength));
    };
    const [input, start, end, corrid] = ['INPUT', 'START', 'END', 'CORRID'].map(ints) as number[][];
    const rows = b.requests!.map((r, i) => ({
      input: input![i]!,
      start: start![i]!,
      end: end![i]!,
      corrid: corrid![i]!,
      params: r.parameters,
    }));
    this.log.push(rows);
    if (this.manual) await this.hold();
    else await Promise.resolve();
    const rescheduled: number[] = [];
    const responses = rows.map((r, i) => {
      if (r.corrid === 0) return [];
      const n = (this.runs.get(r.corrid) ?? 0) + 1;
      this.runs.set(r.corrid, n);
      if (n < r.input) rescheduled.push(i);
      else this.runs.delete(r.corrid);
      return [{ name: 'OUTPUT', datatype: 'INT32' as const, dims: [1, 1], data: i32([n]) }];
    });
    return { outputs: [], responses, rescheduled, computeInputNs: 1, computeInferNs: 100, computeOutputNs: 1 };
  }
}

function setup(sb: Record<string, unknown> = {}, maxBatch = 1) {
  const control = (k: string) => ({
    name: k,
    control: [
      k === 'CORRID'
        ? { kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_INT32' }
        : { kind: `CONTROL_SEQUENCE_${k}`, int32_false_true: [0, 1] },
    ],
  });
  const config = {
    name: 'it',
    platform: 'onnxruntime_onnx',
    max_batch_size: maxBatch,
    input: [{ name: 'INPUT', data_type: 'TYPE_INT32', dims: [1] }],
    output: [{ name: 'OUTPUT', data_type: 'TYPE_INT32', dims: [1] }],
    sequence_batching: { iterative_sequence: true, control_input: ['START', 'END', 'CORRID'].map(control), ...sb },
  } as ModelConfig;
  const io = (name: string) => ({ name, datatype: 'INT32' as const, rawType: 'int32', dims: [-1, 1] });
  const resolved = resolveForTest(config, {
    signature: { inputs: ['INPUT', 'START', 'END', 'CORRID'].map(io), outputs: [io('OUTPUT')] },
  });
  const inst = new IterativeInstance();
  const stats = new ModelStats();
  const batcher = new SequenceBatcher([inst], { name: 'it', maxBatchSize: maxBatch, policy: resolved.sequence! }, stats);
  return { inst, stats, batcher };
}

function req(n: number, seq?: { id: number; start?: boolean; end?: boolean }, cancellation?: Cancellation): SchedulerRequest {
  return {
    batchSize: 1,
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: i32([n]) }],
    outputs: ['OUTPUT'],
    requestStartNs: process.hrtime.bigint(),
    ...(seq && { sequence: { id: BigInt(seq.id), start: seq.start ?? false, end: seq.end ?? false } }),
    ...(cancellation && { cancellation }),
  };
}

const runs = async (p: Promise<{ data: Uint8Array }[]>): Promise<number> => fromI32((await p)[0]!.data)[0]!;
const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 0));
const START_ERROR = (id: number) =>
  `inference request for sequence ${id} to model 'it' must specify the START flag on the first request of the sequence`;

describe('an iterative sequence', () => {
  it('gives a request without a correlation ID one, then runs it again with neither START nor END until released', async () => {
    const { batcher, inst, stats } = setup();
    expect(await runs(batcher.enqueue(req(3)))).toBe(3);
    expect(await runs(batcher.enqueue(req(2)))).toBe(2);
    expect(inst.log.flat().map((r) => [r.corrid, r.start, r.end])).toEqual([
      [1, 1, 0],
      [1, 0, 0],
      [1, 0, 0],
      [2, 1, 0],
      [2, 0, 0],
    ]);
    // The model's request shows the same: the ID it was given, START on its first execution only.
    expect(inst.log.flat().map((r) => [r.params.sequence_id, r.params.sequence_start])).toEqual([
      [1n, true],
      [1n, false],
      [1n, false],
      [2n, true],
      [2n, false],
    ]);
    // Every execution counts as an inference, an execution and a success, as Triton counts them.
    expect([stats.inferenceCount, stats.executionCount, stats.success.count]).toEqual([5, 5, 5]);
    expect(stats.pending).toBe(0);
  });

  it('keeps a client correlation ID, and ends the sequence when the request is released', async () => {
    const { batcher, inst } = setup();
    expect(await runs(batcher.enqueue(req(2, { id: 7, start: true })))).toBe(2);
    expect(inst.log.flat().map((r) => [r.corrid, r.start])).toEqual([
      [7, 1],
      [7, 0],
    ]);
    const err = await expectServalErrorAsync(batcher.enqueue(req(1, { id: 7 })), 'INVALID_ARG');
    expect(err.message).toBe(START_ERROR(7));
    expect(await runs(batcher.enqueue(req(1, { id: 7, start: true })))).toBe(1);
  });

  it('refuses to reschedule a request that ended its sequence (START and END): Triton batcher text', async () => {
    const { batcher, inst, stats } = setup();
    const err = await expectServalErrorAsync(batcher.enqueue(req(2, { id: 8, start: true, end: true })), 'INVALID_ARG');
    expect(err.message).toBe(START_ERROR(8));
    expect(inst.log.flat()).toHaveLength(1);
    expect(stats.failuresByReason.get('REJECTED')).toBe(1);
    expect(stats.pending).toBe(0);
  });

  it('keeps a rescheduled request in its slot: a sequence waiting in the backlog gets the slot after the release', async () => {
    const { batcher, inst } = setup({}, 2);
    const a = batcher.enqueue(req(3, { id: 1, start: true }));
    const b = batcher.enqueue(req(1, { id: 2, start: true }));
    const c = batcher.enqueue(req(2, { id: 3, start: true }));
    expect(await Promise.all([a, b, c].map(runs))).toEqual([3, 1, 2]);
    // Rows by slot (0: a not-ready row): the first ran alone, as soon as it came; the third
    // sequence takes slot 1 once the second was released, and keeps it after the first ended.
    expect(inst.log.map((rows) => rows.map((r) => r.corrid))).toEqual([[1], [1, 2], [1, 3], [0, 3]]);
  });

  it('a client cancel while it runs answers CANCELLED instead of the next execution, and frees the slot', async () => {
    const { batcher, inst, stats } = setup();
    inst.manual = true;
    const cancellation = new Cancellation();
    const a = expectServalErrorAsync(batcher.enqueue(req(5, { id: 4, start: true }, cancellation)), 'CANCELLED');
    const b = batcher.enqueue(req(1, { id: 5, start: true }));
    await tick();
    inst.release();
    await tick();
    // Rescheduled once, running again.
    expect(inst.log.flat().map((r) => r.corrid)).toEqual([4, 4]);
    cancellation.cancel();
    for (let k = 0; k < 5; k++) {
      inst.release();
      await tick();
    }
    await a;
    expect(await runs(b)).toBe(1);
    expect(inst.log.flat().map((r) => r.corrid)).toEqual([4, 4, 5]);
    expect(stats.pending).toBe(0);
  });

  it('with preserve_ordering, a rescheduled request does not hold back the answers issued after it', async () => {
    const { batcher } = setup({ oldest: { max_candidate_sequences: 2, preserve_ordering: true } }, 2);
    const order: number[] = [];
    const a = batcher.enqueue(req(3, { id: 1, start: true })).then(() => order.push(1));
    const b = batcher.enqueue(req(1, { id: 2, start: true })).then(() => order.push(2));
    await Promise.all([a, b]);
    expect(order).toEqual([2, 1]);
  });
});
