// Checks an inference request against its model's configuration before it reaches a scheduler,
// with Triton's error texts (clients and users grep for them), and turns it into the model's shapes.
import type { ResolvedModelConfig } from '../config/resolved.js';
import { countBytesElements, elementCount, elementSize, firstNonUtf8Element, isDataType } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import type { InferRequest } from '../kernel/types.js';
import type { ScheduledInput } from '../scheduler/scheduler.js';
import { withRawInput } from './raw_input.js';

const dimsText = (d: readonly number[]): string => `[${d.join(',')}]`;

export interface ValidatedRequest {
  batchSize: number;
  inputs: ScheduledInput[];
  /** Model output names to compute. */
  outputs: string[];
}

export function validateRequest(request: InferRequest, config: ResolvedModelConfig): ValidatedRequest {
  const model = config.name;
  // The request-id prefix of Triton's texts, made only when a check fails.
  const tag = (): string => `[request id: ${request.id || '<id_unknown>'}] `;
  const fail = (msg: string): ServalError => ServalError.invalidArg(tag() + msg);
  const req = request.rawInput ? withRawInput(request, config, fail) : request;
  const maxBatch = config.maxBatchSize;
  const configInputs = config.inputs;

  // A name given twice: Triton refuses it while it builds the request (inputs first, then the
  // requested outputs), before any other check and without the request-id prefix.
  const given = new Set<string>();
  for (const inp of req.inputs) {
    if (given.has(inp.name)) throw ServalError.invalidArg(`input '${inp.name}' already exists in request`);
    given.add(inp.name);
  }
  const seen = new Set<string>();
  for (const o of req.outputs ?? []) {
    if (seen.has(o.name)) throw ServalError.invalidArg(`output '${o.name}' already exists in request`);
    seen.add(o.name);
  }

  // Requested outputs must exist.
  let outputs = config.outputs.map((o) => o.name);
  if (req.outputs?.length) {
    for (const o of req.outputs) {
      if (!config.outputByName.has(o.name)) throw fail(`unexpected inference output '${o.name}' for model '${model}'`);
    }
    outputs = [...seen];
  }

  // Input count and names, as Triton words it.
  const byName = config.inputByName;
  for (const inp of req.inputs) {
    if (!byName.has(inp.name)) throw fail(`unexpected inference input '${inp.name}' for model '${model}'`);
  }
  const lacking = (i: (typeof configInputs)[number]): boolean => !i.optional && !given.has(i.name);
  // The lists for the error are made only when one is missing.
  if (configInputs.some(lacking)) {
    const required = configInputs.filter((i) => !i.optional);
    const missing = configInputs.filter(lacking);
    // Triton lists both as sets of names, so sorted (observed on 2.51 and in its L0 tests).
    const list = (names: string[]): string =>
      `[${names
        .sort()
        .map((n) => `'${n}'`)
        .join(',')}]`;
    const got = list(req.inputs.map((i) => i.name));
    const miss = list(missing.map((i) => i.name));
    const head =
      required.length === configInputs.length
        ? `expected ${configInputs.length} inputs but got ${req.inputs.length} inputs`
        : `expected number of inputs between ${required.length} and ${configInputs.length} but got ${req.inputs.length} inputs`;
    throw fail(
      `${head} for model '${model}'. Got input(s) ${got}, but missing required input(s) ${miss}. Please provide all required input(s).`,
    );
  }

  // Batch size: the first dimension of every input when the model batches.
  let batchSize = 0;
  if (maxBatch > 0) {
    for (const inp of req.inputs) {
      if (inp.shape.length === 0) throw fail(`input '${inp.name}' has no shape but model requires batch dimension for '${model}'`);
      if (batchSize === 0) batchSize = inp.shape[0]!;
      else if (inp.shape[0] !== batchSize) throw fail(`input '${inp.name}' batch size does not match other inputs for '${model}'`);
    }
    if (batchSize > maxBatch) throw fail(`inference request batch-size must be <= ${maxBatch} for '${model}'`);
    if (batchSize < 1) throw fail(`inference request batch-size must be >= 1 for '${model}', got ${batchSize}`);
  }

  const inputs: ScheduledInput[] = [];
  // Model order, so batches of different requests line up input by input.
  for (const cfg of configInputs) {
    const inp = req.inputs.find((i) => i.name === cfg.name);
    if (!inp) continue;
    const expected = cfg.datatype;
    if (!isDataType(inp.datatype)) {
      throw fail(`inference input '${inp.name}' has unknown data-type '${inp.datatype}'`);
    }
    if (inp.datatype !== expected) {
      throw fail(`inference input '${inp.name}' data-type is '${inp.datatype}', but model '${model}' expects '${expected}'`);
    }
    for (const d of inp.shape) {
      if (!Number.isInteger(d) || d < 0) throw fail(`input '${inp.name}' has invalid dimension ${d} in shape ${dimsText(inp.shape)}`);
    }
    const own = maxBatch > 0 ? inp.shape.slice(1) : inp.shape;
    const dims = cfg.dims;
    const matches = own.length === dims.length && own.every((d, i) => dims[i] === -1 || dims[i] === d);
    if (!matches) {
      const full = maxBatch > 0 ? [-1, ...dims] : dims;
      const note =
        maxBatch > 0
          ? 'NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. ' +
            'If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero. ' +
            'See the model configuration docs for more info on max_batch_size.'
          : '';
      throw fail(
        `unexpected shape for input '${inp.name}' for model '${model}'. Expected ${dimsText(full)}, got ${dimsText(inp.shape)}. ${note}`,
      );
    }
    const count = elementCount(inp.shape);
    if (expected === 'BYTES') {
      // Triton's phrase (which names no input), then which input and where.
      const n = countBytesElements(
        inp.data,
        `${tag()}element byte size indicator exceeds the end of the buffer for inference input '${inp.name}'`,
      );
      if (n > count) {
        // Triton stops reading at the first element too many and reports that count.
        throw fail(
          `unexpected number of string elements ${count + 1} for inference input '${inp.name}' for model '${model}', expecting ${count}`,
        );
      }
      if (n < count) {
        throw fail(`expected ${count} string elements for inference input '${inp.name}' for model '${model}', got ${n}`);
      }
      // ONNX Runtime's string tensors pass through JS strings, so bytes that are not UTF-8
      // would come back altered; refuse them rather than return different data.
      const broken = config.utf8BytesOnly ? firstNonUtf8Element(inp.data) : -1;
      if (broken >= 0) {
        throw fail(
          `inference input '${inp.name}' for model '${model}': BYTES element ${broken} is not valid UTF-8; ` +
            `the ${config.backend} backend of this server can only pass UTF-8 text through string tensors`,
        );
      }
    } else {
      const want = count * elementSize(expected);
      if (inp.data.byteLength !== want) {
        throw fail(`input byte size mismatch for input '${inp.name}' for model '${model}'. Expected ${want}, got ${inp.data.byteLength}`);
      }
    }
    // The model sees `reshape` when configured, with variable dims filled from the request.
    let modelShape = own;
    if (cfg.reshaped) {
      const vars = own.filter((_, i) => dims[i] === -1);
      modelShape = cfg.modelDims.map((d) => (d === -1 ? vars.shift()! : d));
    }
    inputs.push({
      name: inp.name,
      datatype: expected,
      shape: maxBatch > 0 ? [batchSize, ...modelShape] : modelShape,
      data: inp.data,
    });
  }
  return { batchSize, inputs, outputs };
}

/**
 * The classification extension's top-k per output, checked before the tensors are. (Shared-memory
 * parameters are the core's: core/shared_memory.ts has read those inputs before a request gets here.)
 */
const NO_CLASSES: ReadonlyMap<string, number> = new Map();

export function classCounts(req: InferRequest): ReadonlyMap<string, number> {
  let counts: Map<string, number> | undefined;
  for (const o of req.outputs ?? []) {
    const p = o.parameters ?? {};
    const cls = p.classification;
    if (cls === undefined) continue;
    if (typeof cls !== 'number' || !Number.isInteger(cls) || cls < 0) {
      throw ServalError.invalidArg(`output '${o.name}': 'classification' must be a non-negative integer`);
    }
    if (cls === 0) continue;
    counts ??= new Map();
    counts.set(o.name, cls);
  }
  // Most requests ask for no classification: one shared empty map for them.
  return counts ?? NO_CLASSES;
}

/** The request parameters that steer queueing: `priority` (0 = default level), `timeout` (µs, 0 = none). */
export function queueParameters(req: InferRequest): { priority: number; timeoutUs: number } {
  return { priority: uintParam(req, 'priority'), timeoutUs: uintParam(req, 'timeout') };
}

/** A request parameter that must be a non-negative integer (Triton's `priority`, `timeout`). */
function uintParam(req: InferRequest, key: string): number {
  const v = req.parameters[key];
  if (v === undefined) return 0;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw ServalError.invalidArg(`request parameter '${key}' must be a non-negative integer, got ${JSON.stringify(String(v))}`);
  }
  return n;
}
