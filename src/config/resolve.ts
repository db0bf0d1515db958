// Raw model config + the model file's signature → the resolved config a model version runs by.
// Pure: reads no files and changes neither argument. Every check of a config runs here, before
// any instance starts, with Triton's defaults and (where Triton has them) Triton's words.
import { fromConfigType, toConfigType } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import { toTritonConfigJson } from './config_json.js';
import { latencyBudgetOf } from './latency_target.js';
import { resolveRagged } from './ragged.js';
import type {
  BatchingPolicy,
  PlacedInstances,
  QueuePolicy,
  RaggedBatching,
  ResolvedInput,
  ResolvedModelConfig,
  ResolvedOutput,
  ResolvedTensor,
} from './resolved.js';
import { resolveSequenceBatching } from './sequence_config.js';
import type { IoSignature, ModelSignature } from './signature.js';
import type { ModelConfig, ModelInput, ModelOutput, ModelQueuePolicy } from './types.js';
import { validateIo, validateModelConfig } from './validate_config.js';

/** What resolve needs to know of the backend that runs the model. */
export interface BackendFacts<Settings> {
  name: string;
  platforms: readonly string[];
  defaultModelFilename: string;
  /** BYTES elements must be UTF-8 (the backend passes them as text). */
  utf8BytesOnly?: boolean;
  /** Responses list outputs in the order the model made them (Python), not the config's. */
  outputsInModelOrder?: boolean;
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
  // Triton's order: the model-level checks, then instance groups, then inputs and outputs, then
  // (in the backend) the model file.
  validateModelConfig(config, folder);
  config.name = folder;
  const name = folder;
  // The backend was chosen by platform/backend (backends/registry.ts); fill in the other one.
  config.backend ||= ctx.backend.name;
  if (!config.platform && ctx.backend.platforms.length) config.platform = ctx.backend.platforms[0]!;
  config.default_model_filename ||= ctx.backend.defaultModelFilename;
  config.max_batch_size ??= 0;
  const maxBatchSize = config.max_batch_size;
  config.version_policy ??= { latest: { num_versions: 1 } };
  // Triton's NormalizeModelConfig: no preferred sizes means max_batch_size is the preferred size.
  if (config.dynamic_batching && !config.dynamic_batching.preferred_batch_size?.length && maxBatchSize > 0) {
    config.dynamic_batching.preferred_batch_size = [maxBatchSize];
  }
  // Also NormalizeModelConfig: pinned memory is on for every model but an ensemble. It changes
  // nothing in Serval (no GPU copies to pin for); it is here so /config prints Triton's block.
  if (!config.ensemble_scheduling) {
    config.optimization ??= {};
    config.optimization.input_pinned_memory ??= { enable: true };
    config.optimization.output_pinned_memory ??= { enable: true };
  }
  const names = (list: readonly { name?: string }[] | undefined): Set<string> => new Set((list ?? []).map((t) => t.name ?? ''));
  const sequence = config.sequence_batching ? resolveSequenceBatching(config, names(config.input), names(config.output)) : undefined;
  const placed = ctx.backend.placeInstances(config);
  config.instance_group = placed.groups;
  validateIo(config, name);
  // After the tensors: the batch inputs/outputs refer to them (Triton's ValidateBatchIO comes last too).
  const batching = batchingPolicy(name, config);
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
  // Sequence control and state tensors are model inputs/outputs that the sequence batcher feeds and reads.
  const modelInputs = sequence ? [...inputs, ...sequence.modelInputs] : inputs;
  const modelOutputs = sequence ? [...outputs, ...sequence.modelOutputs] : outputs;
  if (ctx.signature) checkSignature(name, maxBatchSize, modelInputs, modelOutputs, ctx.signature, batching.ragged);
  return {
    name,
    platform: config.platform ?? '',
    backend: config.backend,
    utf8BytesOnly: ctx.backend.utf8BytesOnly ?? false,
    outputsInModelOrder: ctx.backend.outputsInModelOrder ?? false,
    maxBatchSize,
    decoupled: config.model_transaction_policy?.decoupled ?? false,
    defaultModelFilename: config.default_model_filename,
    inputs,
    outputs,
    inputByName: new Map(inputs.map((t) => [t.name, t])),
    outputByName: new Map(outputs.map((t) => [t.name, t])),
    batching,
    ...(sequence && { sequence: sequence.policy }),
    instances: placed.placements,
    instanceGroups: placed.groups,
    instanceSettings: placed.settings,
    warmup: config.model_warmup ?? [],
    // validateModelConfig refused it for sequence and decoupled models, as Triton does.
    responseCache: config.response_cache?.enable ?? false,
    json: toTritonConfigJson(config as Record<string, unknown>),
  };
}

/** Checks one input or output and fills its dims ([] when absent). */
function tensor(model: string, kind: 'input' | 'output', t: ModelInput | ModelOutput, index: number) {
  const configType = t.data_type ?? 'TYPE_INVALID';
  const datatype = fromConfigType(configType);
  if (!datatype) throw bad(model, `${kind} '${t.name}' has unsupported data_type ${configType}`);
  // validateIo has checked the name, dims and reshape the way Triton does.
  const dims = t.dims ?? [];
  const modelDims = t.reshape ? (t.reshape.shape ?? []) : dims;
  return { name: t.name ?? '', index, datatype, dims: [...dims], modelDims: [...modelDims], reshaped: t.reshape !== undefined };
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
  const ragged = resolveRagged(config);
  if (!db) {
    latencyBudgetOf(name, config); // refuses the latency target without dynamic_batching
    return {
      maxBatchSize,
      dynamic: false,
      preferredBatchSizes: [],
      maxQueueDelayNs: 0,
      preserveOrdering: false,
      queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
      ...(ragged && { ragged }),
    };
  }
  if (maxBatchSize === 0) throw bad(name, 'dynamic batching requires max_batch_size > 0');
  db.preferred_batch_size ??= [];
  const preferred = db.preferred_batch_size;
  db.max_queue_delay_microseconds ??= 0;
  const latencyBudget = latencyBudgetOf(name, config);
  const base = {
    maxBatchSize,
    dynamic: true,
    preferredBatchSizes: [...preferred],
    maxQueueDelayNs: Number(db.max_queue_delay_microseconds) * 1000,
    preserveOrdering: db.preserve_ordering ?? false,
    ...(ragged && { ragged }),
    ...(latencyBudget && { latencyBudget }),
  };
  const levels = Number(db.priority_levels ?? 0);
  const fallback = queuePolicy(db.default_queue_policy);
  if (levels === 0) {
    if (db.priority_queue_policy && Object.keys(db.priority_queue_policy).length) {
      throw bad(name, 'priority_queue_policy requires priority_levels > 0');
    }
    return { ...base, queue: { levels: 1, defaultLevel: 1, policies: [fallback] } };
  }
  // validateModelConfig has checked the levels against priority_levels.
  const defaultLevel = Number(db.default_priority_level ?? 0);
  const policies = Array.from({ length: levels }, () => fallback);
  for (const [key, p] of Object.entries(db.priority_queue_policy ?? {})) policies[Number(key) - 1] = queuePolicy(p);
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
  ragged?: RaggedBatching,
): void {
  // Ragged inputs and batch outputs reach the model flattened to one dimension across the batch
  // (Triton's ONNX Runtime backend), so their rank in the model file is not the config's.
  const flat = new Set([...(ragged?.raggedInputs ?? []), ...(ragged?.batchOutputs ?? []).map((b) => b.targetName)]);
  const check = (kind: 'input' | 'output', t: ResolvedTensor, list: IoSignature[]): void => {
    const m = list.find((s) => s.name === t.name);
    // The texts are those of Triton's ONNX Runtime backend (ValidateInputs/ValidateOutputs).
    if (!m) {
      const allowed = list.map((s) => s.name).sort();
      throw ServalError.invalidArg(`unexpected inference ${kind} '${t.name}', allowed ${kind}s are: ${allowed.join(', ')}`);
    }
    if (m.datatype !== t.datatype) {
      const fileType = m.datatype ? toConfigType(m.datatype) : 'TYPE_INVALID';
      throw ServalError.invalidArg(
        `unable to load model '${name}', configuration expects datatype ${toConfigType(t.datatype)} for ${kind} '${t.name}', model provides ${fileType}`,
      );
    }
    if (!m.dims || flat.has(t.name)) return;
    const expected = [...(maxBatch > 0 ? [-1] : []), ...t.modelDims];
    const compatible =
      m.dims.length === expected.length &&
      m.dims.every((d, i) => d === -1 || expected[i] === -1 || d === expected[i]) &&
      (maxBatch === 0 || m.dims[0] === -1 || m.dims[0]! >= maxBatch);
    if (!compatible) {
      const shape = (d: readonly number[]): string => `[${d.join(',')}]`;
      const prefix = `model '${name}', tensor '${t.name}': `;
      if (maxBatch > 0 && (m.dims.length === 0 || (m.dims[0] !== -1 && m.dims[0]! < maxBatch))) {
        throw ServalError.invalidArg(
          `${prefix}for the model to support batching the shape should have at least 1 dimension and the first dimension must be -1; but shape expected by the model is ${shape(m.dims)}`,
        );
      }
      const configured =
        maxBatch > 0
          ? `${expected.length} dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape ${shape(expected)})`
          : `${expected.length} dimensions (shape ${shape(expected)})`;
      throw ServalError.invalidArg(
        `${prefix}the model expects ${m.dims.length} dimensions (shape ${shape(m.dims)}) but the model configuration specifies ${configured}`,
      );
    }
  };
  for (const t of inputs) check('input', t, sig.inputs);
  for (const t of outputs) check('output', t, sig.outputs);
  for (const b of ragged?.batchInputs ?? []) {
    const m = sig.inputs.find((s) => s.name === b.targetName);
    if (!m) throw bad(name, `batch input '${b.targetName}' is not an input of the model file`);
    if (m.datatype && m.datatype !== b.datatype) {
      throw bad(
        name,
        `batch input '${b.targetName}' has data_type ${toConfigType(b.datatype)} in the configuration, but the model file's type is ${toConfigType(m.datatype)}`,
      );
    }
  }
  const fed = new Set([...inputs.map((t) => t.name), ...(ragged?.batchInputs ?? []).map((b) => b.targetName)]);
  const missing = sig.inputs.filter((s) => !fed.has(s.name));
  if (missing.length) {
    // Triton's ONNX Runtime backend counts the inputs; this is its text.
    throw ServalError.invalidArg(
      `unable to load model '${name}', configuration expects ${fed.size} inputs, model provides ${sig.inputs.length}`,
    );
  }
}
