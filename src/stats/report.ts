// Statistics in the JSON shape of Triton's statistics extension (the gRPC front-end maps the
// same object onto ModelStatisticsResponse).
import type { BatchStat, Duration, ModelStats, ResponseStat } from './model_stats.js';

export interface ModelStatisticsJson {
  name: string;
  version: string;
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: Record<
    'success' | 'fail' | 'queue' | 'compute_input' | 'compute_infer' | 'compute_output' | 'cache_hit' | 'cache_miss',
    Duration
  >;
  /**
   * By response index as a decimal string ("0" = each request's first), for a version whose
   * backend reports them (ModelStats.reportsResponseStats); {} otherwise, as in Triton.
   */
  response_stats: Record<string, ResponseStat>;
  batch_stats: BatchStat[];
  memory_usage: never[];
}

const copy = (d: Duration): Duration => ({ count: d.count, ns: d.ns });

function responseStats(responses: ReadonlyMap<number, ResponseStat>): Record<string, ResponseStat> {
  const out: Record<string, ResponseStat> = {};
  for (const [index, r] of [...responses].sort((a, b) => a[0] - b[0])) {
    out[String(index)] = {
      compute_infer: copy(r.compute_infer),
      compute_output: copy(r.compute_output),
      success: copy(r.success),
      fail: copy(r.fail),
      empty_response: copy(r.empty_response),
      cancel: copy(r.cancel),
    };
  }
  return out;
}

export function statisticsOf(name: string, version: number, s: Readonly<ModelStats>): ModelStatisticsJson {
  return {
    name,
    version: String(version),
    last_inference: s.lastInferenceMs,
    inference_count: s.inferenceCount,
    execution_count: s.executionCount,
    inference_stats: {
      success: copy(s.success),
      fail: copy(s.fail),
      queue: copy(s.queue),
      compute_input: copy(s.computeInput),
      compute_infer: copy(s.computeInfer),
      compute_output: copy(s.computeOutput),
      cache_hit: copy(s.cacheHit),
      cache_miss: copy(s.cacheMiss),
    },
    response_stats: s.reportsResponseStats ? responseStats(s.responses) : {},
    batch_stats: [...s.batches.values()]
      .sort((a, b) => a.batch_size - b.batch_size)
      .map((b) => ({
        batch_size: b.batch_size,
        compute_input: copy(b.compute_input),
        compute_infer: copy(b.compute_infer),
        compute_output: copy(b.compute_output),
      })),
    memory_usage: [],
  };
}
