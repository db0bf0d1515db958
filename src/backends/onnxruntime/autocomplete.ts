// Model-configuration auto-complete from the model file's signature, after Triton's ONNX Runtime
// backend (onnxruntime_backend src/onnxruntime.cc: ModelState::AutoCompleteConfig,
// AutoCompleteMaxBatch, AutoCompleteIO) and Triton's "Default Max Batch Size and Dynamic Batcher"
// rules (server docs/user_guide/model_configuration.md):
//
//  - platform/backend: filled for ONNX when missing (Triton core does this from the file name).
//  - When the configuration lists both inputs (or batch inputs) and outputs, Triton skips
//    auto-complete altogether: max_batch_size and the scheduler are left alone.
//  - Otherwise the model "can batch" when every input and output of the model file has a rank
//    >= 1 and a variable (-1) first dimension. Then, when max_batch_size is not set, it becomes the
//    default max batch size (Triton's --backend-config=default-max-batch-size, 4 by default), and
//    when the resulting max_batch_size is > 1 and the configuration has no scheduler,
//    `dynamic_batching {}` is added. A model that cannot batch but has a non-zero max_batch_size
//    is an error ("autofill failed ...").
//  - A missing (or empty) input list / output list is replaced by every tensor of the model file:
//    name, data_type, and dims without the first dimension when max_batch_size > 0. A tensor whose
//    dims come out empty gets dims [1] plus `reshape { shape: [] }` (the reshape only when the
//    model batches, as Triton does).
//
// Deliberate differences from Triton, only where Triton cannot tell or would fail:
//  - With sequence_batching, the control and state tensors the batcher feeds (and state outputs)
//    are not added as inputs/outputs: clients could not send them (Triton's backend lists every
//    tensor of the model file).
//  - Triton cannot distinguish `max_batch_size: 0` written in the file from an absent field (proto3
//    has no presence for scalars), so it batches a model whose file says 0. Here an explicit 0 is
//    kept: the model does not batch. Only an absent field takes the default.
//  - For tensors the configuration does list, a missing data_type or dims is filled from the model
//    file (Triton would reject the configuration instead). Nothing the user wrote is overridden.
import type { IoSignature, ModelSignature } from '../../config/signature.js';
import type { DataType as ConfigDataType, ModelConfig, ModelInput, ModelOutput } from '../../config/types.js';
import { toConfigType } from '../../kernel/datatypes.js';
import { ServalError } from '../../kernel/errors.js';
import { ONNX_BACKEND, ONNX_PLATFORM } from './names.js';

/** Triton's default for --backend-config=default-max-batch-size. */
export const DEFAULT_MAX_BATCH_SIZE = 4;

export interface AutoCompleteOptions {
  /** Triton's default-max-batch-size backend setting; 4 when not given. Negative counts as 0. */
  maxBatchSizeDefault?: number;
}

/**
 * Returns a copy of `config` completed from the model file's signature. Pure: `config` and `sig`
 * are not modified. Throws ServalError (INVALID_ARG) where Triton's auto-complete fails.
 */
export function autoCompleteConfig(config: ModelConfig, sig: ModelSignature, opts: AutoCompleteOptions = {}): ModelConfig {
  const out = structuredClone(config);
  const model = out.name ?? '';

  // Platform and backend (Triton core fills one from the other; both for an ONNX model file).
  if (!out.platform && !out.backend) {
    out.platform = ONNX_PLATFORM;
    out.backend = ONNX_BACKEND;
  } else if (!out.platform && out.backend === ONNX_BACKEND) {
    out.platform = ONNX_PLATFORM;
  } else if (!out.backend && out.platform === ONNX_PLATFORM) {
    out.backend = ONNX_BACKEND;
  }

  const inputCount = (out.input?.length ?? 0) + (out.batch_input?.length ?? 0);
  const outputCount = out.output?.length ?? 0;

  if (inputCount === 0 || outputCount === 0) {
    completeMaxBatch(out, sig, model, opts);
    const maxBatch = out.max_batch_size ?? 0;
    // The sequence batcher feeds control and state inputs itself: clients do not send them.
    const fed = new Set([
      ...(out.sequence_batching?.control_input ?? []).map((c) => c.name),
      ...(out.sequence_batching?.state ?? []).map((s) => s.input_name),
    ]);
    if (inputCount === 0) out.input = sig.inputs.filter((s) => !fed.has(s.name)).map((s) => generated('input', s, maxBatch, model));
    // A state output stays out too (listing it lets clients request it, which is a choice).
    const kept = new Set((out.sequence_batching?.state ?? []).map((s) => s.output_name));
    if (outputCount === 0) out.output = sig.outputs.filter((s) => !kept.has(s.name)).map((s) => generated('output', s, maxBatch, model));
  }

  // Fill what is missing in tensors the user listed (after max_batch_size is final).
  const maxBatch = out.max_batch_size ?? 0;
  for (const t of out.input ?? []) fillMissing(t, sig.inputs, maxBatch);
  for (const t of out.output ?? []) fillMissing(t, sig.outputs, maxBatch);
  return out;
}

/** onnxruntime.cc AutoCompleteMaxBatch, with an explicit max_batch_size of 0 respected. */
function completeMaxBatch(out: ModelConfig, sig: ModelSignature, model: string, opts: AutoCompleteOptions): void {
  const all = [...sig.inputs, ...sig.outputs];
  const canBatch = all.every((s) => s.dims !== undefined && s.dims.length > 0 && s.dims[0] === -1);
  if (canBatch) {
    if (out.max_batch_size === undefined) {
      out.max_batch_size = Math.max(Math.trunc(opts.maxBatchSizeDefault ?? DEFAULT_MAX_BATCH_SIZE), 0);
    }
    if (out.max_batch_size > 1 && !out.dynamic_batching && !out.sequence_batching && !out.ensemble_scheduling) {
      out.dynamic_batching = {};
    }
    return;
  }
  // Only a model whose every rank is known definitely cannot batch.
  const ranksKnown = all.every((s) => s.dims !== undefined);
  if (ranksKnown && (out.max_batch_size ?? 0) !== 0) {
    throw ServalError.invalidArg(
      `autofill failed for model '${model}': model does not support batching while non-zero max_batch_size is specified` +
        ` (every input and output of the model file needs a variable first dimension; not so for ${all
          .filter((s) => !(s.dims && s.dims.length > 0 && s.dims[0] === -1))
          .map((s) => `'${s.name}' [${(s.dims ?? []).join(',')}]`)
          .join(', ')})`,
    );
  }
}

function configType(kind: 'input' | 'output', s: IoSignature, model: string): ConfigDataType {
  if (!s.datatype) {
    throw ServalError.invalidArg(
      `autofill failed for model '${model}': ${kind} '${s.name}' of the model file has type '${s.rawType}', which has no model-config data type`,
    );
  }
  return toConfigType(s.datatype) as ConfigDataType;
}

/** The config dims for a model-file shape, and the reshape an empty shape needs (AutoCompleteIO). */
function dimsFor(modelDims: number[], maxBatch: number): { dims: number[]; reshape?: { shape: number[] } } {
  const dims = modelDims.slice(maxBatch > 0 ? 1 : 0);
  if (dims.length > 0) return { dims };
  return maxBatch > 0 ? { dims: [1], reshape: { shape: [] } } : { dims: [1] };
}

function generated(kind: 'input' | 'output', s: IoSignature, maxBatch: number, model: string): ModelInput & ModelOutput {
  const t: ModelInput & ModelOutput = { name: s.name, data_type: configType(kind, s, model) };
  if (s.dims) Object.assign(t, dimsFor(s.dims, maxBatch));
  return t;
}

function fillMissing(t: ModelInput | ModelOutput, list: IoSignature[], maxBatch: number): void {
  const s = list.find((m) => m.name === t.name);
  if (!s) return;
  if (t.data_type === undefined && s.datatype) t.data_type = toConfigType(s.datatype) as ConfigDataType;
  // With a reshape the model's shape is known but the client-facing dims are not.
  if (t.dims === undefined && s.dims && !t.reshape) Object.assign(t, dimsFor(s.dims, maxBatch));
}
