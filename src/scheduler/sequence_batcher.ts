// Triton's sequence batcher (core sequence_batch_scheduler.cc) for stateful models. Every
// request names a sequence (correlation ID); a sequence is bound to one batch slot of one instance
// from its START to its END, and the requests of one sequence run one after the other, in order.
// Each batch row gets the control inputs the config asks for (START, END, READY, CORRID) and the
// sequence's implicit state; what the model writes to a state output is kept for its next request.
//
//  - direct: a slot is a fixed row of the instance's batch. When the instance is free, the next
//    request of every slot goes in one batch of (highest busy slot + 1) rows; a slot without a
//    request gets a "not ready" row (READY false, inputs copied from another row), so every
//    sequence keeps its row. minimum_slot_utilization with max_queue_delay_microseconds can hold
//    a batch back until enough slots are ready.
//  - oldest: up to max_candidate_sequences sequences per instance; the next request of each (one
//    in flight per sequence) joins the instance's queue, batched in arrival order like the
//    dynamic batcher (max_batch_size, preferred_batch_size, max_queue_delay_microseconds).
//
// A START without a free slot waits in the backlog (whole sequences, FIFO) until one frees. A
// sequence that sends nothing for max_sequence_idle_microseconds loses its slot; its next request
// gets Triton's error for a request without START. Nothing survives an unload.
import type { ExecResult, ModelInstance } from '../backends/backend.js';
import type { SequenceControl, SequencePolicy, SequenceStateConfig } from '../config/resolved.js';
import { InFlight, InOrder } from '../kernel/churn.js';
import { type DataType, elementCount, elementSize, joinBytes } from '../kernel/datatypes.js';
import { asServalError, ServalError } from '../kernel/errors.js';
import { keepMemory } from '../kernel/memory.js';
import type { FailureReason, ModelStats, RequestTiming } from '../stats/model_stats.js';
import type { LimitedInstance } from './rate_limiter.js';
import {
  type BatchInputs,
  type ScheduledInput,
  type ScheduledOutput,
  type SchedulerRequest,
  scatter,
  submit,
  traceExecution,
} from './scheduler.js';

export type SequenceFlags = NonNullable<SchedulerRequest['sequence']>;

/** A state value: its shape without the batch dimension, and its bytes. */
export interface StateTensor {
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/** What the batcher needs to know of the model besides its sequence policy. */
export interface SequenceModel {
  name: string;
  maxBatchSize: number;
  policy: SequencePolicy;
  /** Initial values of states whose initial_state reads a data file, by state input name. */
  initialStates?: ReadonlyMap<string, StateTensor>;
  /** With --rate-limit: each instance's side of the rate limiter, in the instances' order. */
  limited?: readonly LimitedInstance[];
}

interface Seq {
  readonly id: bigint | string;
  readonly key: string;
  slot?: Slot;
  backlog?: Backlog;
  /** Last time a request arrived or finished: the idle clock. */
  lastNs: bigint;
  /** State values after the last request; undefined = initial. */
  state?: Map<string, StateTensor>;
}

interface Pending {
  readonly req: SchedulerRequest;
  readonly seq: Seq;
  readonly start: boolean;
  readonly end: boolean;
  readonly queueStartNs: bigint;
  readonly deliver: (out: ScheduledOutput[] | ServalError) => void;
  /** Failed already (cancelled while waiting): skipped, but its END still ends the sequence. */
  dead: boolean;
  /** oldest: the slot it was issued from, while it waits in or runs from the instance's queue. */
  issuedFrom?: Slot;
  /** Issue order, for preserve_ordering (-1: never issued). */
  order: number;
}

/** Queued after a sequence's last request when it is force-ended (idle, unload): frees the slot. */
const RELEASE = Symbol('release');
type SlotEntry = Pending | typeof RELEASE;

interface Slot {
  readonly lane: Lane;
  readonly index: number;
  readonly queue: SlotEntry[];
  /** The sequence bound to it; undefined = free for a new sequence. */
  seq?: Seq;
  /** oldest: a request of this slot is queued in or running on the instance. */
  inFlight: boolean;
}

interface Lane {
  readonly instance: ModelInstance;
  readonly slots: Slot[];
  busy: boolean;
  /** oldest: issued requests waiting to be batched, in issue order. */
  readonly ready: Pending[];
  timer?: NodeJS.Timeout;
  timerAt: bigint;
  /** With --rate-limit: its side of the rate limiter; it forms a batch only while it holds its resources. */
  readonly limit?: LimitedInstance;
  /** Waiting for its resources. */
  staged?: boolean;
  /** Holding them. */
  granted?: boolean;
}

interface Backlog {
  readonly seq: Seq;
  readonly queue: Pending[];
  expireAtNs?: bigint;
  timer?: NodeJS.Timeout;
  /** The server is unloading the model: the sequence ends after what it has queued. */
  forceEnd?: boolean;
}

/** A batch row: a request, or a "not ready" row keeping a direct slot's place. */
type Row = Pending | undefined;

const now = (): bigint => process.hrtime.bigint();

export class SequenceBatcher {
  private readonly lanes: Lane[];
  /** Sequences that can still receive requests (not ended), by correlation ID. */
  private readonly active = new Map<string, Seq>();
  private readonly backlog: Backlog[] = [];
  private freeSlots: number;
  private readonly batching: boolean;
  private readonly policy: SequencePolicy;
  private readonly idleNs: bigint;
  private readonly initial: Map<string, StateTensor>;
  private readonly stateOutputs: string[];
  private readonly controlBytes: Map<SequenceControl, [Uint8Array, Uint8Array]>;
  private reaper: NodeJS.Timeout | undefined;
  private closed = false;
  /** Accepted requests not yet answered. */
  private outstanding = 0;
  private readonly drained: (() => void)[] = [];
  /** Executions running (counted, not kept in a set: kernel/churn.ts). */
  private readonly inflight = new InFlight();
  private nextOrder = 0;
  private readonly ordering = new InOrder();
  /** iterative_sequence: the correlation ID the next request without one gets (Triton's counter from 1). */
  private nextIterativeId = 1n;

  constructor(
    instances: readonly ModelInstance[],
    private readonly model: SequenceModel,
    private readonly stats: ModelStats,
  ) {
    this.policy = model.policy;
    this.batching = model.maxBatchSize > 0;
    this.lanes = instances.map((instance, k) => {
      const limit = model.limited?.[k];
      const lane: Lane = { instance, slots: [], busy: false, ready: [], timerAt: 0n, ...(limit && { limit }) };
      for (let i = 0; i < this.policy.slotsPerInstance; i++) lane.slots.push({ lane, index: i, queue: [], inFlight: false });
      return lane;
    });
    this.freeSlots = this.lanes.length * this.policy.slotsPerInstance;
    this.idleNs = BigInt(this.policy.maxSequenceIdleUs) * 1000n;
    this.initial = new Map(this.policy.states.map((s) => [s.inputName, model.initialStates?.get(s.inputName) ?? zeroState(s)]));
    this.stateOutputs = this.policy.states.map((s) => s.outputName);
    this.controlBytes = new Map(
      this.policy.controls
        .filter((c) => c.kind !== 'CORRID')
        .map((c) => [c, [scalar(c.datatype, c.falseTrue[0]), scalar(c.datatype, c.falseTrue[1])]]),
    );
  }

  enqueue(req: SchedulerRequest): Promise<ScheduledOutput[]> {
    const model = this.model.name;
    if (this.closed) return Promise.reject(ServalError.unavailable('model is being unloaded'));
    if (req.batchSize > 1) {
      return Promise.reject(
        ServalError.invalidArg(`inference request to model '${model}' must specify batch-size 1 due to requirements of sequence batcher`),
      );
    }
    let flags = req.sequence;
    // An iterative sequence takes a request without a correlation ID as a whole sequence of its own.
    if (this.policy.iterative && (!flags || flags.id === 0n || flags.id === '')) {
      flags = { id: this.nextIterativeId++, start: true, end: false };
    }
    if (!flags || flags.id === 0n || flags.id === '') {
      return Promise.reject(
        ServalError.invalidArg(`inference request to model '${model}' must specify a non-zero or non-empty correlation ID`),
      );
    }
    const mismatch = corridMismatch(this.policy.controls, flags.id, model);
    if (mismatch) return Promise.reject(ServalError.invalidArg(mismatch));
    if (req.cancellation?.cancelled) return Promise.reject(ServalError.cancelled('request was cancelled before it was queued'));
    const key = typeof flags.id === 'string' ? `s${flags.id}` : `u${flags.id}`;
    let seq = this.active.get(key);
    if (!flags.start && !seq) {
      return Promise.reject(
        ServalError.invalidArg(
          `inference request for sequence ${flags.id} to model '${model}' must specify the START flag on the first request of the sequence`,
        ),
      );
    }
    const t = now();
    // A START for a sequence still in progress continues in its slot (Triton warns of a
    // correlation ID conflict): the earlier requests run, then the state starts over.
    if (!seq) seq = { id: flags.id, key, lastNs: t };
    seq.lastNs = t;
    if (flags.end) this.active.delete(key);
    else this.active.set(key, seq);
    req.admitted?.();

    return new Promise((resolve, reject) => {
      const p: Pending = {
        req,
        seq: seq!,
        start: flags.start,
        end: flags.end,
        queueStartNs: t,
        deliver: (out) => (out instanceof ServalError ? reject(out) : resolve(out)),
        dead: false,
        order: -1,
      };
      this.outstanding += 1;
      this.stats.pending += 1;
      if (req.trace?.tensors) for (const x of req.inputs) req.trace.tensor('TENSOR_QUEUE_INPUT', x.name, x.datatype, x.shape, x.data);
      req.cancellation?.onCancel(() => this.cancel(p));
      this.place(p);
      this.armReaper();
    });
  }

  /** Stops accepting requests, ends every sequence after what it has queued, and waits for all of it. */
  async drain(): Promise<void> {
    this.closed = true;
    for (const seq of this.active.values()) {
      if (seq.slot) seq.slot.queue.push(RELEASE);
      else if (seq.backlog) seq.backlog.forceEnd = true;
    }
    this.active.clear();
    for (const lane of this.lanes) this.kickLane(lane);
    while (this.outstanding > 0 || this.inflight.size > 0) {
      await new Promise<void>((r) => this.drained.push(r));
    }
    if (this.reaper) clearTimeout(this.reaper);
    for (const lane of this.lanes) if (lane.timer) clearTimeout(lane.timer);
  }

  // -- placing requests ------------------------------------------------------------------------

  private place(p: Pending): void {
    const seq = p.seq;
    if (seq.slot) {
      seq.slot.queue.push(p);
      this.kick(seq.slot);
      return;
    }
    if (!seq.backlog) {
      const slot = this.freeSlot();
      if (slot) {
        this.bind(slot, seq);
        slot.queue.push(p);
        this.kick(slot);
        return;
      }
      seq.backlog = { seq, queue: [] };
      this.backlog.push(seq.backlog);
    }
    const b = seq.backlog;
    b.queue.push(p);
    // The request's `timeout` bounds how long its sequence may wait for a slot.
    const timeoutUs = p.req.timeoutUs ?? 0;
    if (timeoutUs > 0) {
      const at = p.queueStartNs + BigInt(timeoutUs) * 1000n;
      if (b.expireAtNs === undefined || at < b.expireAtNs) {
        b.expireAtNs = at;
        if (b.timer) clearTimeout(b.timer);
        b.timer = setTimeout(() => this.expireBacklog(b), timeoutUs / 1000);
      }
    }
  }

  /** The free slot with the lowest index, spreading sequences over the instances. */
  private freeSlot(): Slot | undefined {
    if (this.freeSlots === 0) return undefined;
    for (let i = 0; i < this.policy.slotsPerInstance; i++) {
      for (const lane of this.lanes) if (!lane.slots[i]!.seq) return lane.slots[i];
    }
    return undefined;
  }

  private bind(slot: Slot, seq: Seq): void {
    slot.seq = seq;
    seq.slot = slot;
    this.freeSlots -= 1;
  }

  /** A slot's sequence has ended: the oldest backlogged sequence takes it, else it is free. */
  private release(slot: Slot): void {
    slot.seq = undefined;
    this.freeSlots += 1;
    const b = this.backlog.shift();
    if (!b) return;
    if (b.timer) clearTimeout(b.timer);
    b.seq.backlog = undefined;
    this.bind(slot, b.seq);
    // Waiting for a slot is not idleness of the client.
    b.seq.lastNs = now();
    slot.queue.push(...b.queue);
    if (b.forceEnd) slot.queue.push(RELEASE);
  }

  private expireBacklog(b: Backlog): void {
    const i = this.backlog.indexOf(b);
    if (i < 0) return;
    this.backlog.splice(i, 1);
    b.seq.backlog = undefined;
    if (this.active.get(b.seq.key) === b.seq) this.active.delete(b.seq.key);
    const err = ServalError.unavailable('timeout of the corresponding sequence has been expired');
    for (const p of b.queue) if (!p.dead) this.fail(p, err, 'REJECTED');
  }

  private kick(slot: Slot): void {
    if (this.policy.strategy === 'oldest') {
      if (!slot.inFlight) this.advance(slot);
      this.dispatchOldest(slot.lane);
    } else this.dispatchDirect(slot.lane);
  }

  private kickLane(lane: Lane): void {
    if (this.policy.strategy === 'oldest') {
      for (const slot of lane.slots) if (!slot.inFlight) this.advance(slot);
      this.dispatchOldest(lane);
    } else this.dispatchDirect(lane);
  }

  private cancel(p: Pending): void {
    if (p.dead) return;
    const slot = p.issuedFrom;
    if (slot) {
      // oldest: issued but not yet batched.
      const i = slot.lane.ready.indexOf(p);
      if (i < 0) return;
      slot.lane.ready.splice(i, 1);
      p.issuedFrom = undefined;
      this.fail(p, ServalError.cancelled('request was cancelled by the client while queued'), 'CANCELED');
      this.advance(slot);
      this.dispatchOldest(slot.lane);
      return;
    }
    // Still behind earlier requests of its sequence, or in the backlog: answered now, skipped
    // when reached (an END still ends the sequence then).
    this.fail(p, ServalError.cancelled('request was cancelled by the client while queued'), 'CANCELED');
    if (p.seq.slot) this.kick(p.seq.slot);
  }

  // -- the idle reaper -------------------------------------------------------------------------

  private armReaper(): void {
    if (this.reaper || this.active.size === 0) return;
    this.reaper = setTimeout(() => this.reap(), Number(this.idleNs / 1_000_000n) + 1);
    this.reaper.unref();
  }

  private reap(): void {
    this.reaper = undefined;
    const t = now();
    let nextNs = this.idleNs;
    for (const [key, seq] of this.active) {
      // A backlogged sequence is looked at again once it has a slot.
      if (!seq.slot) continue;
      const idle = t - seq.lastNs;
      if (idle >= this.idleNs) {
        this.active.delete(key);
        seq.slot.queue.push(RELEASE);
        this.kick(seq.slot);
      } else if (this.idleNs - idle < nextNs) nextNs = this.idleNs - idle;
    }
    if (this.active.size) {
      this.reaper = setTimeout(() => this.reap(), Number(nextNs / 1_000_000n) + 1);
      this.reaper.unref();
    }
  }

  // -- direct ----------------------------------------------------------------------------------

  private dispatchDirect(lane: Lane): void {
    if (lane.busy || !this.mayRun(lane)) return;
    for (const slot of lane.slots) this.skipDead(slot);
    let rep: Pending | undefined;
    let last = -1;
    let ready = 0;
    let earliest = 0n;
    for (const slot of lane.slots) {
      const front = slot.queue[0] as Pending | undefined;
      if (!front) continue;
      if (!rep || front.queueStartNs < earliest) earliest = front.queueStartNs;
      rep ??= front;
      ready += 1;
      last = slot.index;
    }
    if (!rep) return;
    const { maxQueueDelayNs, minimumSlotUtilization } = this.policy;
    if (maxQueueDelayNs > 0 && minimumSlotUtilization > 0) {
      const waited = now() - earliest;
      if (waited <= BigInt(maxQueueDelayNs) && ready / Math.max(1, this.model.maxBatchSize) < minimumSlotUtilization) {
        this.armTimer(lane, earliest + BigInt(maxQueueDelayNs) + 1n, (l) => this.dispatchDirect(l));
        return;
      }
    }
    // Rows whose shapes differ from the first request's wait for a later batch (no ragged batches).
    const repKey = this.shapeKey(rep);
    const rows: Row[] = [];
    for (let i = 0; i <= last; i++) {
      const slot = lane.slots[i]!;
      const front = slot.queue[0] as Pending | undefined;
      if (front && (front === rep || this.shapeKey(front) === repKey)) {
        slot.queue.shift();
        this.take(front);
        rows.push(front);
        if (front.end) this.release(slot);
      } else rows.push(undefined);
    }
    this.run(lane, rows);
  }

  /** Drops answered (cancelled) requests and release markers from the front of a slot's queue. */
  private skipDead(slot: Slot): void {
    for (let front = slot.queue[0]; front !== undefined; front = slot.queue[0]) {
      if (front === RELEASE) {
        slot.queue.shift();
        this.release(slot);
      } else if (front.dead) {
        slot.queue.shift();
        if (front.end) this.release(slot);
      } else return;
    }
  }

  /** Wakes `dispatch` for the lane at `atNs` (steady clock) unless an earlier wake-up is set. */
  private armTimer(lane: Lane, atNs: bigint, dispatch: (lane: Lane) => void): void {
    if (lane.timer && lane.timerAt <= atNs) return;
    if (lane.timer) clearTimeout(lane.timer);
    lane.timerAt = atNs;
    lane.timer = setTimeout(
      () => {
        lane.timer = undefined;
        dispatch(lane);
      },
      Math.max(0, Number(atNs - now()) / 1e6),
    );
  }

  // -- oldest ----------------------------------------------------------------------------------

  /**
   * A slot's previous request finished (or it had none): issue its next request to the instance's
   * queue, ending the sequence (and handing the slot to the backlog) after its END or a release.
   * The caller then dispatches, so requests issued together can batch together.
   */
  private advance(slot: Slot): void {
    for (;;) {
      slot.inFlight = false;
      const next = slot.queue.shift();
      if (next === undefined) break;
      if (next === RELEASE || next.dead) {
        if (next === RELEASE || next.end) this.release(slot);
        continue;
      }
      this.take(next);
      next.issuedFrom = slot;
      next.order = this.nextOrder++;
      slot.inFlight = true;
      slot.lane.ready.push(next);
      // Cancelling it now still withdraws it from the instance's queue.
      next.req.cancellation?.onCancel(() => this.cancel(next));
      if (next.end) this.release(slot);
      break;
    }
  }

  private dispatchOldest(lane: Lane): void {
    if (lane.busy || lane.ready.length === 0 || !this.mayRun(lane)) return;
    const head = lane.ready[0]!;
    let chosen: Pending[];
    if (!this.batching) chosen = [head];
    else {
      const headKey = this.shapeKey(head);
      const max = this.model.maxBatchSize;
      const candidates: Pending[] = [];
      for (const p of lane.ready) {
        if (candidates.length === max) break;
        if (p === head || this.shapeKey(p) === headKey) candidates.push(p);
      }
      let n = candidates.length;
      if (n < max) {
        const preferred = this.policy.preferredBatchSizes.filter((s) => s <= n);
        const delay = BigInt(this.policy.maxQueueDelayNs);
        if (this.policy.preferredBatchSizes.length && preferred.length) n = Math.max(...preferred);
        else if (delay > 0n && now() - head.queueStartNs < delay) {
          this.armTimer(lane, head.queueStartNs + delay, (l) => this.dispatchOldest(l));
          return;
        }
      }
      chosen = candidates.slice(0, n);
    }
    for (const p of chosen) {
      lane.ready.splice(lane.ready.indexOf(p), 1);
      p.req.cancellation?.onCancel(undefined);
    }
    this.run(lane, chosen);
  }

  // -- running a batch -------------------------------------------------------------------------

  /** A request leaves its queue for a batch: no more cancelling; START resets its state. */
  private take(p: Pending): void {
    p.req.cancellation?.onCancel(undefined);
    if (p.start) p.seq.state = undefined;
  }

  private stateOf(p: Pending, s: SequenceStateConfig): StateTensor {
    return (p.start ? undefined : p.seq.state?.get(s.inputName)) ?? this.initial.get(s.inputName)!;
  }

  /** Requests batch together only when their input and state shapes agree. */
  private shapeKey(p: Pending): string {
    let key = '';
    for (const t of p.req.inputs) key += `${t.name}:${(this.batching ? t.shape.slice(1) : t.shape).join(',')};`;
    for (const s of this.policy.states) key += `${s.inputName}:${this.stateOf(p, s).shape.join(',')};`;
    return key;
  }

  private run(lane: Lane, rows: Row[]): void {
    lane.busy = true;
    this.inflight.start();
    void this.execute(lane, rows).finally(() => {
      lane.busy = false;
      this.inflight.end();
      if (this.policy.strategy === 'oldest') for (const p of rows) if (p?.issuedFrom) this.advance(p.issuedFrom);
      if (lane.limit) {
        // Its next batch waits again before its resources go to another instance (Triton stages
        // an instance with pending work before it reallocates what the instance released).
        lane.granted = false;
        const again = this.hasWork(lane);
        lane.staged = again;
        lane.limit.release(true, again ? () => this.granted(lane) : undefined);
      }
      this.dispatch(lane);
      this.checkDrained();
    });
  }

  private dispatch(lane: Lane): void {
    if (this.policy.strategy === 'oldest') this.dispatchOldest(lane);
    else this.dispatchDirect(lane);
  }

  /** Rate limiting: whether the lane holds its resources; if not, it waits for them when it has work. */
  private mayRun(lane: Lane): boolean {
    const limit = lane.limit;
    if (!limit || lane.granted) return true;
    if (!lane.staged && this.hasWork(lane)) {
      lane.staged = true;
      limit.request(() => this.granted(lane));
    }
    return false;
  }

  /** The lane holds its resources: it forms a batch, or gives them back if it has none yet. */
  private granted(lane: Lane): void {
    lane.staged = false;
    lane.granted = true;
    this.dispatch(lane);
    if (!lane.busy) {
      lane.granted = false;
      lane.limit!.release(false);
    }
  }

  private hasWork(lane: Lane): boolean {
    return this.policy.strategy === 'oldest' ? lane.ready.length > 0 : lane.slots.some((s) => s.queue.length > 0);
  }

  private async execute(lane: Lane, rows: Row[]): Promise<void> {
    const rep = rows.find((r) => r !== undefined)!;
    const total = this.batching ? rows.length : 0;
    const dispatchNs = now();
    let result: ExecResult;
    let perRow: (ScheduledOutput[] | Error)[];
    try {
      result = await submit(
        lane.instance,
        rows.map((r) => this.rowInputs(r, rep)),
        total,
      ).result;
      this.stats.recordExecution(
        Math.max(1, total),
        result.computeInputNs,
        result.computeInferNs,
        result.computeOutputNs,
        lane.instance.placement.name,
      );
      perRow = result.responses
        ? result.responses.map((r) =>
            r instanceof Error ? r : r.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.dims, data: o.data })),
          )
        : scatter(
            result,
            rows.map(() => (this.batching ? 1 : 0)),
            this.batching,
          );
    } catch (e) {
      const err = asServalError(e);
      for (const p of rows) if (p) this.fail(p, err, 'BACKEND');
      return;
    }
    const end = now();
    const computeStartNs = result.computeStartNs !== undefined && result.computeStartNs > dispatchNs ? result.computeStartNs : dispatchNs;
    rows.forEach((p, i) => {
      if (!p) return;
      const produced = perRow[i] ?? [];
      if (produced instanceof Error) {
        this.fail(p, asServalError(produced), 'BACKEND');
        return;
      }
      p.seq.lastNs = end;
      if (!p.end && this.stateOutputs.length) this.keepState(p.seq, produced);
      const timing: RequestTiming = {
        requestStartNs: p.req.requestStartNs,
        queueStartNs: p.queueStartNs,
        computeStartNs,
        computeInputNs: result.computeInputNs,
        computeInferNs: result.computeInferNs,
        computeOutputNs: result.computeOutputNs,
      };
      this.stats.recordSuccess(1, timing, end);
      // Rescheduled (iterative sequence): each execution counts as Triton counts it, the answer comes later.
      if (result.rescheduled?.includes(i)) {
        this.reschedule(p);
        return;
      }
      p.req.secondaryStats?.recordSuccess(1, timing, end);
      const mine = produced.filter((o) => p.req.outputs.includes(o.name));
      if (p.req.trace) traceExecution(p.req.trace, timing, end, mine);
      this.settle(p, mine);
    });
  }

  /** One batch row: the request's inputs, then the controls, then the states, in config order. */
  private rowInputs(p: Row, rep: Pending): BatchInputs {
    const src = p ?? rep;
    const inputs: ScheduledInput[] = [...src.req.inputs];
    const shape = this.batching ? [1, 1] : [1];
    for (const c of this.policy.controls) {
      let data: Uint8Array;
      if (c.kind === 'CORRID') data = corrid(c.datatype, p ? p.seq.id : 0n);
      else {
        const on = p !== undefined && (c.kind === 'READY' || (c.kind === 'START' ? p.start : p.end));
        data = this.controlBytes.get(c)![on ? 1 : 0];
      }
      inputs.push({ name: c.input, datatype: c.datatype, shape, data });
    }
    for (const s of this.policy.states) {
      const st = this.stateOf(src, s);
      inputs.push({ name: s.inputName, datatype: s.datatype, shape: this.batching ? [1, ...st.shape] : [...st.shape], data: st.data });
    }
    const outputs = p ? [...new Set([...p.req.outputs, ...this.stateOutputs])] : [];
    if (!p) return { inputs, outputs };
    const { id, responses, cancellation, trace } = p.req;
    // An iterative sequence's request shows its own sequence fields: the ID it may have been given,
    // START only on its first execution.
    const parameters = this.policy.iterative
      ? { ...p.req.parameters, sequence_id: p.seq.id, sequence_start: p.start, sequence_end: p.end }
      : p.req.parameters;
    // A decoupled sequence model answers through the request's channel (implicit state is not kept for it).
    return { inputs, outputs, id, parameters, ...(responses && { responses, cancellation }), ...(trace && { trace }) };
  }

  private keepState(seq: Seq, produced: readonly ScheduledOutput[]): void {
    const next = new Map(seq.state);
    for (const s of this.policy.states) {
      const out = produced.find((o) => o.name === s.outputName);
      if (!out) continue;
      // The state outlives the response: its sender may not free it.
      keepMemory(out.data.buffer);
      next.set(s.inputName, { shape: this.batching ? out.shape.slice(1) : out.shape, data: out.data });
    }
    seq.state = next;
  }

  // -- iterative sequences ---------------------------------------------------------------------

  /**
   * The model released `p` with RESCHEDULE: it goes back to its sequence's queue as the next
   * request, neither START nor END, keeping its answer, response channel and cancellation (Triton
   * core's IterativeSequencer). A sequence that has ended (its request said END, it idled out, the
   * model is unloading) refuses it as Triton's batcher does (2.51 logs that and never answers).
   */
  private reschedule(p: Pending): void {
    const seq = p.seq;
    if (this.active.get(seq.key) !== seq) {
      this.fail(
        p,
        ServalError.invalidArg(
          `inference request for sequence ${seq.id} to model '${this.model.name}' must specify the START flag on the first request of the sequence`,
        ),
        'REJECTED',
      );
      return;
    }
    // The client cancelled while it ran: it goes no further.
    if (p.req.cancellation?.cancelled) {
      this.fail(p, ServalError.cancelled('request was cancelled by the client while queued'), 'CANCELED');
      return;
    }
    p.dead = true;
    // Its place in preserve_ordering's order is given up; it takes a new one when issued again.
    if (this.policy.preserveOrdering && p.order >= 0) this.inOrder(p.order, () => undefined);
    const next: Pending = { ...p, start: false, end: false, queueStartNs: now(), dead: false, issuedFrom: undefined, order: -1 };
    seq.lastNs = next.queueStartNs;
    next.req.cancellation?.onCancel(() => this.cancel(next));
    this.place(next);
  }

  /** An iterative sequence ends when its request is released for good (answered or failed). */
  private endIterative(seq: Seq): void {
    if (!this.policy.iterative || this.active.get(seq.key) !== seq) return;
    this.active.delete(seq.key);
    if (seq.slot) {
      seq.slot.queue.push(RELEASE);
      this.kick(seq.slot);
    } else if (seq.backlog) seq.backlog.forceEnd = true;
  }

  // -- answering -------------------------------------------------------------------------------

  private fail(p: Pending, err: ServalError, reason: FailureReason): void {
    if (p.dead) return;
    p.dead = true;
    this.endIterative(p.seq);
    p.req.cancellation?.onCancel(undefined);
    p.req.trace?.stamp('QUEUE_START', p.queueStartNs);
    this.stats.pending -= 1;
    this.stats.recordFailure(p.req.requestStartNs, now(), reason);
    this.answer(p, err);
  }

  private settle(p: Pending, out: ScheduledOutput[]): void {
    p.dead = true;
    this.endIterative(p.seq);
    this.stats.pending -= 1;
    this.answer(p, out);
  }

  /** Delivers an answer, in issue order when the oldest strategy preserves ordering. */
  private answer(p: Pending, out: ScheduledOutput[] | ServalError): void {
    this.outstanding -= 1;
    if (!this.policy.preserveOrdering || p.order < 0) p.deliver(out);
    else this.inOrder(p.order, () => p.deliver(out));
    this.checkDrained();
  }

  /** Runs `deliver` once every answer issued before `order` has been delivered. */
  private inOrder(order: number, deliver: () => void): void {
    this.ordering.deliver(order, deliver);
  }

  private checkDrained(): void {
    if (this.outstanding > 0 || this.inflight.size > 0) return;
    for (const r of this.drained.splice(0)) r();
  }
}

/**
 * The control and state inputs of a request that is a whole sequence by itself (START, END and
 * READY true, CORRID 0, every state at its initial value), for `rows` batch rows: what a warm-up
 * sample runs with for those it does not name. Warm-up bypasses the batcher, as in Triton, so no
 * slot, sequence or state is touched.
 */
export function standaloneSequenceInputs(model: SequenceModel, rows: number, named: ReadonlySet<string>): ScheduledInput[] {
  const batching = model.maxBatchSize > 0;
  const out: ScheduledInput[] = [];
  for (const c of model.policy.controls) {
    if (named.has(c.input)) continue;
    const one = c.kind === 'CORRID' ? corrid(c.datatype, 0n) : scalar(c.datatype, c.falseTrue[1]);
    out.push({ name: c.input, datatype: c.datatype, shape: batching ? [rows, 1] : [1], data: tile(one, rows) });
  }
  for (const s of model.policy.states) {
    if (named.has(s.inputName)) continue;
    const st = model.initialStates?.get(s.inputName) ?? zeroState(s);
    out.push({ name: s.inputName, datatype: s.datatype, shape: batching ? [rows, ...st.shape] : [...st.shape], data: tile(st.data, rows) });
  }
  return out;
}

function tile(one: Uint8Array, rows: number): Uint8Array {
  const out = new Uint8Array(one.byteLength * rows);
  for (let i = 0; i < rows; i++) out.set(one, i * one.byteLength);
  return out;
}

/** A state's zeros for a sequence's first request (BYTES: empty strings). */
function zeroState(s: SequenceStateConfig): StateTensor {
  const shape = s.initial.dims;
  const n = elementCount(shape);
  return { shape, data: new Uint8Array(s.datatype === 'BYTES' ? 4 * n : n * elementSize(s.datatype)) };
}

/** One element of a boolean control. */
function scalar(dt: DataType, v: number): Uint8Array {
  const b = Buffer.alloc(elementSize(dt));
  if (dt === 'INT32') b.writeInt32LE(v);
  else if (dt === 'FP32') b.writeFloatLE(v);
  else b[0] = v ? 1 : 0;
  return b;
}

/**
 * Triton's refusal of a correlation ID whose kind differs from the model's CORRID control: a
 * string ID for a numeric control, or a number for a TYPE_STRING one (any integer control takes
 * a numeric ID). Undefined when it matches or the model has no CORRID control.
 */
export function corridMismatch(controls: readonly SequenceControl[], id: bigint | string, model: string): string | undefined {
  const control = controls.find((c) => c.kind === 'CORRID');
  if (!control) return undefined;
  const given = typeof id === 'string' ? 'BYTES' : 'UINT64';
  if ((given === 'BYTES') === (control.datatype === 'BYTES')) return undefined;
  return `sequence batching control 'CORRID' data-type is '${given}', but model '${model}' expects '${control.datatype}'`;
}

/** The CORRID control's element: the ID in the control's type (a string ID in a numeric control is 0). */
function corrid(dt: DataType, id: bigint | string): Uint8Array {
  if (dt === 'BYTES') return joinBytes([String(id)]);
  const n = typeof id === 'bigint' ? id : 0n;
  const b = Buffer.alloc(elementSize(dt));
  if (dt === 'UINT64') b.writeBigUInt64LE(BigInt.asUintN(64, n));
  else if (dt === 'INT64') b.writeBigInt64LE(BigInt.asIntN(64, n));
  else if (dt === 'UINT32') b.writeUInt32LE(Number(BigInt.asUintN(32, n)));
  else b.writeInt32LE(Number(BigInt.asIntN(32, n)));
  return b;
}
