// Serval's latency-budget batching option (docs/batching.md), read from the model's `parameters`
// so that the same config.pbtxt still loads in Triton: Triton hands model parameters to the
// backend, and its backends look up only the keys they know.
import { ServalError } from '../kernel/errors.js';
import type { LatencyBudgetPolicy } from './resolved.js';
import type { ModelConfig } from './types.js';

export const LATENCY_TARGET_PARAMETER = 'serval.dynamic_batching.p99_latency_target_us';

/** Larger targets are surely a unit mistake (an hour). */
const MAX_TARGET_US = 3_600_000_000;

/**
 * The model's latency budget, or undefined without the parameter. The adaptive delay is bounded
 * by `max_queue_delay_microseconds` when that is set (> 0) and never exceeds the target itself.
 */
export function latencyBudgetOf(name: string, config: ModelConfig): LatencyBudgetPolicy | undefined {
  const param = config.parameters?.[LATENCY_TARGET_PARAMETER];
  if (param === undefined) return undefined;
  const raw = param.string_value ?? '';
  const us = /^[0-9]+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
  if (!(us >= 1 && us <= MAX_TARGET_US)) {
    throw ServalError.invalidArg(
      `model '${name}': parameter '${LATENCY_TARGET_PARAMETER}' must be a whole number of microseconds from 1 to ${MAX_TARGET_US}, got '${raw}'`,
    );
  }
  if (!config.dynamic_batching) {
    throw ServalError.invalidArg(`model '${name}': parameter '${LATENCY_TARGET_PARAMETER}' requires dynamic_batching`);
  }
  const targetNs = us * 1000;
  const boundNs = Number(config.dynamic_batching.max_queue_delay_microseconds ?? 0) * 1000;
  return { targetNs, maxDelayNs: boundNs > 0 ? Math.min(boundNs, targetNs) : targetNs };
}
