// Who wants each successful request's latencies as they happen: the metrics front-end's summaries
// (--metrics-config summary_latencies=true). ModelStats reports here (stats may import only the
// kernel, and a front-end may not import stats); with no observer the cost is one size check.

/** One successful request's times in nanoseconds, as Triton's latency summaries observe them. */
export interface LatencyObservation {
  requestNs: number;
  queueNs: number;
  /** Zero for a response-cache hit (nothing ran). */
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
  /** Answered from the response cache. */
  cacheHit: boolean;
}

/** `source` is the version's statistics object (ModelStats), which identifies the model version. */
export type LatencyObserver = (source: object, o: LatencyObservation) => void;

export const latencyObservers = new Set<LatencyObserver>();
