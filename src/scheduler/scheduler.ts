// Per-model scheduling between the core and the instances. Without dynamic batching every
// request runs alone on the next free instance (Triton's default scheduler); with it, queued
// requests of compatible shapes are merged into one execution (Triton's dynamic batcher).
import type {
  BatchRequest,
  ExecLayout,
  ExecResult,
  Execution,
  ExecutionFailure,
  ModelInstance,
  Reservation,
  ResponseChannel,
  TensorSlot,
} from '../backends/backend.js';
import type { BatchingPolicy, RaggedBatching } from '../config/resolved.js';
import type { Cancellation } from '../kernel/cancel.js';
import { InFlight, InOrder } from '../kernel/churn.js';
import { type DataType, elementCount, elementSize } from '../kernel/datatypes.js';
import { asServalError, ServalError } from '../kernel/errors.js';
import type { RequestTrace } from '../kernel/trace.js';
import type { Params } from '../kernel/types.js';
import type { FailureReason, ModelStats, RequestTiming } from '../stats/model_stats.js';
import { LatencyBudget } from './latency_budget.js';
import { type Entry, PriorityQueue } from './queue.js';
import { batchInputTensor, raggedLength, scatterBatchOutput } from './ragged.js';
import type { LimitedInstance } from './rate_limiter.js';
import type { ServerLoad } from './server_load.js';

/** A validated request as the scheduler sees it: tensors already in the model's shapes. */
export interface ScheduledInput {
  name: string;
  datatype: DataType;
  /** Full shape given to the model, batch dimension first when the model batches. */
  shape: number[];
  data: Uint8Array;
}

export interface ScheduledOutput {
  name: string;
  datatype: DataType;
  shape: number[];
  data: Uint8Array;
}

export interface SchedulerRequest {
  /** 0 for a model without batching, else the request's own batch size. */
  batchSize: number;
  inputs: ScheduledInput[];
  outputs: string[];
  requestStartNs: bigint;
  /** Request parameter `priority` (0 = the model's default level). */
  priority?: number;
  /** Request parameter `timeout`, in microseconds (0 = none). */
  timeoutUs?: number;
  cancellation?: Cancellation;
  /** A sampled request: the scheduler stamps its queue and compute times (and tensors) on it. */
  trace?: RequestTrace;
  /** Also records the request's success and compute times (an ensemble sums its steps' there). */
  secondaryStats?: ModelStats;
  /** The request's id and parameters, for backends that see each request (Python). */
  id?: string;
  parameters?: Params;
  /** Request parameters sequence_id (0n / '' = none), sequence_start, sequence_end: the sequence batcher's. */
  sequence?: { id: bigint | string; start: boolean; end: boolean };
  /** The request's own memory its inputs may lie in (InferRequest.ownMemory): an instance may take it over. */
  ownMemory?: ArrayBuffer;
  /** Called once it is queued (InferRequest.admitted). */
  admitted?: () => void;
  /**
   * A decoupled model's request: its responses go here as the model sends them; enqueue() then
   * resolves with no outputs once the execution has returned.
   */
  responses?: ResponseChannel;
}

/** What a batch is assembled from: each request's inputs in the same (model) order. */
export type BatchInputs = Pick<
  SchedulerRequest,
  'inputs' | 'outputs' | 'id' | 'parameters' | 'ownMemory' | 'responses' | 'cancellation' | 'trace'
>;

interface Queued extends Entry {
  req: SchedulerRequest;
  /** Shapes without the batch dimension; requests batch together only when these match. */
  key: string;
  queueStartNs: bigint;
  resolve: (o: ScheduledOutput[]) => void;
  reject: (e: ServalError) => void;
  /** Arrival order, for preserve_ordering. */
  seq: number;
}

const now = (): bigint => process.hrtime.bigint();
const cancelledWhileQueued = (): ServalError => ServalError.cancelled('request was cancelled by the client while queued');
const ALIGN = 64;

export class Scheduler {
  private readonly queue: PriorityQueue<Queued>;
  private nextSeq = 0;
  /** preserve_ordering: settlements wait for earlier requests'. */
  private readonly ordering = new InOrder();
  /** Executions each instance is running or holding (at most its capacity). */
  private readonly busy: Map<ModelInstance, number>;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0n;
  private closed = false;
  /** Executions running (counted, not kept in a set: kernel/churn.ts). */
  private readonly inflight = new InFlight();
  /** The latency-budget batcher: sets the queue delay when the model has a p99 target. */
  private readonly budget: LatencyBudget | undefined;
  /** Batches at least this large are full: a longer delay cannot make them larger. */
  private readonly fullBatch: number;
  /** With --rate-limit: each instance's side of the rate limiter, and those waiting for resources. */
  private readonly limits: Map<ModelInstance, LimitedInstance> | undefined;
  private readonly staged = new Set<ModelInstance>();

  constructor(
    instances: readonly ModelInstance[],
    private readonly policy: BatchingPolicy,
    private readonly stats: ModelStats,
    limited?: readonly LimitedInstance[],
    private readonly load?: ServerLoad,
  ) {
    this.busy = new Map(instances.map((i) => [i, 0]));
    if (limited) this.limits = new Map(instances.map((inst, k) => [inst, limited[k]!]));
    this.queue = new PriorityQueue<Queued>(policy.queue);
    const preferred = policy.preferredBatchSizes.length ? policy.preferredBatchSizes : [policy.maxBatchSize];
    this.fullBatch = Math.max(1, ...preferred);
    if (policy.dynamic && policy.latencyBudget) {
      const budget = new LatencyBudget(policy.latencyBudget, now);
      this.budget = budget;
      stats.adaptiveQueueDelayNs = () => budget.delayNs();
    }
  }

  private pend(n: 1 | -1): void {
    this.stats.pending += n;
    if (this.load) this.load.pending += n;
  }

  /**
   * The next execution is its model's only request, and the server has at most one other (the
   * request of a model calling this one by BLS): ExecLayout.lone.
   */
  private lone(): boolean {
    return this.stats.pending === 1 && (this.load?.pending ?? 1) <= 2;
  }

  enqueue(req: SchedulerRequest): Promise<ScheduledOutput[]> {
    if (this.closed) return Promise.reject(ServalError.unavailable('model is being unloaded'));
    return new Promise((resolve, reject) => {
      const item: Queued = {
        req,
        key: this.policy.dynamic ? batchKey(req, this.policy.ragged) : '',
        queueStartNs: now(),
        resolve: (o) => this.settle(item, () => resolve(o)),
        reject: (e) => this.settle(item, () => reject(e)),
        priority: req.priority ?? 0,
        timeoutUs: req.timeoutUs ?? 0,
        expire: (err) => this.fail(item, err, 'REJECTED'),
        seq: -1,
      };
      if (req.cancellation?.cancelled) {
        reject(ServalError.cancelled('request was cancelled before it was queued'));
        return;
      }
      try {
        this.queue.push(item);
      } catch (e) {
        this.stats.recordFailure(req.requestStartNs, now(), 'REJECTED');
        reject(e);
        return;
      }
      req.admitted?.();
      req.cancellation?.onCancel(() => this.cancel(item));
      if (req.trace?.tensors) for (const t of req.inputs) req.trace.tensor('TENSOR_QUEUE_INPUT', t.name, t.datatype, t.shape, t.data);
      item.seq = this.nextSeq++;
      this.pend(1);
      this.dispatch();
    });
  }

  /** Stops accepting requests and waits for queued and running ones to finish. */
  async drain(): Promise<void> {
    this.closed = true;
    while (this.queue.size || this.inflight.size) {
      await this.inflight.idle();
      if (this.queue.size && !this.inflight.size) this.dispatch();
      if (this.queue.size && !this.inflight.size) {
        await new Promise((r) => setTimeout(r, 1));
      }
    }
  }

  private cancel(item: Queued): void {
    // Already executing: it completes normally.
    if (this.queue.remove(item)) this.fail(item, cancelledWhileQueued(), 'CANCELED');
  }

  /** A request that leaves the queue without executing. */
  private fail(item: Queued, err: ServalError, reason: FailureReason): void {
    item.req.cancellation?.onCancel(undefined);
    item.req.trace?.stamp('QUEUE_START', item.queueStartNs);
    this.pend(-1);
    this.stats.recordFailure(item.req.requestStartNs, now(), reason);
    item.reject(err);
  }

  /** Delivers a result, in arrival order when preserve_ordering is set. */
  private settle(item: Queued, deliver: () => void): void {
    if (!this.policy.preserveOrdering) {
      deliver();
      return;
    }
    this.ordering.deliver(item.seq, deliver);
  }

  /**
   * The least busy instance with room: an idle one first. Without dynamic batching, else one
   * that can hold the next request behind its running one, so the instance never waits for the
   * main thread between requests (a held request can still be withdrawn on cancel). The dynamic
   * batcher keeps batches in its queue until an instance is idle: priorities, queue policies
   * and batch forming all act on that queue.
   */
  private freeInstance(): ModelInstance | undefined {
    let best: ModelInstance | undefined;
    let load = Infinity;
    for (const [inst, n] of this.busy) {
      const room = this.policy.dynamic ? 1 : inst.capacity;
      if (n < room && n < load) {
        best = inst;
        load = n;
      }
    }
    return best;
  }

  private dispatch(): void {
    if (this.limits) {
      this.dispatchLimited(this.limits);
      return;
    }
    while (this.queue.size) {
      const instance = this.freeInstance();
      if (!instance) return;
      const batch = this.nextBatch();
      if (!batch) return;
      this.busy.set(instance, this.busy.get(instance)! + 1);
      this.inflight.start();
      void this.execute(instance, batch).finally(() => {
        this.inflight.end();
        this.busy.set(instance, this.busy.get(instance)! - 1);
        this.dispatch();
      });
    }
  }

  /**
   * Rate-limited dispatch: an idle instance waits for its resources (staged) while queued requests
   * outnumber the instances already waiting; it runs one execution at a time, as Triton's do, so
   * its resources are held only while it computes.
   */
  private dispatchLimited(limits: Map<ModelInstance, LimitedInstance>): void {
    let wanted = this.queue.size - this.staged.size;
    for (const [inst, n] of this.busy) {
      if (wanted <= 0) return;
      if (n > 0 || this.staged.has(inst)) continue;
      this.staged.add(inst);
      wanted--;
      limits.get(inst)!.request(() => this.granted(inst, limits.get(inst)!));
    }
  }

  /** The instance holds its resources: runs the next batch on it, or gives them back if there is none yet. */
  private granted(instance: ModelInstance, limit: LimitedInstance): void {
    this.staged.delete(instance);
    const batch = this.queue.size ? this.nextBatch() : undefined;
    if (!batch) {
      limit.release(false);
      return;
    }
    this.busy.set(instance, 1);
    this.inflight.start();
    void this.execute(instance, batch).finally(() => {
      this.inflight.end();
      this.busy.set(instance, 0);
      // With more queued, it waits again before its resources are given to anyone else.
      const again = this.queue.size > this.staged.size;
      if (again) this.staged.add(instance);
      limit.release(true, again ? () => this.granted(instance, limit) : undefined);
      this.dispatch();
    });
  }

  /**
   * Picks the next batch from the queue head, or undefined to keep waiting (and arms the delay
   * timer). Triton's GetDynamicBatch, rule by rule (docs/batching.md): walk the queue in service
   * order, stop at the first request that would overflow max_batch_size or whose shapes cannot
   * join the pending batch; remember the last point where the pending size was preferred, or the
   * point just before it grew past the largest preferred size; then send that at once unless the
   * queue delay has passed (then everything pending goes), send everything if the walk was
   * stopped or the batch cannot grow towards a preferred size, else wait out the delay.
   */
  private nextBatch(): Queued[] | undefined {
    const { dynamic, maxBatchSize } = this.policy;
    // Triton's rule with the latency-budget batcher's delay in place of the configured one.
    const maxQueueDelayNs = this.budget ? this.budget.delayNs() : this.policy.maxQueueDelayNs;
    const head = this.queue.first()!;
    if (!dynamic || head.req.batchSize === 0) return this.take([head]);
    // Triton fills an empty preferred_batch_size with max_batch_size.
    const preferred = this.policy.preferredBatchSizes.length ? this.policy.preferredBatchSizes : [maxBatchSize];
    const maxPreferred = Math.max(...preferred);

    const pending: Queued[] = [];
    let size = 0;
    let best = 0; // requests up to the marked point
    let sendNow = false;
    let oldest = head.queueStartNs;
    for (const q of this.queue.ordered()) {
      const b = Math.max(1, q.req.batchSize);
      if (pending.length) {
        if (size + b > maxPreferred && best === 0) best = pending.length;
        if (size + b > maxBatchSize || q.key !== head.key) {
          sendNow = true;
          break;
        }
      }
      pending.push(q);
      size += b;
      if (q.queueStartNs < oldest) oldest = q.queueStartNs;
      if (preferred.includes(size)) best = pending.length;
    }

    const delayExceeded = maxQueueDelayNs > 0 && now() - oldest >= BigInt(maxQueueDelayNs);
    if (best > 0 && !delayExceeded) return this.take(pending.slice(0, best));
    if (sendNow || size >= maxPreferred || delayExceeded || maxQueueDelayNs <= 0) return this.take(pending);
    this.armTimer(oldest + BigInt(maxQueueDelayNs));
    return undefined;
  }

  private take(items: Queued[]): Queued[] {
    for (const q of items) this.queue.remove(q);
    for (const q of items) q.req.cancellation?.onCancel(undefined);
    return items;
  }

  private armTimer(atNs: bigint): void {
    if (this.timer && this.timerAt <= atNs) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = atNs;
    const ms = Math.max(0, Number(atNs - now()) / 1e6);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.dispatch();
    }, ms);
  }

  private async execute(instance: ModelInstance, batch: Queued[]): Promise<void> {
    const dispatchNs = now();
    const batching = batch[0]!.req.batchSize > 0;
    const total = batching ? batch.reduce((s, q) => s + q.req.batchSize, 0) : 0;
    let result: ExecResult;
    let perRequest: ScheduledOutput[][];
    // A batch held inside the instance behind a running one has not started: cancelling one of
    // its requests withdraws it and fails it at once, as if it had still been queued. Its slot
    // stays taken until the instance skips it, so `busy` is released only when execute settles.
    let withdrawn = false;
    // Only the withdraw listener set here is cleared after, and only while it is still the
    // request's: once a held execution starts, a decoupled (or any cancellable) request's
    // cancellation belongs to the instance (BatchRequest.cancellation), which has set its own.
    let withdraw: (() => void) | undefined;
    const failAll = (err: ServalError, reason: FailureReason): void => {
      for (const q of batch) this.fail(q, err, reason);
    };
    try {
      try {
        const execution = submit(
          instance,
          batch.map((q) => q.req),
          total,
          this.policy.ragged,
          this.lone(),
        );
        if (execution.held) {
          withdraw = () => {
            if (withdrawn || !execution.withdraw()) return;
            withdrawn = true;
            failAll(cancelledWhileQueued(), 'CANCELED');
          };
          for (const q of batch) q.req.cancellation?.onCancel(withdraw);
        }
        result = await execution.result;
      } finally {
        if (withdraw) for (const q of batch) q.req.cancellation?.offCancel(withdraw);
      }
      this.stats.recordExecution(
        Math.max(1, total),
        result.computeInputNs,
        result.computeInferNs,
        result.computeOutputNs,
        instance.placement.name,
      );
      this.budget?.executed(result.computeInputNs + result.computeInferNs + result.computeOutputNs, this.busy.size);
      perRequest = result.responses
        ? own(result.responses, batch.length)
        : scatter(
            result,
            batch.map((q) => q.req.batchSize),
            batching,
            this.policy.ragged && { spec: this.policy.ragged, reqs: batch.map((q) => q.req) },
          );
    } catch (e) {
      // A model that ran and failed (it raised) still made an execution, as Triton's Python backend counts it.
      const ran = (e as ExecutionFailure).executed;
      if (ran)
        this.stats.recordExecution(
          Math.max(1, total),
          ran.computeInputNs,
          ran.computeInferNs,
          ran.computeOutputNs,
          instance.placement.name,
        );
      if (!withdrawn) failAll(asServalError(e), 'BACKEND');
      return;
    }
    const end = now();
    // Time held inside a busy instance is queue time, as Triton counts it.
    const computeStartNs = result.computeStartNs !== undefined && result.computeStartNs > dispatchNs ? result.computeStartNs : dispatchNs;
    batch.forEach((q, i) => {
      const timing: RequestTiming = {
        requestStartNs: q.req.requestStartNs,
        queueStartNs: q.queueStartNs,
        computeStartNs,
        computeInputNs: result.computeInputNs,
        computeInferNs: result.computeInferNs,
        computeOutputNs: result.computeOutputNs,
      };
      this.pend(-1);
      this.stats.recordSuccess(Math.max(1, q.req.batchSize), timing, end);
      q.req.secondaryStats?.recordSuccess(Math.max(1, q.req.batchSize), timing, end);
      this.budget?.observe(Number(end - q.req.requestStartNs), total >= this.fullBatch);
      const failed = result.responses?.[i];
      if (failed instanceof Error) {
        // One request of the batch answered with an error (Python's InferenceResponse(error=...)):
        // the client gets the error, and the statistics a success, as Triton's Python backend
        // reports the request (it executed; docs/reference/decoupled.md, statistics).
        q.reject(asServalError(failed));
        return;
      }
      // The batch computed the union of its requests' outputs; each gets only its own.
      const all = perRequest[i]!;
      const mine = all.length === q.req.outputs.length ? all : all.filter((o) => q.req.outputs.includes(o.name));
      if (q.req.trace) traceExecution(q.req.trace, timing, end, mine);
      q.resolve(mine);
    });
  }
}

/**
 * A sampled request's queue and compute timestamps, from the times the scheduler already took and
 * the durations the instance measured: compute input ends computeInputNs after compute starts,
 * output starts computeInferNs later, compute ends computeOutputNs after that (never after the
 * result was back on this thread).
 */
export function traceExecution(trace: RequestTrace, t: RequestTiming, endNs: bigint, outputs: readonly ScheduledOutput[]): void {
  const at = (ns: bigint): bigint => (ns < endNs ? ns : endNs);
  const inputEnd = at(t.computeStartNs + BigInt(Math.round(t.computeInputNs)));
  const outputStart = at(inputEnd + BigInt(Math.round(t.computeInferNs)));
  trace.stamp('QUEUE_START', t.queueStartNs);
  trace.stamp('COMPUTE_START', t.computeStartNs);
  trace.stamp('COMPUTE_INPUT_END', inputEnd);
  trace.stamp('COMPUTE_OUTPUT_START', outputStart);
  trace.stamp('COMPUTE_END', at(outputStart + BigInt(Math.round(t.computeOutputNs))));
  if (trace.tensors) for (const o of outputs) trace.tensor('TENSOR_BACKEND_OUTPUT', o.name, o.datatype, o.shape, o.data);
}

/** Per-request outputs from a backend that answered each request itself; errors stay for the caller. */
function own(responses: readonly (ExecResult['outputs'] | Error)[], count: number): ScheduledOutput[][] {
  if (responses.length !== count) {
    throw ServalError.internal(`the backend answered ${responses.length} requests of a batch of ${count}`);
  }
  return responses.map((r) =>
    r instanceof Error ? [] : r.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.dims, data: o.data })),
  );
}

/**
 * Copies every request's inputs into one buffer (the main thread's only copy on the way in),
 * from `alloc`: the instance's own input memory when it has some.
 */
export function assemble(
  reqs: readonly BatchInputs[],
  totalBatch: number,
  alloc: (byteLength: number) => Uint8Array = (n) => new Uint8Array(n),
  ragged?: RaggedBatching,
): ExecLayout & { data: Uint8Array } {
  const first = reqs[0]!;
  // One request's outputs are unique already (validated); a batch's are the union of its requests'.
  const outputs = reqs.length === 1 ? first.outputs.slice() : [...new Set(reqs.flatMap((r) => r.outputs))];
  // batch_input tensors the model gets besides the requests' own (ragged batching).
  const extra = ragged?.batchInputs.map((spec) => batchInputTensor(spec, reqs)) ?? [];
  let size = 0;
  const offsets: number[] = [];
  for (let i = 0; i < first.inputs.length; i++) {
    offsets.push(size);
    for (const r of reqs) size += r.inputs[i]!.data.byteLength;
    size = Math.ceil(size / ALIGN) * ALIGN;
  }
  const extraOffsets = extra.map((t) => {
    const at = size;
    size = Math.ceil((size + t.data.byteLength) / ALIGN) * ALIGN;
    return at;
  });
  const bytes = alloc(size);
  const requests = batchRequests(reqs, totalBatch);
  const inputs: TensorSlot[] = first.inputs.map((inp, i) => {
    let off = offsets[i]!;
    for (const r of reqs) {
      bytes.set(r.inputs[i]!.data, off);
      off += r.inputs[i]!.data.byteLength;
    }
    return {
      name: inp.name,
      datatype: inp.datatype,
      dims: batchDims(inp, reqs, totalBatch, ragged),
      offset: offsets[i]!,
      byteLength: off - offsets[i]!,
    };
  });
  extra.forEach((t, k) => {
    bytes.set(t.data, extraOffsets[k]!);
    inputs.push({ name: t.name, datatype: t.datatype, dims: t.dims, offset: extraOffsets[k]!, byteLength: t.data.byteLength });
  });
  return { data: bytes, inputs, outputs, requests };
}

/** The batch's requests as a backend that answers each on its own sees them. */
function batchRequests(reqs: readonly BatchInputs[], totalBatch: number): BatchRequest[] {
  return reqs.map((r) => {
    const b: BatchRequest = {
      id: r.id ?? '',
      parameters: r.parameters ?? {},
      batchSize: totalBatch > 0 ? (reqs.length === 1 ? totalBatch : (r.inputs[0]?.shape[0] ?? 0)) : 0,
      inputBytes: r.inputs.map((t) => t.data.byteLength),
      outputs: r.outputs,
    };
    // Set only when present (no spread of a temporary object per field).
    if (r.responses) b.responses = r.responses;
    if (r.cancellation) b.cancellation = r.cancellation;
    if (r.trace) b.trace = r.trace;
    return b;
  });
}

/** The shape the model gets for input `inp` of the batch. */
function batchDims(inp: ScheduledInput, reqs: readonly BatchInputs[], totalBatch: number, ragged: RaggedBatching | undefined): number[] {
  // A ragged input reaches the model as one 1-D tensor of every request's elements.
  if (ragged?.raggedInputs.has(inp.name)) return [raggedLength(reqs, inp.name)];
  return totalBatch > 0 ? [totalBatch, ...inp.shape.slice(1)] : [...inp.shape];
}

/**
 * Where each input of a lone request will lie in its own memory once aligned for its element
 * type (a typed view of misaligned bytes would be a copy in the backend): the offsets, or
 * undefined when an input is outside that memory or aligning it would overwrite another input.
 */
export function adoptedOffsets(inputs: readonly ScheduledInput[], memory: ArrayBuffer): number[] | undefined {
  if (!inputs.every((t) => t.data.buffer === memory)) return undefined;
  const order = inputs.map((_, i) => i).sort((a, b) => inputs[a]!.data.byteOffset - inputs[b]!.data.byteOffset);
  const offsets: number[] = [];
  let end = 0;
  for (const i of order) {
    const t = inputs[i]!;
    const size = t.datatype === 'BYTES' ? 1 : elementSize(t.datatype);
    const at = t.data.byteOffset - (t.data.byteOffset % size);
    if (at < end) return undefined;
    offsets[i] = at;
    end = at + t.data.byteLength;
  }
  return offsets;
}

/**
 * A lone request whose inputs lie in memory of its own runs from that memory, which the
 * instance takes over (ModelInstance.adopt): the main thread copies none of its inputs.
 * Undefined when the request or the instance does not allow it.
 */
function adopt(
  instance: ModelInstance,
  reqs: readonly BatchInputs[],
  totalBatch: number,
  ragged: RaggedBatching | undefined,
  lone: boolean,
): Execution | undefined {
  const req = reqs[0]!;
  const memory = req.ownMemory;
  if (reqs.length !== 1 || !memory || ragged || !instance.adopt) return undefined;
  const offsets = adoptedOffsets(req.inputs, memory);
  if (!offsets) return undefined;
  const reservation = instance.adopt(memory);
  if (!reservation) return undefined;
  try {
    // Each input moves at most a few bytes down, into the gap before it; in increasing offset
    // order, so no input is overwritten before it has moved (the request may list its inputs
    // in any order).
    const bytes = new Uint8Array(memory);
    const order = req.inputs.map((_, i) => i).sort((a, b) => offsets[a]! - offsets[b]!);
    for (const i of order) {
      const from = req.inputs[i]!.data;
      if (offsets[i] !== from.byteOffset) bytes.copyWithin(offsets[i]!, from.byteOffset, from.byteOffset + from.byteLength);
    }
    const inputs: TensorSlot[] = req.inputs.map((inp, i) => {
      const at = offsets[i]!;
      return {
        name: inp.name,
        datatype: inp.datatype,
        dims: batchDims(inp, reqs, totalBatch, ragged),
        offset: at,
        byteLength: inp.data.byteLength,
      };
    });
    const layout: ExecLayout = { inputs, outputs: req.outputs, requests: batchRequests(reqs, totalBatch) };
    if (lone) layout.lone = true;
    return reservation.execute(layout);
  } catch (e) {
    reservation.release();
    throw e;
  }
}

/** Assembles a batch straight into a reservation of `instance` and starts it. */
/** `lone`: the batch is the model's only request in the server (ExecLayout.lone). */
export function submit(
  instance: ModelInstance,
  reqs: readonly BatchInputs[],
  totalBatch: number,
  ragged?: RaggedBatching,
  lone = false,
): Execution {
  const adopted = adopt(instance, reqs, totalBatch, ragged, lone);
  if (adopted) return adopted;
  let reservation: Reservation | undefined;
  const alloc = (n: number): Uint8Array => {
    reservation = instance.reserve(n);
    return reservation.buffer;
  };
  try {
    const { inputs, outputs, requests } = assemble(reqs, totalBatch, alloc, ragged);
    const layout: ExecLayout = { inputs, outputs, requests };
    if (lone) layout.lone = true;
    return reservation!.execute(layout);
  } catch (e) {
    reservation?.release();
    throw e;
  }
}

/** Splits each output along the batch dimension into per-request views (no copies). */
export function scatter(
  result: ExecResult,
  batchSizes: number[],
  batching: boolean,
  ragged?: { spec: RaggedBatching; reqs: readonly BatchInputs[] },
): ScheduledOutput[][] {
  const per: ScheduledOutput[][] = batchSizes.map(() => []);
  for (const out of result.outputs) {
    const bytes = out.data;
    const batchOutput = ragged?.spec.batchOutputs.find((b) => b.targetName === out.name);
    if (batchOutput) {
      scatterBatchOutput(out, batchOutput, ragged!.reqs).forEach((o, i) => {
        per[i]!.push(o);
      });
      continue;
    }
    if (!batching) {
      per[0]!.push({ name: out.name, datatype: out.datatype, shape: out.dims, data: bytes });
      continue;
    }
    const total = batchSizes.reduce((a, b) => a + b, 0);
    if (out.dims[0] !== total) {
      throw ServalError.internal(`output '${out.name}' has batch dimension ${out.dims[0]} but the batch held ${total} items`);
    }
    const rest = out.dims.slice(1);
    const perItem = elementCount(rest);
    let offset = 0;
    const cuts = out.datatype === 'BYTES' ? bytesCuts(bytes, perItem, batchSizes) : undefined;
    batchSizes.forEach((b, i) => {
      const len = cuts ? cuts[i]! : (bytes.byteLength / total) * b;
      per[i]!.push({ name: out.name, datatype: out.datatype, shape: [b, ...rest], data: bytes.subarray(offset, offset + len) });
      offset += len;
    });
  }
  return per;
}

/**
 * Requests batch together only when these match: the input names present and the shapes after
 * the batch dimension, except of ragged inputs (Triton checks equal shapes only for inputs that
 * are not allow_ragged_batch).
 */
function batchKey(req: SchedulerRequest, ragged: RaggedBatching | undefined): string {
  return req.inputs
    .map((i) => (ragged?.raggedInputs.has(i.name) ? `${i.name}:*` : `${i.name}:${i.shape.slice(req.batchSize ? 1 : 0).join(',')}`))
    .join(';');
}

/** Byte length of each request's share of a serialized BYTES tensor. */
function bytesCuts(bytes: Uint8Array, perItem: number, batchSizes: number[]): number[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let off = 0;
  return batchSizes.map((b) => {
    const start = off;
    for (let e = 0; e < b * perItem; e++) off += 4 + dv.getUint32(off, true);
    return off - start;
  });
}
