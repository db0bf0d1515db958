// What the repository keeps and the core calls for one loaded model version, whatever runs it: a
// backend's model (model_version.ts) or an ensemble of other models (ensemble.ts).
import type { ResolvedModelConfig } from '../config/resolved.js';
import type { InferRequest, InferResponse, ResponseSink } from '../kernel/types.js';
import type { ModelStats } from '../stats/model_stats.js';

export interface LoadedVersion {
  readonly name: string;
  readonly version: number;
  readonly config: ResolvedModelConfig;
  readonly stats: ModelStats;
  /**
   * Validates and runs one request. `secondaryStats` (Triton's secondary stats aggregator) also
   * records the request's success and compute times: an ensemble sums its steps' with it.
   */
  infer(req: InferRequest, requestStartNs: bigint, secondaryStats?: ModelStats): Promise<InferResponse>;
  /** Its requests answer zero or more times (model_transaction_policy.decoupled): they run through stream(). */
  readonly decoupled: boolean;
  /**
   * Validates and runs one request of a decoupled version, each response to `sink` as the model
   * sends it. Throws what infer() would reject with before the request is queued.
   */
  stream(req: InferRequest, requestStartNs: bigint, sink: ResponseSink, secondaryStats?: ModelStats): void;
  /** Waits for queued and running requests, then releases what the version holds. */
  unload(): Promise<void>;
}

/** How an ensemble reaches the models it is made of: the repository's lookup, with its errors. */
export type VersionLookup = (name: string, version: string) => LoadedVersion;
