// The in-process API every front-end (HTTP, gRPC, metrics) calls, and nothing else: front-ends
// translate wire formats to and from these calls. The model repository stays behind it.
import type { LogSettingsJson, LogSettingsUpdate } from '../kernel/log.js';
import type { RequestTrace } from '../kernel/trace.js';
import type { IndexRow, InferRequest, InferResponse, ModelMetadata, ResponseSink, ServerMetadata } from '../kernel/types.js';
import type { ModelStats } from '../stats/model_stats.js';
import type { ModelStatisticsJson } from '../stats/report.js';
import type { TraceSettingsJson, TraceSettingsUpdate } from '../trace/settings.js';
import type { SystemSharedMemoryStatus } from './shared_memory.js';

// The latency histogram's bucket bounds, for the dashboard's percentiles (ModelStats.latencyBuckets).
export { LATENCY_BUCKETS, latencyBucketBoundUs } from '../stats/model_stats.js';
// Types of the extensions' answers, for the front-ends (which reach the core only here).
export type { SystemSharedMemoryStatus, TraceSettingsJson, TraceSettingsUpdate };

/** One loaded model version's counters, as the metrics read them at scrape time. */
export interface ModelMetricsRow {
  model: string;
  version: string;
  stats: Readonly<ModelStats>;
}

export interface CoreApi {
  isLive(): boolean;
  /** Ready while serving; with --strict-readiness only when every model is ready too. */
  isReady(): boolean;
  /** False once shutdown has begun. */
  isAccepting(): boolean;
  serverMetadata(): ServerMetadata;
  isModelReady(name: string, version: string): boolean;
  modelMetadata(name: string, version: string): ModelMetadata;
  /** The model config in Triton's JSON form: what both protocols return. */
  modelConfig(name: string, version: string): Readonly<Record<string, unknown>>;
  /** Statistics extension: '' name = every model, '' version = every ready version. */
  statistics(name: string, version: string): ModelStatisticsJson[];
  metricsSnapshot(): ModelMetricsRow[];
  repositoryIndex(readyOnly: boolean): Promise<IndexRow[]>;
  /** Repository extension load; `parameters.config` may carry a config in Triton's JSON form. */
  loadModel(name: string, parameters: Record<string, unknown>): Promise<void>;
  /** Repository extension unload; `parameters.unload_dependents` (boolean) as Triton takes it. */
  unloadModel(name: string, parameters?: Record<string, unknown>): Promise<void>;
  /**
   * One request, one response. A decoupled model is refused (UNSUPPORTED): the front-ends check
   * isDecoupled() first and answer with their protocol's text.
   */
  infer(req: InferRequest): Promise<InferResponse>;
  /**
   * One request, its responses to `sink` as they come: a decoupled model's zero or more (the last
   * one final, maybe empty), any other model's exactly one. Never throws: a refusal is
   * `sink.error(e, true)`.
   */
  inferStream(req: InferRequest, sink: ResponseSink): void;
  /**
   * Whether the version a request would reach is decoupled. Throws Triton's error for a model or
   * version that is not ready, which is what Triton's front-ends answer before reading a request.
   */
  isDecoupled(name: string, version: string): boolean;
  /**
   * Trace extension: starts a trace for a request to `model` when sampling picks it (a front-end
   * asks once per request, as it arrives), else undefined. The request carries it (`req.trace`).
   */
  startTrace(model: string): RequestTrace | undefined;
  /** Trace settings of `model` ('' = global) after applying `update` if given; null clears a setting. */
  traceSettings(model: string, update?: TraceSettingsUpdate): TraceSettingsJson;
  /** Logging extension: the log settings after applying `update` if given. */
  logSettings(update?: LogSettingsUpdate): LogSettingsJson;
  /** System shared memory extension: register `byteSize` bytes at `offset` of the POSIX shm object `key`. */
  registerSystemSharedMemory(name: string, key: string, offset: number, byteSize: number): void;
  /** '' name = every region. */
  systemSharedMemoryStatus(name: string): SystemSharedMemoryStatus[];
  /** '' name = every region; resolves once the server no longer touches them. */
  unregisterSystemSharedMemory(name: string): Promise<void>;
  /** Throws Triton's refusal when the server was started without --allow-client-shm=true. */
  checkClientSharedMemory?(): void;
}
