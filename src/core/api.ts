// The in-process API every front-end (HTTP, gRPC, metrics) calls, and nothing else: front-ends
// translate wire formats to and from these calls. The model repository stays behind it.
import type { IndexRow, InferRequest, InferResponse, ModelMetadata, ServerMetadata } from '../kernel/types.js';
import type { ModelStats } from '../stats/model_stats.js';
import type { ModelStatisticsJson } from '../stats/report.js';

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
  unloadModel(name: string): Promise<void>;
  infer(req: InferRequest): Promise<InferResponse>;
}
