// Turns a model config's dynamic_batching section into the scheduler's policy, checking the
// priority settings as Triton does at load time.
import type { ModelConfig, ModelQueuePolicy } from '../config/types.js';
import { ServalError } from '../core/errors.js';
import { UNBOUNDED, type QueuePolicy } from './queue.js';
import type { BatchingPolicy } from './scheduler.js';

function queuePolicy(p: ModelQueuePolicy | undefined): QueuePolicy {
  if (!p) return UNBOUNDED;
  return {
    maxQueueSize: Number(p.max_queue_size ?? 0),
    defaultTimeoutUs: Number(p.default_timeout_microseconds ?? 0),
    allowTimeoutOverride: p.allow_timeout_override ?? false,
    timeoutAction: p.timeout_action === 'DELAY' ? 'DELAY' : 'REJECT',
  };
}

export function batchingPolicy(config: ModelConfig): BatchingPolicy {
  const name = config.name!;
  const db = config.dynamic_batching;
  const base = {
    maxBatchSize: config.max_batch_size ?? 0,
    dynamic: db !== undefined,
    preferredBatchSizes: db?.preferred_batch_size ?? [],
    maxQueueDelayNs: Number(db?.max_queue_delay_microseconds ?? 0) * 1000,
    preserveOrdering: db?.preserve_ordering ?? false,
  };
  if (!db) return { ...base, queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] } };

  const levels = Number(db.priority_levels ?? 0);
  const fallback = queuePolicy(db.default_queue_policy);
  if (levels === 0) {
    if (db.priority_queue_policy && Object.keys(db.priority_queue_policy).length) {
      throw ServalError.invalidArg(`model '${name}': priority_queue_policy requires priority_levels > 0`);
    }
    return { ...base, queue: { levels: 1, defaultLevel: 1, policies: [fallback] } };
  }
  const defaultLevel = Number(db.default_priority_level ?? 0);
  if (defaultLevel < 1 || defaultLevel > levels) {
    throw ServalError.invalidArg(
      `model '${name}': default_priority_level must be in the range [1, ${levels}] when priority_levels is ${levels}, got ${defaultLevel}`,
    );
  }
  const policies = Array.from({ length: levels }, () => fallback);
  for (const [key, p] of Object.entries(db.priority_queue_policy ?? {})) {
    const level = Number(key);
    if (!Number.isInteger(level) || level < 1 || level > levels) {
      throw ServalError.invalidArg(`model '${name}': priority_queue_policy has level ${key}, outside [1, ${levels}]`);
    }
    policies[level - 1] = queuePolicy(p);
  }
  return { ...base, queue: { levels, defaultLevel, policies } };
}
