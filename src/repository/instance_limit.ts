// A bound on the instances one load starts (issue 25). Each instance is a worker thread or a
// Python process with its own runtime: `instance_group { count: 1000 }` left 1,012 threads and
// 10.8 GB resident, from one repository call. Triton accepts it; Serval refuses a load over the
// bound with a text naming the model, its count and the flag, before any instance starts.
import os from 'node:os';
import type { ModelConfig } from '../config/types.js';
import { ServalError } from '../kernel/errors.js';

export interface InstanceLimits {
  /** --model-instance-limit: instances of one model's load, all versions together (0 = none). */
  model: number;
  /** --server-instance-limit: instances of every loaded model together (0 = none). */
  server: number;
}

/**
 * A few CPU instances per core for one model (more only oversubscribe the cores: each runs its
 * own inference threads), never fewer than 16 (a small machine still takes configs written for a
 * bigger one). The server's whole: 1024, room for the 500-model density benchmark with one
 * instance each on a worker of its own, while each model stays within its own bound.
 */
export function defaultInstanceLimits(cores = os.availableParallelism()): InstanceLimits {
  return { model: Math.max(16, 4 * cores), server: 1024 };
}

/**
 * The instances one version of `config` asks for, as written: each group's count (default 1) on
 * each GPU it lists. A group of GPU instances that lists none gets them on every visible GPU at
 * placement, so this counts it once: the check never refuses what would fit.
 */
export function declaredInstances(config: ModelConfig): number {
  const groups = config.instance_group ?? [];
  if (!groups.length) return 1;
  let n = 0;
  for (const g of groups) {
    const count = g.count ?? 1;
    // An invalid count is the placement's to report, in Triton's words.
    if (!Number.isInteger(count) || count < 0) return 0;
    n += count * Math.max(1, g.gpus?.length ?? 0);
  }
  return n;
}

/**
 * Refuses a load of `versions` versions of `config` that would start more instances than the
 * model's bound, or bring the server's (the other models' loaded instances, `others`) over its own.
 */
export function checkInstanceLimits(name: string, config: ModelConfig, versions: number, others: number, limits: InstanceLimits): void {
  const perVersion = declaredInstances(config);
  const asked = perVersion * versions;
  const count = versions > 1 ? `${perVersion} instances in each of ${versions} versions` : `instance_group count ${perVersion}`;
  if (limits.model > 0 && asked > limits.model) {
    throw ServalError.invalidArg(
      `model '${name}' asks for ${asked} instances (${count}), more than the ${limits.model} that --model-instance-limit allows for one model; ` +
        'lower the count or raise the flag',
    );
  }
  if (limits.server > 0 && others + asked > limits.server) {
    throw ServalError.invalidArg(
      `model '${name}' asks for ${asked} instances (${count}), which with the ${others} instances of the other loaded models is more than ` +
        `the ${limits.server} that --server-instance-limit allows for the server; unload models or raise the flag`,
    );
  }
}
