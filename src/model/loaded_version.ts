// What the repository keeps and the core calls for one loaded model version, whatever runs it: a
// backend's model (model_version.ts) or an ensemble of other models (ensemble.ts).
import type { ResolvedModelConfig } from '../config/resolved.js';
import type { InferRequest, InferResponse } from '../kernel/types.js';
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
  /** Waits for queued and running requests, then releases what the version holds. */
  unload(): Promise<void>;
}

/** How an ensemble reaches the models it is made of: the repository's lookup, with its errors. */
export type VersionLookup = (name: string, version: string) => LoadedVersion;
