// Per model version statistics in the shape of Triton's statistics extension. The scheduler
// records into it at the points Triton does; the stats API and the metrics read it.
import { latencyObservers } from '../kernel/latency_observers.js';

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

/** One response index of a decoupled model's requests (Triton's response_stats). */
export interface ResponseStat {
  compute_infer: Duration;
  compute_output: Duration;
  success: Duration;
  fail: Duration;
  empty_response: Duration;
  cancel: Duration;
}

/** What became of one response: sent with outputs, an error, the final flag alone, or a cancelled request's. */
export type ResponseOutcome = 'success' | 'fail' | 'empty_response' | 'cancel';

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
  /** The response cache serves this version (its config enables it and the server has one). */
  cacheEnabled = false;
  /** The latency-budget batcher's current queue delay in ns (set only for a model with a p99 target; Serval's own). */
  adaptiveQueueDelayNs: (() => number) | undefined;
  readonly batches = new Map<number, BatchStat>();
  /** Failed requests by Triton's failure reasons (REJECTED, CANCELED, BACKEND, OTHER). */
  readonly failuresByReason = new Map<FailureReason, number>();
  /** Requests accepted but not yet completed (queued or executing). */
  pending = 0;
  /** Successful requests by duration (see latencyBucket), for percentiles over any window. */
  readonly latencyBuckets = new Uint32Array(LATENCY_BUCKETS);
  /** Execution time (compute input + infer + output) by instance name, for each one's busy share. */
  readonly busyNsByInstance = new Map<string, number>();
  /** Instances (ONNX worker threads, Python stubs) replaced after they died (Serval's own metric). */
  instanceRestarts = 0;
  /**
   * A decoupled version (its config's model_transaction_policy): its requests' first responses
   * come from recordFirstResponse alone; any other version's one response is its request's
   * completion (recordSuccess, recordCacheHit, recordFailure).
   */
  decoupled = false;
  /** Decoupled models: by response index (0 = each request's first response); Triton's response_stats. */
  readonly responses = new Map<number, ResponseStat>();
  /**
   * The statistics API shows `responses` as response_stats. In Triton only a backend that calls
   * TRITONBACKEND_ModelInstanceReportResponseStatistics fills them; its Python backend does not,
   * so a Python model's response_stats are {} there (docs/reference/decoupled.md). Off by default;
   * the counters are kept either way (the dashboard reads them).
   */
  reportsResponseStats = false;
  /** Time from a request's arrival to its first response, by latencyBucket (the dashboard's percentiles). */
  readonly firstResponseBuckets = new Uint32Array(LATENCY_BUCKETS);
  /** The sum (ns) and count of those times. */
  readonly firstResponse = dur();
  /**
   * The same times as Triton's nv_inference_first_response_histogram_ms observes them: whole
   * milliseconds (truncated), counted per bucket of `boundsMs` (Triton's defaults), the last
   * count above them all (not cumulative), and their sum in ms.
   */
  readonly firstResponseMs = {
    boundsMs: FIRST_RESPONSE_BUCKETS_MS,
    counts: new Array<number>(FIRST_RESPONSE_BUCKETS_MS.length + 1).fill(0),
    sumMs: 0,
  };

  /**
   * Response `index` of a decoupled model's request, counted as Triton's InferenceStatsAggregator
   * UpdateResponse{Success,Fail,Empty,Cancel} count it. `inferNs`: from the previous response (or
   * the request's start) until this one was produced; `outputNs`: preparing its outputs for the
   * client. A success counts compute_infer, compute_output and success (infer + output); a failure
   * compute_infer, compute_output only when it had output time, and fail; an empty response (the
   * final flag alone) compute_infer and empty_response, both the whole time; a cancellation only
   * cancel.
   */
  recordResponse(index: number, outcome: ResponseOutcome, inferNs: number, outputNs: number): void {
    // Only decoupled versions send responses one by one; a version not yet flagged is one.
    this.decoupled = true;
    let r = this.responses.get(index);
    if (!r) {
      r = { compute_infer: dur(), compute_output: dur(), success: dur(), fail: dur(), empty_response: dur(), cancel: dur() };
      this.responses.set(index, r);
    }
    const total = Math.max(0, inferNs) + Math.max(0, outputNs);
    switch (outcome) {
      case 'success':
        add(r.compute_infer, inferNs);
        add(r.compute_output, outputNs);
        break;
      case 'fail':
        add(r.compute_infer, inferNs);
        if (outputNs > 0) add(r.compute_output, outputNs);
        break;
      case 'empty_response':
        add(r.compute_infer, total);
        break;
      case 'cancel':
        break;
    }
    add(r[outcome], total);
  }

  /**
   * A request got its first response (outputs or an error; not the final flag alone) `ns` after
   * it arrived. Decoupled versions call it; for the others the request's completion does.
   */
  recordFirstResponse(ns: number): void {
    this.firstResponseIn(ns, latencyBucket(ns));
  }

  private firstResponseIn(ns: number, bucket: number): void {
    add(this.firstResponse, ns);
    this.firstResponseBuckets[bucket]! += 1;
    // Triton observes (now - start) / NANOS_PER_MILLIS in integer arithmetic.
    const ms = Math.floor(Math.max(0, ns) / 1e6);
    const bounds = this.firstResponseMs.boundsMs;
    let i = 0;
    while (i < bounds.length && ms > bounds[i]!) i++;
    this.firstResponseMs.counts[i]! += 1;
    this.firstResponseMs.sumMs += ms;
  }

  /** One request completed successfully; `batchSize` is its own batch size (≥ 1). */
  recordSuccess(batchSize: number, t: RequestTiming, endNs: bigint): void {
    this.lastInferenceMs = Date.now();
    this.inferenceCount += batchSize;
    const ns = Number(endNs - t.requestStartNs);
    add(this.success, ns);
    const bucket = latencyBucket(ns);
    this.latencyBuckets[bucket]! += 1;
    if (!this.decoupled) this.firstResponseIn(ns, bucket);
    add(this.queue, Number(t.computeStartNs - t.queueStartNs));
    add(this.computeInput, t.computeInputNs);
    add(this.computeInfer, t.computeInferNs);
    add(this.computeOutput, t.computeOutputNs);
    if (latencyObservers.size) {
      const o = {
        requestNs: ns,
        queueNs: Number(t.computeStartNs - t.queueStartNs),
        computeInputNs: t.computeInputNs,
        computeInferNs: t.computeInferNs,
        computeOutputNs: t.computeOutputNs,
        cacheHit: false,
      };
      for (const f of latencyObservers) f(this, o);
    }
  }

  /**
   * A request answered from the response cache (Triton's UpdateSuccessCacheHit): a success with
   * its request and queue time (arrival to the start of the lookup) and the lookup as cache_hit
   * time. Nothing ran, so inference and execution counts stay, and compute time adds 0; Triton's
   * statistics report the queue and compute counts as the success count, so they count it.
   */
  recordCacheHit(requestStartNs: bigint, lookupStartNs: bigint, lookupEndNs: bigint, endNs: bigint): void {
    this.lastInferenceMs = Date.now();
    const ns = Number(endNs - requestStartNs);
    add(this.success, ns);
    const bucket = latencyBucket(ns);
    this.latencyBuckets[bucket]! += 1;
    if (!this.decoupled) this.firstResponseIn(ns, bucket);
    add(this.queue, Number(lookupStartNs - requestStartNs));
    add(this.computeInput, 0);
    add(this.computeInfer, 0);
    add(this.computeOutput, 0);
    add(this.cacheHit, Number(lookupEndNs - lookupStartNs));
    if (latencyObservers.size) {
      const o = {
        requestNs: ns,
        queueNs: Number(lookupStartNs - requestStartNs),
        computeInputNs: 0,
        computeInferNs: 0,
        computeOutputNs: 0,
        cacheHit: true,
      };
      for (const f of latencyObservers) f(this, o);
    }
  }

  /** A cache miss that ran and was stored: `ns` is the lookup plus the insertion, as in Triton. */
  recordCacheMiss(ns: number): void {
    add(this.cacheMiss, ns);
  }

  recordFailure(requestStartNs: bigint, endNs: bigint, reason: FailureReason): void {
    this.lastInferenceMs = Date.now();
    this.failuresByReason.set(reason, (this.failuresByReason.get(reason) ?? 0) + 1);
    const ns = Number(endNs - requestStartNs);
    add(this.fail, ns);
    // Triton answers a failure with an error response, except a request its queue refused, which
    // fails the call itself.
    if (!this.decoupled && reason !== 'REJECTED') this.recordFirstResponse(ns);
  }

  /** One model execution of `batchSize` items, on the instance called `instance` when known. */
  recordExecution(batchSize: number, inputNs: number, inferNs: number, outputNs: number, instance?: string): void {
    this.executionCount += 1;
    if (instance !== undefined) {
      const busy = Math.max(0, inputNs) + Math.max(0, inferNs) + Math.max(0, outputNs);
      this.busyNsByInstance.set(instance, (this.busyNsByInstance.get(instance) ?? 0) + busy);
    }
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

/**
 * Triton's default bucket bounds (ms) of nv_inference_first_response_histogram_ms
 * (MetricReporterConfig::histogram_options_ in core's metric_model_reporter.h).
 */
export const FIRST_RESPONSE_BUCKETS_MS: readonly number[] = [100, 500, 2000, 5000];

/**
 * Latency histogram buckets: bucket i holds durations up to 2^((i+1)/4) µs (four per doubling,
 * so a percentile read from it is within 19% of the true value), the last one everything longer
 * (2^28 µs ≈ 4.5 min).
 */
export const LATENCY_BUCKETS = 112;

export function latencyBucket(ns: number): number {
  const us = ns / 1000;
  if (!(us > 1)) return 0;
  return Math.min(LATENCY_BUCKETS - 1, Math.floor(4 * Math.log2(us)));
}

/** The upper bound in microseconds of latency bucket `i`. */
export function latencyBucketBoundUs(i: number): number {
  return 2 ** ((i + 1) / 4);
}

function add(d: Duration, ns: number): void {
  d.count += 1;
  d.ns += Math.max(0, ns);
}
