// Model warmup: turns the configuration's `model_warmup` samples into ready-to-run executions,
// after Triton core's TritonModelInstance::GenerateWarmupData (core src/backend_model_instance.cc)
// and the ModelWarmup documentation in model_config.proto:
//
//  - a sample with batch_size 0 (or none) is skipped;
//  - every input's `dims` exclude the batch dimension and must all be fixed (no -1);
//  - `zero_data` (set at all, whatever its value) gives zeros; for TYPE_STRING that is 4 zero
//    bytes per element, i.e. empty strings;
//  - `random_data` gives random bytes; for TYPE_STRING it falls back to zero data (empty strings);
//  - `input_data_file` is read from the `warmup` folder of the model directory and holds one
//    sample in row-major order (TYPE_STRING: 4-byte little-endian length + bytes per element).
//    A numeric file shorter than the sample is an error; a longer one is used up to the sample
//    size, as Triton does. A TYPE_STRING file is used whole;
//  - the sample is repeated `batch_size` times: Triton sends batch_size requests of batch 1 that
//    the backend runs as one batch of batch_size. A model that does not batch (max_batch_size 0)
//    accepts batch_size 1 only (Triton's backends fail "batch size N ..., max allowed is 0");
//  - `count` (0 = once) is how many times the sample runs;
//  - a sequence model's sample may also name its control inputs (START, END, READY, CORRID) and
//    implicit state inputs ("every model input, including control tensors"): Triton adds them
//    unchecked as override inputs, with a batch dimension of 1 per request when the model batches.
//    The sample bypasses the sequence batcher (no sequence, slot or state); the ones it leaves out
//    get the values of a request that is a whole sequence by itself (START, END, READY true,
//    CORRID 0, the initial state), where Triton would leave them out and the backend would fail.
//
// The execution is built like a client request: checked by validate.ts (data types, shapes against
// the config dims, reshape, BYTES element counts), requesting every output of the model; each run
// is assembled into an instance's reservation like any batch (scheduler's `submit`).

import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { ResolvedModelConfig } from '../config/resolved.js';
import type { ModelWarmup, ModelWarmupInput } from '../config/types.js';
import { confinedPath, displayPath } from '../kernel/confine.js';
import { type DataType, elementCount, elementSize, fromConfigType, splitBytes } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import type { InferInputTensor, InferRequest } from '../kernel/types.js';
import type { ScheduledInput } from '../scheduler/scheduler.js';
import { type StateTensor, standaloneSequenceInputs } from '../scheduler/sequence_batcher.js';
import { type ValidatedRequest, validateRequest } from './validate.js';

/** Triton's kWarmupDataFolder. */
export const WARMUP_DATA_FOLDER = 'warmup';

export interface WarmupSample {
  /** The sample's `name` from the configuration. */
  name: string;
  /** The sample as one request: its inputs in the model's shapes, every output. */
  req: ValidatedRequest;
  /** How many times to run it (at least 1). */
  count: number;
}

/**
 * Builds one execution per `model_warmup` sample of a normalised configuration. `modelDir` is the
 * model's directory in the repository (the one holding config.pbtxt and the `warmup` folder).
 * `initialStates`: a sequence model's data-file initial states (readInitialStates).
 * Throws ServalError (INVALID_ARG) naming the model, the sample and the input on any problem.
 */
export async function warmupRequests(
  config: ResolvedModelConfig,
  modelDir: string,
  initialStates?: ReadonlyMap<string, StateTensor>,
): Promise<WarmupSample[]> {
  const samples: WarmupSample[] = [];
  const list = config.warmup;
  for (let i = 0; i < list.length; i++) {
    const sample = await buildSample(config, list[i]!, i, modelDir, initialStates);
    if (sample) samples.push(sample);
  }
  return samples;
}

async function buildSample(
  config: ResolvedModelConfig,
  w: ModelWarmup,
  index: number,
  modelDir: string,
  initialStates: ReadonlyMap<string, StateTensor> | undefined,
): Promise<WarmupSample | undefined> {
  const model = config.name;
  const sampleName = w.name ?? '';
  const where = `model '${model}': warmup sample '${sampleName || `#${index}`}'`;
  const fail = (msg: string): ServalError => ServalError.invalidArg(`${where}: ${msg}`);

  const batchSize = w.batch_size ?? 0;
  if (batchSize === 0) return undefined; // Triton: "Skipping batch 0 warmup sample"
  if (!Number.isInteger(batchSize) || batchSize < 0) throw fail(`batch_size must be a positive integer, got ${batchSize}`);
  const maxBatch = config.maxBatchSize;
  if (maxBatch === 0 && batchSize !== 1) {
    throw fail(`batch_size is ${batchSize}, but the model does not support batching (max_batch_size 0), so batch_size must be 1`);
  }
  if (maxBatch > 0 && batchSize > maxBatch) {
    throw fail(`batch_size ${batchSize} exceeds the model's max_batch_size ${maxBatch}`);
  }

  const configInputs = config.inputs;
  const warmInputs = Object.entries(w.inputs ?? {});
  const seq = config.sequence;
  const seqInputs = seq ? [...seq.controls.map((c) => c.input), ...seq.states.map((s) => s.inputName)] : [];
  for (const [name] of warmInputs) {
    if (!configInputs.some((c) => c.name === name) && !seqInputs.includes(name)) {
      const also = seqInputs.length ? ` and its sequence control and state inputs [${seqInputs.map((n) => `'${n}'`).join(', ')}]` : '';
      throw fail(`unknown input '${name}'; the model's inputs are [${configInputs.map((c) => `'${c.name}'`).join(', ')}]${also}`);
    }
  }
  const missing = configInputs.filter((c) => !c.optional && !warmInputs.some(([n]) => n === c.name));
  if (missing.length) {
    throw fail(`no data for required input(s) [${missing.map((c) => `'${c.name}'`).join(', ')}]`);
  }

  const inputs: InferInputTensor[] = [];
  const overrides: ScheduledInput[] = [];
  for (const [name, wi] of warmInputs) {
    const sampleData = await sampleBytes(wi, modelDir, (msg) => fail(`input '${name}': ${msg}`));
    const datatype = fromConfigType(wi.data_type!) as DataType;
    const dims = wi.dims ?? [];
    const tensor = { name, datatype, shape: maxBatch > 0 ? [batchSize, ...dims] : [...dims], data: repeat(sampleData, batchSize) };
    // Control and state inputs are not checked against the config (Triton's override inputs).
    if (seqInputs.includes(name)) overrides.push(tensor);
    else inputs.push(tensor);
  }

  const req: InferRequest = { modelName: model, modelVersion: '', id: '', inputs, parameters: {} };
  let validated: ValidatedRequest;
  try {
    validated = validateRequest(req, config);
  } catch (e) {
    if (!(e instanceof ServalError)) throw e;
    throw fail(e.message.replace(/^\[request id: [^\]]*\] /, ''));
  }
  if (seq) {
    const named = new Set(overrides.map((o) => o.name));
    const seqModel = { name: model, maxBatchSize: maxBatch, policy: seq, ...(initialStates && { initialStates }) };
    validated.inputs.push(...overrides, ...standaloneSequenceInputs(seqModel, batchSize, named));
  }
  const count = w.count !== undefined && w.count > 0 ? w.count : 1;
  return { name: sampleName, req: validated, count };
}

/** The bytes of one batch-1 sample of a warmup input. */
async function sampleBytes(wi: ModelWarmupInput, modelDir: string, fail: (msg: string) => ServalError): Promise<Uint8Array> {
  const configType = wi.data_type ?? 'TYPE_INVALID';
  const dt = fromConfigType(configType);
  if (!dt) throw fail(`data_type ${configType} is not supported`);
  const dims = wi.dims ?? [];
  for (const d of dims) {
    if (d === -1) throw fail(`all variable-size dimensions must be specified in warmup dims [${dims.join(',')}]`);
    if (!Number.isInteger(d) || d < 0) throw fail(`invalid dimension ${d} in warmup dims [${dims.join(',')}]`);
  }
  const count = elementCount(dims);
  const size = dt === 'BYTES' ? 4 : elementSize(dt); // BYTES: a zero 4-byte length per element

  // Oneof: a member counts when set at all, whatever its value (model_config.proto).
  if (wi.input_data_file !== undefined) {
    return fileBytes(wi.input_data_file, dt, dims, count * size, modelDir, fail);
  }
  if (wi.random_data !== undefined && dt !== 'BYTES') {
    const bytes = new Uint8Array(randomBytes(count * size));
    if (dt === 'BOOL') for (let i = 0; i < bytes.length; i++) bytes[i]! &= 1;
    return bytes;
  }
  if (wi.zero_data !== undefined || wi.random_data !== undefined) return new Uint8Array(count * size);
  throw fail('no input data source; set one of zero_data, random_data or input_data_file');
}

async function fileBytes(
  file: string,
  dt: DataType,
  dims: number[],
  need: number,
  modelDir: string,
  fail: (msg: string) => ServalError,
): Promise<Uint8Array> {
  let full: string;
  try {
    full = await confinedPath(modelDir, WARMUP_DATA_FOLDER, { field: 'input_data_file', value: file });
  } catch (e) {
    throw fail((e as Error).message);
  }
  let data: Buffer;
  try {
    data = await readFile(full);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw fail(
      `cannot read input_data_file '${file}' (${displayPath(modelDir, full)}): ${code === 'ENOENT' ? 'no such file' : (code ?? 'error')}`,
    );
  }
  if (dt === 'BYTES') {
    let n: number;
    try {
      n = splitBytes(data, `input_data_file '${file}'`).length;
    } catch (e) {
      throw fail((e as Error).message);
    }
    const want = elementCount(dims);
    if (n !== want) {
      throw fail(`input_data_file '${file}' holds ${n} string element(s), but dims [${dims.join(',')}] need ${want}`);
    }
    return data;
  }
  if (data.byteLength < need) {
    throw fail(
      `input_data_file '${file}' has ${data.byteLength} bytes, but ${dt} dims [${dims.join(',')}] need ${need} bytes` +
        ` (one sample, without the batch dimension)`,
    );
  }
  return data.subarray(0, need);
}

function repeat(sample: Uint8Array, times: number): Uint8Array {
  if (times === 1) return sample;
  const out = new Uint8Array(sample.byteLength * times);
  for (let i = 0; i < times; i++) out.set(sample, i * sample.byteLength);
  return out;
}
