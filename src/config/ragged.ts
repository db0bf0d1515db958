// Ragged batching as Triton configures it: inputs with allow_ragged_batch, the batch_input tensors
// the batcher builds for the model (element counts, item shapes) and the batch_output tensors it
// scatters back by a source input's shape. Checked at load; undefined when the model uses none.
import { type DataType, fromConfigType } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import type { BatchInputKind, BatchInputSpec, BatchOutputSpec, RaggedBatching } from './resolved.js';
import type { ModelConfig } from './types.js';

const KINDS: readonly BatchInputKind[] = [
  'BATCH_ELEMENT_COUNT',
  'BATCH_ACCUMULATED_ELEMENT_COUNT',
  'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO',
  'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE',
  'BATCH_ITEM_SHAPE',
  'BATCH_ITEM_SHAPE_FLATTEN',
];
/** The datatypes the batcher writes counts and shapes in (Triton's ValidateBatchIO). */
const COUNT_TYPES: readonly DataType[] = ['INT32', 'FP32'];

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : typeof v === 'string' ? [v] : []);

/**
 * Triton's ValidateBatchIO (the end of ValidateModelIOConfig), in its order: each batch input's
 * kind and source count, data type and source names, then each batch output's kind and source
 * count, source names and target names. Returns the message (validateIo appends " for <m>").
 */
export function validateBatchIo(config: ModelConfig): string | undefined {
  const inputs = new Set((config.input ?? []).map((t) => t.name ?? ''));
  const outputs = new Set((config.output ?? []).map((t) => t.name ?? ''));
  for (const bi of config.batch_input ?? []) {
    const kind = String(bi.kind ?? 'BATCH_ELEMENT_COUNT') as BatchInputKind;
    if (!KINDS.includes(kind)) return `unknown batch input kind '${kind}'`;
    const sources = strings(bi.source_input);
    if (sources.length !== 1) return `batch input kind '${kind}' expects 1 source input, got ${sources.length}`;
    const datatype = fromConfigType(String(bi.data_type ?? 'TYPE_INVALID'));
    if (!datatype || !COUNT_TYPES.includes(datatype)) return 'batch input data type must be TYPE_INT32 or TYPE_FP32';
    for (const source of sources) if (!inputs.has(source)) return `unknown source input name '${source}'`;
  }
  for (const bo of config.batch_output ?? []) {
    const kind = String(bo.kind ?? 'BATCH_SCATTER_WITH_INPUT_SHAPE');
    if (kind !== 'BATCH_SCATTER_WITH_INPUT_SHAPE') return `unknown batch output kind '${kind}'`;
    const sources = strings(bo.source_input);
    if (sources.length !== 1) return `batch output kind '${kind}' expects 1 source input, got ${sources.length}`;
    for (const source of sources) if (!inputs.has(source)) return `unknown source input name '${source}'`;
    const seen = new Set<string>();
    for (const target of strings(bo.target_name)) {
      if (!outputs.has(target)) return `unknown target output name '${target}'`;
      if (seen.has(target)) return `target output name '${target}' can only be specified once`;
      seen.add(target);
    }
  }
  return undefined;
}

/** The batcher's view of the batch inputs and outputs; validateIo has run validateBatchIo first. */
export function resolveRagged(config: ModelConfig): RaggedBatching | undefined {
  const name = config.name ?? '';
  // Serval's own checks; the message ends with the model, as Triton's ValidateModelIOConfig does.
  const bad = (msg: string): ServalError => ServalError.invalidArg(`${msg} for ${name}`);
  const inputs = new Set((config.input ?? []).map((t) => t.name ?? ''));
  const raggedInputs = new Set((config.input ?? []).filter((t) => t.allow_ragged_batch).map((t) => t.name ?? ''));
  const batchInputs: BatchInputSpec[] = [];
  const batchOutputs: BatchOutputSpec[] = [];
  const targets = new Set<string>();
  for (const bi of config.batch_input ?? []) {
    const kind = String(bi.kind ?? 'BATCH_ELEMENT_COUNT') as BatchInputKind;
    const targetNames = strings(bi.target_name);
    const source = strings(bi.source_input)[0]!;
    const datatype = fromConfigType(String(bi.data_type))!;
    // Not checked by Triton (its backend fails later); here at load, with the name.
    if (targetNames.length === 0) throw bad(`batch input kind '${kind}' does not specify a target name`);
    for (const target of targetNames) {
      if (inputs.has(target) || targets.has(target)) throw bad(`batch input target name '${target}' is already used by another input`);
      targets.add(target);
      batchInputs.push({ kind, targetName: target, datatype, sourceInput: source });
    }
  }
  for (const bo of config.batch_output ?? []) {
    const source = strings(bo.source_input)[0]!;
    for (const target of strings(bo.target_name)) batchOutputs.push({ targetName: target, sourceInput: source });
  }
  if ((batchInputs.length || batchOutputs.length) && (config.max_batch_size ?? 0) === 0) {
    throw bad('batch_input and batch_output require max_batch_size > 0');
  }
  // The batch inputs and the 1-D layout are what Triton's ONNX Runtime backend feeds; the Python
  // backend here splits a batch back into requests by the batch dimension, which ragged inputs lack.
  if ((raggedInputs.size || batchInputs.length || batchOutputs.length) && config.backend && config.backend !== 'onnxruntime') {
    throw bad(
      `allow_ragged_batch, batch_input and batch_output are supported for ONNX Runtime models only, not backend '${config.backend}'`,
    );
  }
  // Without batching no two requests share an execution: allow_ragged_batch changes nothing.
  if ((config.max_batch_size ?? 0) === 0 || (!raggedInputs.size && !batchInputs.length && !batchOutputs.length)) return undefined;
  return { raggedInputs, batchInputs, batchOutputs };
}
