// The sequence batcher's inputs from outside the scheduler: a request's sequence parameters (both
// protocols carry them in the request's `parameters`) and the initial_state data files of a model.
import { readFile } from 'node:fs/promises';
import type { ResolvedModelConfig } from '../config/resolved.js';
import { INITIAL_STATE_FOLDER } from '../config/sequence_config.js';
import { confinedPath } from '../kernel/confine.js';
import { elementCount, elementSize } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import type { InferRequest } from '../kernel/types.js';
import type { SequenceFlags, StateTensor } from '../scheduler/sequence_batcher.js';

/**
 * `sequence_id` (an unsigned 64-bit integer or a string; 0 and "" mean none), `sequence_start` and
 * `sequence_end` (booleans), as tritonclient's infer(sequence_id=, sequence_start=, sequence_end=)
 * sends them. Undefined when the request names no sequence. Checked for every model, as Triton's
 * front-ends do; only a sequence model uses them.
 */
export function sequenceParameters(req: InferRequest): SequenceFlags | undefined {
  const p = req.parameters;
  const raw = p.sequence_id;
  const start = flag(p.sequence_start, 'sequence_start');
  const end = flag(p.sequence_end, 'sequence_end');
  if (raw === undefined) return start || end ? { id: 0n, start, end } : undefined;
  let id: bigint | string;
  if (typeof raw === 'string') id = raw;
  else if (typeof raw === 'bigint' || (typeof raw === 'number' && Number.isSafeInteger(raw))) id = BigInt(raw);
  else id = -1n;
  if (typeof id === 'bigint' && (id < 0n || id >= 1n << 64n)) {
    throw ServalError.invalidArg(
      `invalid value for 'sequence_id' parameter: expected an unsigned 64-bit integer or a string, got ${JSON.stringify(String(raw))}`,
    );
  }
  return { id, start, end };
}

function flag(v: unknown, key: string): boolean {
  if (v === undefined) return false;
  if (typeof v !== 'boolean') {
    throw ServalError.invalidArg(`invalid value type for '${key}' parameter: expected a boolean, got ${JSON.stringify(String(v))}`);
  }
  return v;
}

/**
 * The initial values of states whose initial_state names a data_file, read from the model's
 * `initial_state` folder (Triton: raw bytes in row-major order; at least the state's size, a longer
 * file is cut; TYPE_STRING files are taken whole). Zero initial states need no file.
 */
export async function readInitialStates(config: ResolvedModelConfig, modelDir: string): Promise<Map<string, StateTensor>> {
  const out = new Map<string, StateTensor>();
  for (const s of config.sequence?.states ?? []) {
    if (s.initial.kind !== 'file') continue;
    const file = s.initial.file;
    const where = await confinedPath(modelDir, INITIAL_STATE_FOLDER, {
      model: config.name,
      field: `initial_state data_file of state '${s.inputName}'`,
      value: file,
    });
    const data = await readFile(where).catch((e: NodeJS.ErrnoException) => {
      const why = e.code === 'ENOENT' ? 'no such file' : (e.code ?? 'error');
      throw ServalError.invalidArg(`model '${config.name}': cannot read initial_state file '${file}' of state '${s.inputName}': ${why}`);
    });
    const shape = s.initial.dims;
    if (s.datatype === 'BYTES') {
      out.set(s.inputName, { shape, data });
      continue;
    }
    const want = elementCount(shape) * elementSize(s.datatype);
    if (data.byteLength < want) {
      throw ServalError.invalidArg(
        `model '${config.name}': initial_state setting expects ${want} bytes, but the data provided from ${file} only has ${data.byteLength} bytes.`,
      );
    }
    out.set(s.inputName, { shape, data: data.subarray(0, want) });
  }
  return out;
}
