// Statistics in the JSON shape of Triton's statistics extension (the gRPC front-end maps the
// same object onto ModelStatisticsResponse).
import type { BatchStat, Duration, ModelStats } from './model_stats.js';

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
  response_stats: Record<string, never>;
  batch_stats: BatchStat[];
  memory_usage: never[];
}

const copy = (d: Duration): Duration => ({ count: d.count, ns: d.ns });

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
    response_stats: {},
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
