// Triton's model-level config checks (core's ValidateModelConfig plus the folder-name check), in
// Triton's order and with Triton's texts. They need neither the model file nor a version folder,
// so the repository runs them before it looks for versions, as Triton does. The per-tensor checks
// (ValidateModelIOConfig) are `validateIo` below; resolve.ts runs both. docs/config_checks.md
// lists every check next to Triton's.
import { elementCount } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import { validateBatchIo } from './ragged.js';
import { validateSequenceBatching } from './sequence_config.js';
import type { ModelConfig, ModelInput, ModelOutput } from './types.js';

const invalid = (msg: string): ServalError => ServalError.invalidArg(msg);

/**
 * The checks Triton runs when it polls a model folder, before any version loads. `folderName` is
 * the model's folder; a config without a name takes it (Triton's auto-complete does the same).
 */
export function validateModelConfig(config: ModelConfig, folderName: string): void {
  const name = config.name || folderName;
  const maxBatch = config.max_batch_size ?? 0;
  // The config parser accepts any number where protobuf takes an int32; a fraction is Serval's
  // own refusal, with Triton's text.
  if (maxBatch < 0 || !Number.isInteger(maxBatch)) throw invalid(`'max_batch_size' must be non-negative value for ${name}`);
  const db = config.dynamic_batching;
  if (db) {
    for (const size of db.preferred_batch_size ?? []) {
      if (size <= 0) throw invalid(`dynamic batching preferred size must be positive for ${name}`);
      if (size > maxBatch) throw invalid(`dynamic batching preferred size must be <= max batch size for ${name}`);
    }
    const levels = Number(db.priority_levels ?? 0);
    if (levels !== 0) {
      const defaultLevel = Number(db.default_priority_level ?? 0);
      if (defaultLevel === 0 || defaultLevel > levels) {
        throw invalid(`default priority level must be in range [1, ${levels}] for ${name}`);
      }
      for (const key of Object.keys(db.priority_queue_policy ?? {})) {
        const level = Number(key);
        if (level === 0 || level > levels || !Number.isInteger(level)) {
          throw invalid(`priority queue policy must have priority level in range [1, ${levels}] for ${name}`);
        }
      }
    }
    if (db.preserve_ordering) {
      if (levels > 1) throw invalid(`Only one priority level is allowed when 'preserve_ordering' is true for ${name}`);
      const delays = [db.default_queue_policy, ...Object.values(db.priority_queue_policy ?? {})].some(
        (p) => p && Number(p.default_timeout_microseconds ?? 0) !== 0 && p.timeout_action === 'DELAY',
      );
      if (delays) throw invalid(`Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for ${name}`);
    }
  }
  if (config.sequence_batching) {
    if (config.response_cache?.enable) {
      throw invalid(
        `Response Cache does not currently support model ${name} with sequence batching scheduler. Please disable the response cache.`,
      );
    }
    validateSequenceBatching(config.sequence_batching, name, maxBatch);
  }
  // The rest of Triton's ValidateEnsembleSchedulingConfig (the steps and their data flow) is
  // planEnsemble (config/ensemble.ts), which the repository runs right after this.
  if (config.ensemble_scheduling && config.platform !== 'ensemble') {
    throw invalid(`ensemble scheduling cannot be set for model '${name}' whose platform is not ensemble`);
  }
  if (config.model_transaction_policy?.decoupled && config.response_cache?.enable) {
    throw invalid(
      `Response Cache does not currently support model ${name} with 'decoupled' transaction policy. Please disable the response cache.`,
    );
  }
  // Triton checks the name last, once the config has passed.
  if (config.name && config.name !== folderName) {
    throw invalid(`unexpected directory name '${folderName}' for model '${config.name}', directory name must equal model name`);
  }
}

/** Triton's ValidateModelIOConfig: each input, then each output, then the batch inputs and outputs; the message ends with the model. */
export function validateIo(config: ModelConfig, name: string): void {
  const maxBatch = config.max_batch_size ?? 0;
  const platform = config.platform ?? '';
  const fail = (msg: string): never => {
    throw invalid(`${msg} for ${name}`);
  };
  for (const io of config.input ?? []) {
    const msg = ioShapeError(io, maxBatch, 'model input ');
    if (msg) fail(msg);
    if ((io.format === 'FORMAT_NHWC' || io.format === 'FORMAT_NCHW') && io.dims?.length !== 3) fail('model input NHWC/NCHW require 3 dims');
    commonIo(io, platform, 'input', fail);
  }
  for (const io of config.output ?? []) {
    const msg = ioShapeError(io, maxBatch, 'model output ');
    if (msg) fail(msg);
    commonIo(io, platform, 'output', fail);
  }
  const batchIo = validateBatchIo(config);
  if (batchIo) fail(batchIo);
}

function commonIo(io: ModelInput | ModelOutput, platform: string, kind: string, fail: (msg: string) => never): void {
  if (platform !== 'tensorrt_plan' && io.is_shape_tensor) fail('shape tensors are only supported for TensorRT platform');
  if (io.is_non_linear_format_io) {
    if (platform !== 'tensorrt_plan') fail('Non-linear IO format is only supported for the TensorRT platform');
    if (io.dims?.length !== 3) fail(`Non-linear IO format ${kind} requires 3 dims`);
  }
}

const WILDCARD = -1;

/** Triton's element count: -1 when any dimension varies, 0 for no dimensions. */
function countOf(dims: readonly number[]): number {
  if (dims.length === 0) return 0;
  return dims.includes(WILDCARD) ? WILDCARD : elementCount(dims);
}

/** The product of each run of fixed dimensions between variable ones. */
function runs(dims: readonly number[]): number[] {
  const out: number[] = [];
  let current = 1;
  for (const d of dims) {
    if (d === WILDCARD) {
      out.push(current);
      current = 1;
    } else current *= d;
  }
  out.push(current);
  return out;
}

/** Triton's ValidateIOShape; returns the message (without " for <model>") or undefined. */
function ioShapeError(io: ModelInput | ModelOutput, maxBatch: number, prefix: string): string | undefined {
  if (!io.name) return `${prefix}must specify 'name'`;
  const named = `${prefix}'${io.name}' `;
  if (!io.data_type || io.data_type === 'TYPE_INVALID') return `${named}must specify 'data_type'`;
  const dims = io.dims ?? [];
  if (dims.length === 0) return `${named}must specify 'dims'`;
  const shape = io.reshape ? (io.reshape.shape ?? []) : undefined;
  if (shape && shape.length === 0 && maxBatch === 0) {
    return `${named}cannot have empty reshape for non-batching model as scalar tensors are not supported`;
  }
  const badDim = (d: number): boolean => !Number.isInteger(d) || (d < 1 && d !== WILDCARD);
  if (dims.some(badDim)) return `${named}dimension must be integer >= 1, or -1 to indicate a variable-size dimension`;
  if (!shape) return undefined;
  if (shape.some(badDim)) return `${named}reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension`;
  const dimsSize = countOf(dims);
  const reshapeSize = countOf(shape);
  if (dimsSize !== reshapeSize && (reshapeSize !== 0 || dimsSize !== 1)) return `${named}has different size for dims and reshape`;
  if (dimsSize === WILDCARD) {
    const a = runs(dims);
    const b = runs(shape);
    if (a.length !== b.length) return `${named}has different number of variable-size dimensions for dims and reshape`;
    if (a.some((n, i) => n !== b[i])) return `${named}has different size for dims and reshape`;
  }
  return undefined;
}
