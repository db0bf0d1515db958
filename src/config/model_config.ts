// Normalises a parsed model configuration the way Triton does (defaults, derived values) and
// validates it, first on its own and then against the model file's inputs and outputs.
import { fromConfigType, elementCount, type DataType } from '../core/datatypes.js';
import { ServalError } from '../core/errors.js';
import type { IoSignature, ModelSignature } from '../backends/backend.js';
import type { ModelConfig, ModelInput, ModelOutput } from './types.js';

export const ONNX_PLATFORM = 'onnxruntime_onnx';
export const ONNX_BACKEND = 'onnxruntime';
export const DEFAULT_MODEL_FILENAME = 'model.onnx';

function bad(model: string, msg: string): ServalError {
  return ServalError.invalidArg(`model '${model}': ${msg}`);
}

/** Fills Triton's defaults in place and checks everything that needs no model file. */
export function normalizeConfig(config: ModelConfig, folderName: string): ModelConfig {
  const name = config.name || folderName;
  if (config.name && config.name !== folderName) {
    throw bad(folderName, `config name '${config.name}' does not match the model folder name '${folderName}'`);
  }
  config.name = name;
  const platform = config.platform ?? '';
  const backend = config.backend ?? '';
  if (!platform && !backend) {
    config.platform = ONNX_PLATFORM;
    config.backend = ONNX_BACKEND;
  } else if (platform && platform !== ONNX_PLATFORM) {
    throw ServalError.invalidArg(
      `model '${name}': unsupported platform '${platform}'; Serval runs ONNX models only (platform "${ONNX_PLATFORM}" or backend "${ONNX_BACKEND}")`,
    );
  } else if (backend && backend !== ONNX_BACKEND) {
    throw ServalError.invalidArg(
      `model '${name}': unsupported backend '${backend}'; Serval runs ONNX models only (platform "${ONNX_PLATFORM}" or backend "${ONNX_BACKEND}")`,
    );
  } else {
    config.platform = ONNX_PLATFORM;
    config.backend = ONNX_BACKEND;
  }
  config.default_model_filename ||= DEFAULT_MODEL_FILENAME;
  config.max_batch_size ??= 0;
  if (!Number.isInteger(config.max_batch_size) || config.max_batch_size < 0) {
    throw bad(name, `max_batch_size must be a non-negative integer, got ${config.max_batch_size}`);
  }
  config.version_policy ??= { latest: { num_versions: 1 } };
  config.input ??= [];
  config.output ??= [];
  if (config.sequence_batching) {
    throw ServalError.unsupported(`model '${name}': sequence_batching is not supported by Serval`);
  }
  if (config.ensemble_scheduling) {
    throw ServalError.unsupported(`model '${name}': ensemble_scheduling is not supported by Serval`);
  }

  const seen = new Set<string>();
  for (const [kind, list] of [['input', config.input], ['output', config.output]] as const) {
    for (const t of list as (ModelInput | ModelOutput)[]) {
      if (!t.name) throw bad(name, `an ${kind} has no name`);
      if (seen.has(`${kind}:${t.name}`)) throw bad(name, `${kind} '${t.name}' is declared more than once`);
      seen.add(`${kind}:${t.name}`);
      const dt = t.data_type ?? 'TYPE_INVALID';
      if (!fromConfigType(dt)) throw bad(name, `${kind} '${t.name}' has unsupported data_type ${dt}`);
      t.dims ??= [];
      for (const d of t.dims) {
        if (!(d === -1 || (Number.isInteger(d) && d > 0))) {
          throw bad(name, `${kind} '${t.name}' has invalid dimension ${d} in dims [${t.dims.join(',')}]; dimensions must be positive or -1`);
        }
      }
      if (t.reshape) {
        const shape = t.reshape.shape ?? [];
        const fixed = (s: number[]): number => elementCount(s.filter((d) => d !== -1));
        const varying = (s: number[]): number => s.filter((d) => d === -1).length;
        if (varying(t.dims) !== varying(shape) || (varying(t.dims) === 0 && fixed(t.dims) !== fixed(shape))) {
          throw bad(
            name,
            `${kind} '${t.name}' has a reshape [${shape.join(',')}] whose element count does not match its dims [${t.dims.join(',')}]`,
          );
        }
      }
    }
  }

  const db = config.dynamic_batching;
  if (db) {
    if (config.max_batch_size === 0) {
      throw bad(name, 'dynamic batching requires max_batch_size > 0');
    }
    db.preferred_batch_size ??= [];
    for (const p of db.preferred_batch_size) {
      if (p < 1 || p > config.max_batch_size) {
        throw bad(name, `preferred_batch_size ${p} must be between 1 and max_batch_size ${config.max_batch_size}`);
      }
    }
    db.max_queue_delay_microseconds ??= 0;
  }
  return config;
}

/** The model's shape for a config tensor: `reshape` when given, else `dims`. */
export function modelDims(t: ModelInput | ModelOutput): number[] {
  return t.reshape ? t.reshape.shape ?? [] : t.dims ?? [];
}

/**
 * Checks config inputs/outputs against the model file: every configured tensor exists with the
 * same datatype and a compatible shape (the batch dimension counted when max_batch_size > 0).
 */
export function validateAgainstModel(config: ModelConfig, sig: ModelSignature): void {
  const name = config.name!;
  const check = (kind: 'input' | 'output', t: ModelInput | ModelOutput, list: IoSignature[]): void => {
    const m = list.find((s) => s.name === t.name);
    if (!m) {
      throw ServalError.invalidArg(
        `model '${name}': unexpected ${kind} '${t.name}' in the model configuration; the model file's ${kind}s are [${list
          .map((s) => `'${s.name}'`)
          .join(', ')}]`,
      );
    }
    const want = fromConfigType(t.data_type!) as DataType;
    if (m.datatype !== want) {
      throw ServalError.invalidArg(
        `model '${name}': ${kind} '${t.name}' has data_type ${t.data_type} in the configuration, but the model file's type is ${m.datatype ? `TYPE_${m.datatype === 'BYTES' ? 'STRING' : m.datatype}` : `'${m.rawType}' (unsupported)`}`,
      );
    }
    if (!m.dims) return;
    const expected = [...(config.max_batch_size! > 0 ? [-1] : []), ...modelDims(t)];
    const compatible =
      m.dims.length === expected.length &&
      m.dims.every((d, i) => d === -1 || expected[i] === -1 || d === expected[i]) &&
      (config.max_batch_size! === 0 || m.dims[0] === -1 || m.dims[0]! >= config.max_batch_size!);
    if (!compatible) {
      throw ServalError.invalidArg(
        `model '${name}': ${kind} '${t.name}' has shape [${m.dims.join(',')}] in the model file, but the configuration gives [${expected.join(',')}]` +
          (config.max_batch_size! > 0 ? ' (a batch dimension first because max_batch_size > 0, then dims)' : ''),
      );
    }
  };
  for (const t of config.input!) check('input', t, sig.inputs);
  for (const t of config.output!) check('output', t, sig.outputs);
  const missing = sig.inputs.filter((s) => !config.input!.some((t) => t.name === s.name));
  if (missing.length) {
    throw ServalError.invalidArg(
      `model '${name}': the model file has input(s) [${missing.map((s) => `'${s.name}'`).join(', ')}] that the configuration does not declare`,
    );
  }
}
