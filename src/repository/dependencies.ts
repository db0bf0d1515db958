// Ensembles depend on the models their steps name. What the repository needs to order loads and
// unloads by that, and Triton's words (model_repository_manager.cc) when a dependency is not met.
import { composingModels, isEnsembleConfig } from '../config/ensemble.js';
import type { ModelConfig } from '../config/types.js';
import { ServalError } from '../kernel/errors.js';

/** The models an ensemble config names; none for any other config. */
export function dependenciesOf(config: ModelConfig | undefined): string[] {
  return config && isEnsembleConfig(config) ? composingModels(config) : [];
}

/**
 * Triton's error for an ensemble that reaches itself through its composing models (`configs`
 * gives each model's config, undefined when unknown), or undefined when it does not.
 */
export function circularDependency(start: string, configs: (name: string) => ModelConfig | undefined): string | undefined {
  const seen = new Set<string>();
  const visit = (node: string): string | undefined => {
    for (const up of dependenciesOf(configs(node))) {
      if (up === start) return node;
      if (seen.has(up)) continue;
      seen.add(up);
      const last = visit(up);
      if (last !== undefined) return last;
    }
    return undefined;
  };
  const last = visit(start);
  return last === undefined ? undefined : `circular dependency between ensembles: ${start} -> ... -> ${last} -> ${start}`;
}

/** What the repository knows of one composing model when an ensemble is about to load. */
export interface DependencyState {
  name: string;
  /** Its config, when its folder was read; undefined: not in any repository, or unreadable. */
  config: ModelConfig | undefined;
  /** Versions READY now. */
  ready: number[];
  /** Why it is not ready (its load failure), if it is not. */
  reason: string;
}

/**
 * Checks an ensemble's composing models in Triton's order: all of them exist, then each is valid,
 * has a loaded version, and has the versions its steps name. Throws Triton's error.
 */
export function checkDependencies(ensemble: string, config: ModelConfig, states: readonly DependencyState[]): void {
  const missing = states.filter((s) => !s.config).map((s) => s.name);
  if (missing.length) {
    throw ServalError.invalidArg(`ensemble ${ensemble} contains models that are not available or ambiguous: ${missing.join(', ')}`);
  }
  const steps = config.ensemble_scheduling?.step ?? [];
  for (const s of states) {
    if (s.ready.length === 0) {
      if (isEnsembleConfig(s.config!)) {
        throw ServalError.invalidArg(
          `ensemble '${ensemble}' depends on '${s.name}' which is not valid. Model '${s.name}' failed with error: ${s.reason}`,
        );
      }
      throw ServalError.invalidArg(
        s.reason
          ? `ensemble '${ensemble}' depends on '${s.name}' which has no loaded version. Model '${s.name}' loading failed with error: ${s.reason}`
          : `ensemble '${ensemble}' depends on '${s.name}' which has no loaded version.`,
      );
    }
    for (const step of steps) {
      const v = Number(step.model_version ?? 0);
      if (step.model_name !== s.name || v === -1 || s.ready.includes(v)) continue;
      throw ServalError.invalidArg(`ensemble '${ensemble}' depends on '${s.name}' whose required version ${v} is not loaded.`);
    }
  }
}
