// A checked request's way through the response cache, for either kind of loaded version: looked
// up before it is queued (a hit is the answer), stored after it ran, counted as Triton counts.
import { type ResponseCache, requestKey } from '../cache/response_cache.js';
import type { InferOutputTensor } from '../kernel/types.js';
import type { ModelStats } from '../stats/model_stats.js';
import type { ValidatedRequest } from './validate.js';

export interface CacheUse {
  cache: ResponseCache;
  model: string;
  version: number;
  stats: ModelStats;
  /** The ensemble's statistics when this is one of its steps (Triton updates both). */
  secondaryStats: ModelStats | undefined;
}

/** The outputs for `v`: from the cache, or from `run` (then stored). */
export async function throughCache(
  use: CacheUse,
  v: Pick<ValidatedRequest, 'inputs' | 'outputs'>,
  topK: ReadonlyMap<string, number>,
  requestStartNs: bigint,
  run: () => Promise<InferOutputTensor[]>,
): Promise<InferOutputTensor[]> {
  const { cache, stats, secondaryStats } = use;
  const lookupStart = process.hrtime.bigint();
  const key = requestKey(
    use.model,
    use.version,
    v.inputs,
    v.outputs.map((name) => ({ name, classification: topK.get(name) ?? 0 })),
  );
  const hit = cache.lookup(key);
  const lookupEnd = process.hrtime.bigint();
  if (hit) {
    const end = process.hrtime.bigint();
    stats.recordCacheHit(requestStartNs, lookupStart, lookupEnd, end);
    secondaryStats?.recordCacheHit(requestStartNs, lookupStart, lookupEnd, end);
    return hit;
  }
  const outputs = await run();
  const insertStart = process.hrtime.bigint();
  cache.insert(key, outputs);
  const ns = Number(lookupEnd - lookupStart) + Number(process.hrtime.bigint() - insertStart);
  stats.recordCacheMiss(ns);
  secondaryStats?.recordCacheMiss(ns);
  return outputs;
}
