// Per model version statistics in the shape of Triton's statistics extension. The scheduler
// records into it at the points Triton does; the stats API and the metrics read it.

export interface Duration {
  count: number;
  ns: number;
}

function dur(): Duration {
  return { count: 0, ns: 0 };
}

export interface BatchStat {
  batch_size: number;
  compute_input: Duration;
  compute_infer: Duration;
  compute_output: Duration;
}

export type FailureReason = 'REJECTED' | 'CANCELED' | 'BACKEND' | 'OTHER';

export interface RequestTiming {
  /** Arrival at the core (before validation). */
  requestStartNs: bigint;
  queueStartNs: bigint;
  computeStartNs: bigint;
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

export class ModelStats {
  lastInferenceMs = 0;
  inferenceCount = 0;
  executionCount = 0;
  readonly success = dur();
  readonly fail = dur();
  readonly queue = dur();
  readonly computeInput = dur();
  readonly computeInfer = dur();
  readonly computeOutput = dur();
  readonly cacheHit = dur();
  readonly cacheMiss = dur();
  readonly batches = new Map<number, BatchStat>();
  /** Failed requests by Triton's failure reasons (REJECTED, CANCELED, BACKEND, OTHER). */
  readonly failuresByReason = new Map<FailureReason, number>();
  /** Requests accepted but not yet completed (queued or executing). */
  pending = 0;

  /** One request completed successfully; `batchSize` is its own batch size (≥ 1). */
  recordSuccess(batchSize: number, t: RequestTiming, endNs: bigint): void {
    this.lastInferenceMs = Date.now();
    this.inferenceCount += batchSize;
    add(this.success, Number(endNs - t.requestStartNs));
    add(this.queue, Number(t.computeStartNs - t.queueStartNs));
    add(this.computeInput, t.computeInputNs);
    add(this.computeInfer, t.computeInferNs);
    add(this.computeOutput, t.computeOutputNs);
  }

  recordFailure(requestStartNs: bigint, endNs: bigint, reason: FailureReason): void {
    this.lastInferenceMs = Date.now();
    this.failuresByReason.set(reason, (this.failuresByReason.get(reason) ?? 0) + 1);
    add(this.fail, Number(endNs - requestStartNs));
  }

  /** One model execution of `batchSize` items. */
  recordExecution(batchSize: number, inputNs: number, inferNs: number, outputNs: number): void {
    this.executionCount += 1;
    let b = this.batches.get(batchSize);
    if (!b) {
      b = { batch_size: batchSize, compute_input: dur(), compute_infer: dur(), compute_output: dur() };
      this.batches.set(batchSize, b);
    }
    add(b.compute_input, inputNs);
    add(b.compute_infer, inferNs);
    add(b.compute_output, outputNs);
  }
}

function add(d: Duration, ns: number): void {
  d.count += 1;
  d.ns += Math.max(0, ns);
}
