// Raw model config + the model file's signature → the resolved config a model version runs by.
// Pure: reads no files and changes neither argument. Every check of a config runs here, before
// any instance starts, with Triton's defaults and (where Triton has them) Triton's words.
import { elementCount, fromConfigType, toConfigType } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import { toTritonConfigJson } from './config_json.js';
import type {
  BatchingPolicy,
  PlacedInstances,
  QueuePolicy,
  ResolvedInput,
  ResolvedModelConfig,
  ResolvedOutput,
  ResolvedTensor,
} from './resolved.js';
import { resolveSequenceBatching } from './sequence_config.js';
import type { IoSignature, ModelSignature } from './signature.js';
import type { ModelConfig, ModelInput, ModelOutput, ModelQueuePolicy } from './types.js';

/** What resolve needs to know of the backend that runs the model. */
export interface BackendFacts<Settings> {
  name: string;
  platforms: readonly string[];
  defaultModelFilename: string;
  /** BYTES elements must be UTF-8 (the backend passes them as text). */
  utf8BytesOnly?: boolean;
  /** The backend's instance placement for the (completed) config; throws when impossible. */
  placeInstances(config: ModelConfig): PlacedInstances<Settings>;
}

export interface ResolveContext<Settings> {
  /** The model's folder name: the config's name must match it. */
  folderName: string;
  backend: BackendFacts<Settings>;
  /** The model file's inputs and outputs; undefined when the config is all there is (Python). */
  signature: ModelSignature | undefined;
  /** Label files' lines, by label_filename, read by the caller. */
  labels: ReadonlyMap<string, string[]>;
}

export const UNBOUNDED: QueuePolicy = { maxQueueSize: 0, defaultTimeoutUs: 0, allowTimeoutOverride: false, timeoutAction: 'REJECT' };

function bad(model: string, msg: string): ServalError {
  return ServalError.invalidArg(`model '${model}': ${msg}`);
}

export function resolveConfig<Settings>(raw: ModelConfig, ctx: ResolveContext<Settings>): ResolvedModelConfig<Settings> {
  const config = structuredClone(raw);
  const folder = ctx.folderName;
  if (config.name && config.name !== folder) {
    throw bad(folder, `config name '${config.name}' does not match the model folder name '${folder}'`);
  }
  config.name = folder;
  const name = folder;
  // The backend was chosen by platform/backend (backends/registry.ts); fill in the other one.
  config.backend ||= ctx.backend.name;
  if (!config.platform && ctx.backend.platforms.length) config.platform = ctx.backend.platforms[0]!;
  config.default_model_filename ||= ctx.backend.defaultModelFilename;
  config.max_batch_size ??= 0;
  const maxBatchSize = config.max_batch_size;
  if (!Number.isInteger(maxBatchSize) || maxBatchSize < 0) {
    throw bad(name, `max_batch_size must be a non-negative integer, got ${maxBatchSize}`);
  }
  config.version_policy ??= { latest: { num_versions: 1 } };
  // Ensembles resolve here too (config/ensemble.ts checks their steps); the section on any other
  // platform is Triton's error.
  if (config.ensemble_scheduling && config.platform !== 'ensemble') {
    throw ServalError.invalidArg(`ensemble scheduling cannot be set for model '${name}' whose platform is not ensemble`);
  }
  config.input ??= [];
  config.output ??= [];
  const inputs = config.input.map((t, i): ResolvedInput => ({ ...tensor(name, 'input', t, i), optional: t.optional ?? false }));
  const outputs = config.output.map((t, i): ResolvedOutput => {
    const labels = t.label_filename ? ctx.labels.get(t.label_filename) : undefined;
    if (t.label_filename && !labels) throw bad(name, `label file '${t.label_filename}' of output '${t.name}' was not read`);
    return { ...tensor(name, 'output', t, i), labels };
  });
  duplicates(name, 'input', inputs);
  duplicates(name, 'output', outputs);
  const batching = batchingPolicy(name, config);
  const sequence = config.sequence_batching
    ? resolveSequenceBatching(config, new Set(inputs.map((t) => t.name)), new Set(outputs.map((t) => t.name)))
    : undefined;
  const placed = ctx.backend.placeInstances(config);
  config.instance_group = placed.groups;
  // Sequence control and state tensors are model inputs/outputs that the sequence batcher feeds and reads.
  const modelInputs = sequence ? [...inputs, ...sequence.modelInputs] : inputs;
  const modelOutputs = sequence ? [...outputs, ...sequence.modelOutputs] : outputs;
  if (ctx.signature) checkSignature(name, maxBatchSize, modelInputs, modelOutputs, ctx.signature);
  return {
    name,
    platform: config.platform ?? '',
    backend: config.backend,
    utf8BytesOnly: ctx.backend.utf8BytesOnly ?? false,
    maxBatchSize,
    defaultModelFilename: config.default_model_filename,
    inputs,
    outputs,
    inputByName: new Map(inputs.map((t) => [t.name, t])),
    outputByName: new Map(outputs.map((t) => [t.name, t])),
    batching,
    ...(sequence && { sequence: sequence.policy }),
    instances: placed.placements,
    instanceSettings: placed.settings,
    warmup: config.model_warmup ?? [],
    json: toTritonConfigJson(config as Record<string, unknown>),
  };
}

/** Checks one input or output and fills its dims ([] when absent). */
function tensor(model: string, kind: 'input' | 'output', t: ModelInput | ModelOutput, index: number) {
  if (!t.name) throw bad(model, `an ${kind} has no name`);
  const configType = t.data_type ?? 'TYPE_INVALID';
  const datatype = fromConfigType(configType);
  if (!datatype) throw bad(model, `${kind} '${t.name}' has unsupported data_type ${configType}`);
  t.dims ??= [];
  const dims = t.dims;
  for (const d of dims) {
    if (!(d === -1 || (Number.isInteger(d) && d > 0))) {
      throw bad(model, `${kind} '${t.name}' has invalid dimension ${d} in dims [${dims.join(',')}]; dimensions must be positive or -1`);
    }
  }
  let modelDims = dims;
  if (t.reshape) {
    const shape = t.reshape.shape ?? [];
    const fixed = (s: number[]): number => elementCount(s.filter((d) => d !== -1));
    const varying = (s: number[]): number => s.filter((d) => d === -1).length;
    if (varying(dims) !== varying(shape) || (varying(dims) === 0 && fixed(dims) !== fixed(shape))) {
      throw bad(
        model,
        `${kind} '${t.name}' has a reshape [${shape.join(',')}] whose element count does not match its dims [${dims.join(',')}]`,
      );
    }
    modelDims = shape;
  }
  return { name: t.name, index, datatype, dims: [...dims], modelDims: [...modelDims], reshaped: t.reshape !== undefined };
}

function duplicates(model: string, kind: string, list: readonly { name: string }[]): void {
  const seen = new Set<string>();
  for (const t of list) {
    if (seen.has(t.name)) throw bad(model, `${kind} '${t.name}' is declared more than once`);
    seen.add(t.name);
  }
}

function queuePolicy(p: ModelQueuePolicy | undefined): QueuePolicy {
  if (!p) return UNBOUNDED;
  return {
    maxQueueSize: Number(p.max_queue_size ?? 0),
    defaultTimeoutUs: Number(p.default_timeout_microseconds ?? 0),
    allowTimeoutOverride: p.allow_timeout_override ?? false,
    timeoutAction: p.timeout_action === 'DELAY' ? 'DELAY' : 'REJECT',
  };
}

/** dynamic_batching → the scheduler's policy, with Triton's load-time checks of the priorities. */
function batchingPolicy(name: string, config: ModelConfig): BatchingPolicy {
  const maxBatchSize = config.max_batch_size ?? 0;
  const db = config.dynamic_batching;
  if (!db) {
    return {
      maxBatchSize,
      dynamic: false,
      preferredBatchSizes: [],
      maxQueueDelayNs: 0,
      preserveOrdering: false,
      queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
    };
  }
  if (maxBatchSize === 0) throw bad(name, 'dynamic batching requires max_batch_size > 0');
  db.preferred_batch_size ??= [];
  const preferred = db.preferred_batch_size;
  for (const p of preferred) {
    if (p < 1 || p > maxBatchSize) throw bad(name, `preferred_batch_size ${p} must be between 1 and max_batch_size ${maxBatchSize}`);
  }
  db.max_queue_delay_microseconds ??= 0;
  const base = {
    maxBatchSize,
    dynamic: true,
    preferredBatchSizes: [...preferred],
    maxQueueDelayNs: Number(db.max_queue_delay_microseconds) * 1000,
    preserveOrdering: db.preserve_ordering ?? false,
  };
  const levels = Number(db.priority_levels ?? 0);
  const fallback = queuePolicy(db.default_queue_policy);
  if (levels === 0) {
    if (db.priority_queue_policy && Object.keys(db.priority_queue_policy).length) {
      throw bad(name, 'priority_queue_policy requires priority_levels > 0');
    }
    return { ...base, queue: { levels: 1, defaultLevel: 1, policies: [fallback] } };
  }
  const defaultLevel = Number(db.default_priority_level ?? 0);
  if (defaultLevel < 1 || defaultLevel > levels) {
    throw bad(name, `default_priority_level must be in the range [1, ${levels}] when priority_levels is ${levels}, got ${defaultLevel}`);
  }
  const policies = Array.from({ length: levels }, () => fallback);
  for (const [key, p] of Object.entries(db.priority_queue_policy ?? {})) {
    const level = Number(key);
    if (!Number.isInteger(level) || level < 1 || level > levels) {
      throw bad(name, `priority_queue_policy has level ${key}, outside [1, ${levels}]`);
    }
    policies[level - 1] = queuePolicy(p);
  }
  return { ...base, queue: { levels, defaultLevel, policies } };
}

/**
 * Config inputs/outputs against the model file: every configured tensor exists with the same
 * datatype and a compatible shape (the batch dimension counted when max_batch_size > 0), and every
 * input of the file is configured.
 */
function checkSignature(
  name: string,
  maxBatch: number,
  inputs: readonly ResolvedTensor[],
  outputs: readonly ResolvedTensor[],
  sig: ModelSignature,
): void {
  const check = (kind: 'input' | 'output', t: ResolvedTensor, list: IoSignature[]): void => {
    const m = list.find((s) => s.name === t.name);
    if (!m) {
      throw bad(
        name,
        `unexpected ${kind} '${t.name}' in the model configuration; the model file's ${kind}s are [${list.map((s) => `'${s.name}'`).join(', ')}]`,
      );
    }
    if (m.datatype !== t.datatype) {
      const fileType = m.datatype ? toConfigType(m.datatype) : `'${m.rawType}' (unsupported)`;
      throw bad(
        name,
        `${kind} '${t.name}' has data_type ${toConfigType(t.datatype)} in the configuration, but the model file's type is ${fileType}`,
      );
    }
    if (!m.dims) return;
    const expected = [...(maxBatch > 0 ? [-1] : []), ...t.modelDims];
    const compatible =
      m.dims.length === expected.length &&
      m.dims.every((d, i) => d === -1 || expected[i] === -1 || d === expected[i]) &&
      (maxBatch === 0 || m.dims[0] === -1 || m.dims[0]! >= maxBatch);
    if (!compatible) {
      throw bad(
        name,
        `${kind} '${t.name}' has shape [${m.dims.join(',')}] in the model file, but the configuration gives [${expected.join(',')}]` +
          (maxBatch > 0 ? ' (a batch dimension first because max_batch_size > 0, then dims)' : ''),
      );
    }
  };
  for (const t of inputs) check('input', t, sig.inputs);
  for (const t of outputs) check('output', t, sig.outputs);
  const missing = sig.inputs.filter((s) => !inputs.some((t) => t.name === s.name));
  if (missing.length) {
    throw bad(
      name,
      `the model file has input(s) [${missing.map((s) => `'${s.name}'`).join(', ')}] that the configuration does not declare`,
    );
  }
}
