// src/scheduler/sequence_batcher.ts with fake instances that compute from the assembled batch
// what the model sees: each row's INPUT, its control inputs (START, END, READY, CORRID) and its
// implicit state (SUM_IN). Covers both strategies, the backlog, the controls, implicit state,
// idle timeout, cancellation, unload and the statistics.
import { describe, expect, it } from 'vitest';
import type { ExecOutput, ExecResult, Execution } from '../../src/backends/backend.js';
import type { InstancePlacement, ResolvedModelConfig } from '../../src/config/resolved.js';
import type { ModelConfig } from '../../src/config/types.js';
import { Cancellation } from '../../src/kernel/cancel.js';
import type { ScheduledOutput, SchedulerRequest } from '../../src/scheduler/scheduler.js';
import { SequenceBatcher, type StateTensor } from '../../src/scheduler/sequence_batcher.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { expectServalErrorAsync } from '../helpers/errors.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { resolveForTest } from '../helpers/resolve.js';
import { fromI32, i32, rawOf, splitBytesRaw, valuesOf } from '../helpers/tensors.js';

type Kind = 'START' | 'END' | 'READY' | 'CORRID';

interface SeqOptions {
  maxBatch?: number;
  oldest?: {
    max_candidate_sequences?: number;
    preferred_batch_size?: number[];
    max_queue_delay_microseconds?: number;
    preserve_ordering?: boolean;
  };
  direct?: { max_queue_delay_microseconds?: number; minimum_slot_utilization?: number };
  idleUs?: number;
  controls?: Kind[];
  corridType?: 'TYPE_UINT64' | 'TYPE_INT32' | 'TYPE_STRING';
  /** SUM_IN/SUM_OUT implicit state (INT32 [1]); `initialFile` starts it from a data file. */
  state?: boolean | 'file';
}

function seqConfig(o: SeqOptions = {}): ModelConfig {
  const controls = o.controls ?? ['START', 'END', 'READY', 'CORRID'];
  return {
    name: 'seq',
    platform: 'onnxruntime_onnx',
    max_batch_size: o.maxBatch ?? 4,
    input: [{ name: 'INPUT', data_type: 'TYPE_INT32', dims: [1] }],
    output: [{ name: 'OUTPUT', data_type: 'TYPE_INT32', dims: [1] }],
    sequence_batching: {
      ...(o.oldest ? { oldest: o.oldest } : { direct: o.direct ?? {} }),
      max_sequence_idle_microseconds: o.idleUs ?? 0,
      control_input: controls.map((k) => ({
        name: k,
        control: [
          k === 'CORRID'
            ? { kind: 'CONTROL_SEQUENCE_CORRID', data_type: o.corridType ?? 'TYPE_UINT64' }
            : { kind: `CONTROL_SEQUENCE_${k}`, int32_false_true: [0, 1] },
        ],
      })),
      state: o.state
        ? [
            {
              input_name: 'SUM_IN',
              output_name: 'SUM_OUT',
              data_type: 'TYPE_INT32',
              dims: [1],
              ...(o.state === 'file' && { initial_state: [{ name: 'init', data_type: 'TYPE_INT32', dims: [1], data_file: 'init.bin' }] }),
            },
          ]
        : [],
    },
  } as ModelConfig;
}

function resolveSeq(config: ModelConfig): ResolvedModelConfig {
  const batch = (config.max_batch_size ?? 0) > 0 ? [-1] : [];
  const sb = config.sequence_batching!;
  const ctrl = (sb.control_input ?? []).map((c) => {
    const k = c.control![0]!;
    const dt = k.kind === 'CONTROL_SEQUENCE_CORRID' ? (k.data_type === 'TYPE_STRING' ? 'BYTES' : k.data_type!.slice(5)) : 'INT32';
    return { name: c.name!, datatype: dt as 'INT32', rawType: dt, dims: [...batch, 1] };
  });
  const io = (name: string) => ({ name, datatype: 'INT32' as const, rawType: 'int32', dims: [...batch, 1] });
  const states = (sb.state ?? []).length > 0;
  return resolveForTest(config, {
    signature: {
      inputs: [io('INPUT'), ...ctrl, ...(states ? [io('SUM_IN')] : [])],
      outputs: [io('OUTPUT'), ...(states ? [io('SUM_OUT')] : [])],
    },
  });
}

interface Row {
  input: number;
  start: number;
  end: number;
  ready: number;
  corrid: bigint | string | undefined;
  sum: number | undefined;
}

interface Exec {
  instance: string;
  /** Rows of the batch (1 for a model without batching). */
  rows: Row[];
  /** INPUT's dims as assembled. */
  dims: number[];
  outputs: string[];
}

/**
 * OUTPUT = READY ? (SUM_IN + INPUT with state, else INPUT + START + END * CORRID) : -1, and
 * SUM_OUT = OUTPUT: a model that shows which row carried what.
 */
class SeqInstance extends FakeInstanceBase {
  readonly placement: InstancePlacement;
  readonly capacity = 8;
  manual = false;
  fail: Error | undefined;

  constructor(
    name: string,
    private readonly log: Exec[],
  ) {
    super();
    this.placement = { name, kind: 'KIND_CPU', deviceId: -1 };
  }

  protected run(b: Batch): Execution {
    return { result: this.compute(b), held: false, withdraw: () => false };
  }

  private async compute(b: Batch): Promise<ExecResult> {
    const raw = (name: string): Uint8Array | undefined => {
      const s = b.inputs.find((t) => t.name === name);
      return s && b.data.slice(s.offset, s.offset + s.byteLength);
    };
    const ints = (name: string): number[] | undefined => {
      const r = raw(name);
      return r && fromI32(r);
    };
    const input = ints('INPUT')!;
    const corridSlot = b.inputs.find((t) => t.name === 'CORRID');
    const corrids: (bigint | string)[] | undefined = corridSlot
      ? corridSlot.datatype === 'BYTES'
        ? splitBytesRaw(raw('CORRID')!).map((e) => e.toString())
        : (valuesOf(corridSlot.datatype as 'UINT64', raw('CORRID')!) as (number | bigint)[]).map((v) => BigInt(v))
      : undefined;
    const [start, end, ready, sum] = ['START', 'END', 'READY', 'SUM_IN'].map(ints);
    const rows: Row[] = input.map((v, i) => ({
      input: v,
      start: start?.[i] ?? 0,
      end: end?.[i] ?? 0,
      ready: ready?.[i] ?? 1,
      corrid: corrids?.[i],
      sum: sum?.[i],
    }));
    const dims = b.inputs.find((t) => t.name === 'INPUT')!.dims;
    this.log.push({ instance: this.placement.name, rows, dims, outputs: [...b.outputs] });
    if (this.manual) await this.hold();
    else await Promise.resolve();
    if (this.fail) throw this.fail;
    const value = rows.map((r) => {
      if (!r.ready) return -1;
      if (r.sum !== undefined) return r.sum + r.input;
      const c = typeof r.corrid === 'bigint' ? Number(r.corrid) : 0;
      return r.input + r.start + r.end * c;
    });
    const outputs: ExecOutput[] = b.outputs.map((name) => ({ name, datatype: 'INT32', dims, data: i32(value) }));
    return { outputs, computeInputNs: 1, computeInferNs: 100, computeOutputNs: 1 };
  }
}

function setup(o: SeqOptions = {}, instances = 1, initialStates?: Map<string, StateTensor>) {
  const config = resolveSeq(seqConfig(o));
  const log: Exec[] = [];
  const inst = Array.from({ length: instances }, (_, i) => new SeqInstance(`seq_${i}`, log));
  const stats = new ModelStats();
  const batcher = new SequenceBatcher(
    inst,
    { name: 'seq', maxBatchSize: config.maxBatchSize, policy: config.sequence!, ...(initialStates && { initialStates }) },
    stats,
  );
  const manual = (on: boolean): void => {
    for (const i of inst) i.manual = on;
  };
  /** Lets every held execution finish, and those it starts, until none is held. */
  const flush = async (): Promise<void> => {
    for (let k = 0; k < 100; k++) {
      await tick();
      if (!inst.some((i) => i.held)) return;
      for (const i of inst) while (i.held) i.release();
    }
  };
  return { config, log, inst, stats, batcher, manual, flush };
}

function req(
  id: number | string,
  value: number,
  flags: { start?: boolean; end?: boolean } = {},
  extra: { batch?: number; cancellation?: Cancellation; timeoutUs?: number; noBatchDim?: boolean } = {},
): SchedulerRequest {
  const batch = extra.batch ?? 1;
  return {
    batchSize: extra.noBatchDim ? 0 : batch,
    inputs: [
      {
        name: 'INPUT',
        datatype: 'INT32',
        shape: extra.noBatchDim ? [1] : [batch, 1],
        data: i32(Array.from({ length: batch }, () => value)),
      },
    ],
    outputs: ['OUTPUT'],
    requestStartNs: process.hrtime.bigint(),
    sequence: { id: typeof id === 'number' ? BigInt(id) : id, start: flags.start ?? false, end: flags.end ?? false },
    ...(extra.cancellation && { cancellation: extra.cancellation }),
    ...(extra.timeoutUs && { timeoutUs: extra.timeoutUs }),
  };
}

const out = (o: ScheduledOutput[]): number => fromI32(o.find((t) => t.name === 'OUTPUT')!.data)[0]!;
const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Sends `values` as one sequence, each request after the previous answer; returns the outputs. */
async function sequence(b: SequenceBatcher, id: number | string, values: number[]): Promise<number[]> {
  const res: number[] = [];
  for (const [i, v] of values.entries()) {
    res.push(out(await b.enqueue(req(id, v, { start: i === 0, end: i === values.length - 1 }))));
  }
  return res;
}

// Triton's example clients' sequences: [0] + values and [100] + -values.
const VALUES = [11, 7, 5, 3, 2, 0, 1];

describe('direct strategy', () => {
  it('feeds START, END, READY and CORRID per row and keeps each sequence in its own slot', async () => {
    const { batcher, log } = setup();
    const [a, b] = await Promise.all([sequence(batcher, 1000, [0, ...VALUES]), sequence(batcher, 1001, [100, ...VALUES.map((v) => -v)])]);
    // INPUT + START + END * CORRID: the dyna_sequence example's arithmetic.
    expect(a).toEqual([1, 11, 7, 5, 3, 2, 0, 1 + 1000]);
    expect(b).toEqual([101, -11, -7, -5, -3, -2, 0, -1 + 1001]);
    for (const e of log) {
      for (const [slot, r] of e.rows.entries()) {
        if (!r.ready) {
          // A slot without a request: not ready, every control false, CORRID 0.
          expect([r.start, r.end, r.corrid]).toEqual([0, 0, 0n]);
          continue;
        }
        // Sequence 1000 started first: slot 0; 1001: slot 1.
        expect(r.corrid).toBe(slot === 0 ? 1000n : 1001n);
      }
    }
    const firsts = log.flatMap((e) => e.rows).filter((r) => r.start === 1);
    expect(firsts.map((r) => r.input).sort((x, y) => x - y)).toEqual([0, 100]);
    expect(log.flatMap((e) => e.rows).filter((r) => r.end === 1)).toHaveLength(2);
  });

  it('batches the next request of every busy slot, with not-ready rows for idle slots below the highest', async () => {
    const { batcher, log, inst, manual, flush } = setup({ maxBatch: 4 });
    manual(true);
    // Four sequences take slots 0..3; the first batch holds only sequence 1.
    const p1 = batcher.enqueue(req(1, 10, { start: true }));
    await tick();
    const rest = [
      batcher.enqueue(req(2, 20, { start: true })),
      batcher.enqueue(req(3, 30, { start: true })),
      batcher.enqueue(req(4, 40, { start: true })),
    ];
    inst[0]!.release();
    await p1;
    await tick();
    // Slots 1..3 batched together; slot 0 (sequence 1, nothing queued) is a not-ready row.
    expect(log[1]!.rows.map((r) => [r.ready, r.input])).toEqual([
      [0, 20],
      [1, 20],
      [1, 30],
      [1, 40],
    ]);
    expect(log[1]!.dims).toEqual([4, 1]);
    await flush();
    await Promise.all(rest);
    // Sequence 3 alone: rows 0..2, the others not ready (inputs copied from a ready row).
    const p3 = batcher.enqueue(req(3, 33));
    await tick();
    expect(log[2]!.rows.map((r) => r.ready)).toEqual([0, 0, 1]);
    expect(log[2]!.rows.map((r) => r.input)).toEqual([33, 33, 33]);
    await flush();
    expect(out(await p3)).toBe(33);
    manual(false);
  });

  it('puts a START beyond the free slots in the backlog until a sequence ends', async () => {
    const { batcher, log } = setup({ maxBatch: 1 });
    expect(out(await batcher.enqueue(req(1, 5, { start: true })))).toBe(6);
    // Sequence 2 waits: its requests run only after sequence 1 ends, in order, in slot 0.
    const waiting = [batcher.enqueue(req(2, 7, { start: true })), batcher.enqueue(req(2, 8)), batcher.enqueue(req(2, 9, { end: true }))];
    await tick(5);
    expect(log).toHaveLength(1);
    expect(out(await batcher.enqueue(req(1, 3, { end: true })))).toBe(4);
    expect((await Promise.all(waiting)).map(out)).toEqual([8, 8, 9 + 2]);
    expect(log.map((e) => e.rows[0]!.corrid)).toEqual([1n, 1n, 2n, 2n, 2n]);
  });

  it('spreads sequences over the instances (lowest free slot first)', async () => {
    const { batcher, log } = setup({ maxBatch: 2 }, 2);
    await Promise.all([1, 2, 3].map((id) => batcher.enqueue(req(id, id, { start: true }))));
    const where = new Map(log.flatMap((e) => e.rows.filter((r) => r.ready).map((r) => [r.corrid, `${e.instance}/${e.rows.indexOf(r)}`])));
    expect(where).toEqual(
      new Map([
        [1n, 'seq_0/0'],
        [2n, 'seq_1/0'],
        [3n, 'seq_0/1'],
      ]),
    );
  });

  it('holds a batch for minimum_slot_utilization up to max_queue_delay_microseconds', async () => {
    const { batcher, log } = setup({ maxBatch: 4, direct: { minimum_slot_utilization: 0.5, max_queue_delay_microseconds: 50_000 } });
    const p1 = batcher.enqueue(req(1, 1, { start: true }));
    await tick(5);
    // 1 of 4 slots ready: below 0.5, so it waits.
    expect(log).toHaveLength(0);
    const p2 = batcher.enqueue(req(2, 2, { start: true }));
    await Promise.all([p1, p2]);
    expect(log).toHaveLength(1);
    expect(log[0]!.rows.filter((r) => r.ready)).toHaveLength(2);
    // Alone, a request still goes once the delay has passed.
    expect(out(await batcher.enqueue(req(1, 5)))).toBe(5);
    expect(log).toHaveLength(2);
  });

  it('runs a model without batching one request at a time, without a batch dimension', async () => {
    const { batcher, log } = setup({ maxBatch: 0 });
    const r = await Promise.all([
      batcher.enqueue(req(1, 4, { start: true }, { noBatchDim: true })),
      batcher.enqueue(req(1, 5, {}, { noBatchDim: true })),
    ]);
    expect(r.map(out)).toEqual([5, 5]);
    expect(log.map((e) => e.dims)).toEqual([[1], [1]]);
    expect(r[0]![0]!.shape).toEqual([1]);
  });
});

describe('oldest strategy', () => {
  it('batches the next request of different sequences, one request per sequence in flight', async () => {
    const { batcher, log, inst, manual, flush } = setup({ maxBatch: 4, oldest: { max_candidate_sequences: 8 } });
    manual(true);
    const first = batcher.enqueue(req(1, 1, { start: true }));
    await tick();
    // While sequence 1 runs: two more of sequence 1 and one each of sequences 2 and 3.
    const more = [
      batcher.enqueue(req(1, 2)),
      batcher.enqueue(req(2, 20, { start: true })),
      batcher.enqueue(req(1, 3, { end: true })),
      batcher.enqueue(req(3, 30, { start: true })),
    ];
    inst[0]!.release();
    await first;
    await tick();
    // Next batch, in issue order: sequences 2 and 3, then sequence 1's next request, issued when
    // its previous one finished (never two of one sequence).
    expect(log[1]!.rows.map((r) => [r.corrid, r.input])).toEqual([
      [2n, 20],
      [3n, 30],
      [1n, 2],
    ]);
    await flush();
    expect((await Promise.all(more)).map(out)).toEqual([2, 21, 3 + 1, 31]);
    expect(log[2]!.rows.map((r) => [r.corrid, r.input, r.end])).toEqual([[1n, 3, 1]]);
    // Every row is ready: the oldest strategy has no placeholder rows.
    expect(log.flatMap((e) => e.rows).every((r) => r.ready === 1)).toBe(true);
    manual(false);
  });

  it('sends a preferred batch size at once and waits max_queue_delay_microseconds for a bigger one', async () => {
    const { batcher, log, manual, flush } = setup({
      maxBatch: 4,
      oldest: { max_candidate_sequences: 8, preferred_batch_size: [2], max_queue_delay_microseconds: 30_000 },
    });
    manual(true);
    // One request waits (below the preferred size) for the delay.
    const lone = batcher.enqueue(req(9, 9, { start: true }));
    await tick(5);
    expect(log).toHaveLength(0);
    // Three more sequences start: a batch of 2 (preferred) goes at once.
    const ps = [1, 2, 3].map((id) => batcher.enqueue(req(id, id, { start: true })));
    await tick();
    expect(log.map((e) => e.rows.length)).toEqual([2]);
    await flush();
    await Promise.all([lone, ...ps]);
    expect(log.map((e) => e.rows.length)).toEqual([2, 2]);
    manual(false);
  });

  it('limits active sequences to max_candidate_sequences per instance, the rest in the backlog', async () => {
    const { batcher, log } = setup({ maxBatch: 4, oldest: { max_candidate_sequences: 2 } });
    await Promise.all([1, 2].map((id) => batcher.enqueue(req(id, 0, { start: true }))));
    const third = batcher.enqueue(req(3, 30, { start: true, end: true }));
    await tick(5);
    expect(log.flatMap((e) => e.rows).some((r) => r.corrid === 3n)).toBe(false);
    await batcher.enqueue(req(1, 0, { end: true }));
    expect(out(await third)).toBe(30 + 1 + 3);
  });

  it('delivers in issue order across sequences with preserve_ordering', async () => {
    const { batcher, inst, manual } = setup({ maxBatch: 1, oldest: { max_candidate_sequences: 4, preserve_ordering: true } }, 2);
    manual(true);
    const order: number[] = [];
    const ps = [1, 2].map((id) => batcher.enqueue(req(id, id, { start: true })).then(() => order.push(id)));
    await tick();
    // The second instance finishes first; its answer waits for the first one's.
    inst[1]!.release();
    await tick(5);
    expect(order).toEqual([]);
    inst[0]!.release();
    await Promise.all(ps);
    expect(order).toEqual([1, 2]);
    manual(false);
  });
});

describe('implicit state', () => {
  for (const strategy of ['direct', 'oldest'] as const) {
    it(`carries each sequence's state to its next request and resets it at START (${strategy})`, async () => {
      const { batcher, log } = setup({
        state: true,
        controls: ['START', 'READY'],
        ...(strategy === 'oldest' && { oldest: { max_candidate_sequences: 4 } }),
      });
      const [a, b] = await Promise.all([sequence(batcher, 1, [0, ...VALUES]), sequence(batcher, 2, [100, ...VALUES.map((v) => -v)])]);
      const running = (xs: number[]) => xs.map((_, i) => xs.slice(0, i + 1).reduce((s, x) => s + x, 0));
      expect(a).toEqual(running([0, ...VALUES]));
      expect(b).toEqual(running([100, ...VALUES.map((v) => -v)]));
      // The state is an input of the model, never requested of it by the client.
      expect(log.every((e) => e.outputs.includes('SUM_OUT'))).toBe(true);
      // A new sequence with the same ID starts from zero again.
      expect(await sequence(batcher, 1, [5, 6])).toEqual([5, 11]);
      // START on a sequence in progress starts its state over.
      await batcher.enqueue(req(7, 50, { start: true }));
      expect(out(await batcher.enqueue(req(7, 1, { start: true })))).toBe(1);
    });
  }

  it('starts from the initial_state data the model layer read', async () => {
    const initial = new Map([['SUM_IN', { shape: [1], data: rawOf('INT32', [1000]) }]]);
    const { batcher } = setup({ state: 'file', controls: ['START'] }, 1, initial);
    expect(await sequence(batcher, 3, [1, 2, 3])).toEqual([1001, 1003, 1006]);
  });

  it('gives not-ready rows a state of the right shape without touching the sequences', async () => {
    const { batcher, log, inst, manual, flush } = setup({ state: true, controls: ['READY'], maxBatch: 4 });
    await Promise.all([batcher.enqueue(req(1, 10, { start: true })), batcher.enqueue(req(2, 20, { start: true }))]);
    manual(true);
    const p = batcher.enqueue(req(2, 1));
    await tick();
    expect(log.at(-1)!.rows.map((r) => r.ready)).toEqual([0, 1]);
    inst[0]!.release();
    await flush();
    expect(out(await p)).toBe(21);
    manual(false);
    expect(out(await batcher.enqueue(req(1, 1)))).toBe(11);
  });
});

describe('sequence errors', () => {
  it("refuses a request for an unknown or ended sequence without START with Triton's text", async () => {
    const { batcher } = setup();
    // A refused request is never taken in (InferRequest.admitted); an accepted one is.
    let admitted = 0;
    let e = await expectServalErrorAsync(batcher.enqueue({ ...req(42, 1), admitted: () => admitted++ }), 'INVALID_ARG');
    expect(e.message).toBe(
      "inference request for sequence 42 to model 'seq' must specify the START flag on the first request of the sequence",
    );
    expect(admitted).toBe(0);
    await batcher.enqueue({ ...req(43, 1, { start: true, end: true }), admitted: () => admitted++ });
    expect(admitted).toBe(1);
    e = await expectServalErrorAsync(batcher.enqueue(req(43, 1)), 'INVALID_ARG');
    expect(e.message).toBe(
      "inference request for sequence 43 to model 'seq' must specify the START flag on the first request of the sequence",
    );
  });

  it('refuses a request without a correlation ID, or with batch size above 1', async () => {
    const { batcher } = setup();
    const none = { ...req(1, 1, { start: true }), sequence: undefined };
    for (const r of [none, req(0, 1, { start: true }), req('', 1, { start: true })]) {
      const e = await expectServalErrorAsync(batcher.enqueue(r), 'INVALID_ARG');
      expect(e.message).toBe("inference request to model 'seq' must specify a non-zero or non-empty correlation ID");
    }
    const e = await expectServalErrorAsync(batcher.enqueue(req(1, 1, { start: true }, { batch: 2 })), 'INVALID_ARG');
    expect(e.message).toBe("inference request to model 'seq' must specify batch-size 1 due to requirements of sequence batcher");
  });

  it('tells a string correlation ID from the same digits as a number', async () => {
    const { batcher } = setup();
    await batcher.enqueue(req(5, 1, { start: true }));
    await expectServalErrorAsync(batcher.enqueue(req('5', 1)), 'INVALID_ARG');
    await batcher.enqueue(req(5, 1, { end: true }));
  });

  it('fails every request of a failed execution and keeps serving', async () => {
    const { batcher, inst } = setup();
    await batcher.enqueue(req(1, 1, { start: true }));
    inst[0]!.fail = new Error('boom');
    const e = await expectServalErrorAsync(batcher.enqueue(req(1, 2)));
    expect(e.message).toContain('boom');
    inst[0]!.fail = undefined;
    expect(out(await batcher.enqueue(req(1, 3, { end: true })))).toBe(3 + 1);
  });
});

describe('idle sequences', () => {
  it('releases a sequence idle for max_sequence_idle_microseconds; its next request gets the START error', async () => {
    const { batcher, log } = setup({ maxBatch: 1, idleUs: 30_000 });
    await batcher.enqueue(req(1, 1, { start: true }));
    // Sequence 2 waits in the backlog for sequence 1's slot, which the idle timeout frees.
    const second = batcher.enqueue(req(2, 2, { start: true, end: true }));
    expect(out(await second)).toBe(2 + 1 + 2);
    const e = await expectServalErrorAsync(batcher.enqueue(req(1, 1)), 'INVALID_ARG');
    expect(e.message).toContain('must specify the START flag');
    expect(log.map((x) => x.rows[0]!.corrid)).toEqual([1n, 2n]);
  });

  it('keeps a sequence that keeps sending', async () => {
    // Five gaps of 100 ms, each below the 300 ms limit, 500 ms in all.
    const { batcher } = setup({ maxBatch: 1, idleUs: 300_000 });
    await batcher.enqueue(req(1, 1, { start: true }));
    for (let i = 0; i < 5; i++) {
      await tick(100);
      await batcher.enqueue(req(1, 1));
    }
    await batcher.enqueue(req(1, 1, { end: true }));
  });
});

describe('cancellation, timeouts and unload', () => {
  it('answers a cancelled waiting request at once and still ends its sequence at its END', async () => {
    const { batcher, stats, inst, manual, flush } = setup({ maxBatch: 1 });
    manual(true);
    const first = batcher.enqueue(req(1, 1, { start: true }));
    await tick();
    const c = new Cancellation();
    const last = batcher.enqueue(req(1, 2, { end: true }, { cancellation: c }));
    const next = batcher.enqueue(req(2, 5, { start: true, end: true }));
    c.cancel();
    const e = await expectServalErrorAsync(last, 'CANCELLED');
    expect(e.message).toContain('cancelled');
    inst[0]!.release();
    await flush();
    await first;
    // Sequence 2 got the slot: the cancelled END ended sequence 1.
    expect(out(await next)).toBe(5 + 1 + 2);
    expect(stats.failuresByReason.get('CANCELED')).toBe(1);
    manual(false);
  });

  it('withdraws a cancelled request from the oldest batcher queue', async () => {
    const { batcher, log, inst, manual, flush } = setup({ maxBatch: 4, oldest: { max_candidate_sequences: 4 } });
    manual(true);
    const first = batcher.enqueue(req(1, 1, { start: true }));
    await tick();
    const c = new Cancellation();
    const cancelled = batcher.enqueue(req(2, 2, { start: true }, { cancellation: c }));
    const other = batcher.enqueue(req(3, 3, { start: true }));
    c.cancel();
    await expectServalErrorAsync(cancelled, 'CANCELLED');
    inst[0]!.release();
    await flush();
    await Promise.all([first, other]);
    expect(log.flatMap((x) => x.rows).map((r) => r.corrid)).toEqual([1n, 3n]);
    manual(false);
    // Sequence 2 is still known: its START was cancelled, not its sequence.
    expect(out(await batcher.enqueue(req(2, 4, { end: true })))).toBe(4 + 2);
  });

  it("rejects a backlogged sequence whose request timeout expires with Triton's text", async () => {
    const { batcher, stats } = setup({ maxBatch: 1 });
    await batcher.enqueue(req(1, 1, { start: true }));
    const e = await expectServalErrorAsync(batcher.enqueue(req(2, 1, { start: true }, { timeoutUs: 10_000 })), 'UNAVAILABLE');
    expect(e.message).toBe('timeout of the corresponding sequence has been expired');
    expect(stats.failuresByReason.get('REJECTED')).toBe(1);
    await expectServalErrorAsync(batcher.enqueue(req(2, 1)), 'INVALID_ARG');
  });

  it('finishes what is queued on unload, backlog included, and refuses new requests', async () => {
    const { batcher, inst, manual } = setup({ maxBatch: 1 });
    manual(true);
    const ps = [batcher.enqueue(req(1, 1, { start: true })), batcher.enqueue(req(1, 2)), batcher.enqueue(req(2, 3, { start: true }))];
    await tick();
    let drained = false;
    const d = batcher.drain().then(() => (drained = true));
    await expectServalErrorAsync(batcher.enqueue(req(3, 1, { start: true })), 'UNAVAILABLE');
    for (let k = 0; k < 10 && !drained; k++) {
      inst[0]!.release();
      await tick();
    }
    await d;
    expect((await Promise.all(ps)).map(out)).toEqual([2, 2, 4]);
    manual(false);
  });
});

describe('statistics', () => {
  it('counts executions by batch rows (placeholders included) and inferences by requests', async () => {
    const { batcher, stats } = setup({ maxBatch: 4 });
    await Promise.all([batcher.enqueue(req(1, 1, { start: true })), batcher.enqueue(req(2, 1, { start: true }))]);
    await batcher.enqueue(req(2, 1));
    expect(stats.inferenceCount).toBe(3);
    expect(stats.success.count).toBe(3);
    // Sequence 1 alone, then twice [not ready, sequence 2].
    expect(stats.executionCount).toBe(3);
    expect([...stats.batches.values()].map((b) => [b.batch_size, b.compute_infer.count])).toEqual([
      [1, 1],
      [2, 2],
    ]);
    expect(stats.pending).toBe(0);
  });
});

describe('CORRID control types', () => {
  it('carries a string correlation ID in a TYPE_STRING control and narrows numeric ones', async () => {
    let s = setup({ corridType: 'TYPE_STRING', controls: ['CORRID'] });
    await s.batcher.enqueue(req('session-7', 1, { start: true, end: true }));
    expect(s.log.map((e) => e.rows[0]!.corrid)).toEqual(['session-7']);
    s = setup({ corridType: 'TYPE_INT32', controls: ['CORRID'] });
    await s.batcher.enqueue(req(2 ** 32 + 5, 1, { start: true, end: true }));
    expect(s.log.map((e) => e.rows[0]!.corrid)).toEqual([5n]);
  });

  it("refuses a correlation ID of the other kind with Triton's text, before it takes a slot", async () => {
    const str = setup({ corridType: 'TYPE_STRING', controls: ['CORRID'] });
    const e1 = await expectServalErrorAsync(str.batcher.enqueue(req(99, 1, { start: true })), 'INVALID_ARG');
    expect(e1.message).toMatch(/^sequence batching control 'CORRID' data-type is 'UINT64', but model '.*' expects 'BYTES'$/);
    const int = setup({ corridType: 'TYPE_INT32', controls: ['CORRID'] });
    const e2 = await expectServalErrorAsync(int.batcher.enqueue(req('text', 1, { start: true })), 'INVALID_ARG');
    expect(e2.message).toMatch(/^sequence batching control 'CORRID' data-type is 'BYTES', but model '.*' expects 'INT32'$/);
    // Neither took a slot nor ran: the right kind still runs at once.
    await int.batcher.enqueue(req(7, 1, { start: true, end: true }));
    expect(int.log.map((e) => e.rows[0]!.corrid)).toEqual([7n]);
    expect(str.log).toEqual([]);
  });
});
