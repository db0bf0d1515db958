// Reads an ONNX file's graph inputs and outputs straight from its protobuf encoding, on the main
// thread and before any session exists: the load resolves and checks the config first, then
// starts instances. Only the few fields needed are decoded; weights (initializers) are skipped by
// their length prefix. A large file is not read whole: its fields are walked with positional
// reads of their headers, so a 100 MB model costs a few hundred small reads instead of 100 MB of
// main-thread memory that only a later garbage collection would give back (tools/bench/density.ts).
import { type FileHandle, open } from 'node:fs/promises';
import type { IoSignature, ModelSignature } from '../../config/signature.js';
import { fromOrtType } from '../../kernel/datatypes.js';
import { ServalError } from '../../kernel/errors.js';

// Field numbers of onnx.proto.
const MODEL_GRAPH = 7;
const GRAPH_INITIALIZER = 5;
const GRAPH_INPUT = 11;
const GRAPH_OUTPUT = 12;
const GRAPH_SPARSE_INITIALIZER = 15;
const TENSOR_NAME = 8;
const SPARSE_VALUES = 1;
const VALUE_NAME = 1;
const VALUE_TYPE = 2;
const TYPE_TENSOR = 1;
const TENSOR_TYPE_ELEM = 1;
const TENSOR_TYPE_SHAPE = 2;
const SHAPE_DIM = 1;
const DIM_VALUE = 1;

/** TensorProto.DataType → the name onnxruntime-node gives the element type. */
const ELEM_TYPES: Record<number, string> = {
  1: 'float32',
  2: 'uint8',
  3: 'int8',
  4: 'uint16',
  5: 'int16',
  6: 'int32',
  7: 'int64',
  8: 'string',
  9: 'bool',
  10: 'float16',
  11: 'float64',
  12: 'uint32',
  13: 'uint64',
  14: 'complex64',
  15: 'complex128',
  16: 'bfloat16',
  17: 'float8e4m3fn',
  18: 'float8e4m3fnuz',
  19: 'float8e5m2',
  20: 'float8e5m2fnuz',
  21: 'uint4',
  22: 'int4',
};

class Malformed extends Error {}

interface Field {
  no: number;
  wire: number;
  /** Varint value (wire type 0). */
  value: number;
  /** Start and end of a length-delimited payload (wire type 2). */
  start: number;
  end: number;
}

/** Walks the fields of one message in buf[start, end). */
function* fields(buf: Uint8Array, start: number, end: number): Generator<Field> {
  let pos = start;
  const varint = (): number => {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw new Malformed('truncated varint');
      const b = buf[pos++]!;
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 128;
    }
    throw new Malformed('varint longer than 10 bytes');
  };
  while (pos < end) {
    const key = varint();
    const no = Math.floor(key / 8);
    const wire = key % 8;
    const f: Field = { no, wire, value: 0, start: pos, end: pos };
    if (wire === 0) f.value = varint();
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const len = varint();
      f.start = pos;
      f.end = pos + len;
      pos = f.end;
    } else throw new Malformed(`unsupported wire type ${wire}`);
    if (pos > end) throw new Malformed('field runs past the end of its message');
    yield f;
  }
}

function sub(buf: Uint8Array, f: Field, no: number): Field | undefined {
  let last: Field | undefined;
  for (const g of fields(buf, f.start, f.end)) if (g.no === no && g.wire === 2) last = g;
  return last;
}

const text = (buf: Uint8Array, f: Field): string => Buffer.from(buf.buffer, buf.byteOffset + f.start, f.end - f.start).toString('utf8');

function valueInfo(buf: Uint8Array, info: Field): IoSignature {
  let name = '';
  let type: Field | undefined;
  for (const f of fields(buf, info.start, info.end)) {
    if (f.no === VALUE_NAME && f.wire === 2) name = text(buf, f);
    else if (f.no === VALUE_TYPE && f.wire === 2) type = f;
  }
  const tensor = type && sub(buf, type, TYPE_TENSOR);
  if (!tensor) return { name, datatype: undefined, rawType: 'non-tensor', dims: undefined };
  let elem = 0;
  let shape: Field | undefined;
  for (const f of fields(buf, tensor.start, tensor.end)) {
    if (f.no === TENSOR_TYPE_ELEM && f.wire === 0) elem = f.value;
    else if (f.no === TENSOR_TYPE_SHAPE && f.wire === 2) shape = f;
  }
  const rawType = ELEM_TYPES[elem] ?? `onnx element type ${elem}`;
  let dims: number[] | undefined;
  if (shape) {
    dims = [];
    for (const d of fields(buf, shape.start, shape.end)) {
      if (d.no !== SHAPE_DIM || d.wire !== 2) continue;
      let value = -1;
      for (const v of fields(buf, d.start, d.end)) if (v.no === DIM_VALUE && v.wire === 0) value = v.value;
      dims.push(value);
    }
  }
  return { name, datatype: fromOrtType(rawType), rawType, dims };
}

/** The graph's inputs (without initializers, as onnxruntime lists them) and outputs. */
export function parseOnnxSignature(buf: Uint8Array): ModelSignature {
  let graph: Field | undefined;
  for (const f of fields(buf, 0, buf.byteLength)) if (f.no === MODEL_GRAPH && f.wire === 2) graph = f;
  if (!graph) throw new Malformed('no graph');
  const inputs: IoSignature[] = [];
  const outputs: IoSignature[] = [];
  const initializers = new Set<string>();
  for (const f of fields(buf, graph.start, graph.end)) {
    if (f.wire !== 2) continue;
    if (f.no === GRAPH_INPUT) inputs.push(valueInfo(buf, f));
    else if (f.no === GRAPH_OUTPUT) outputs.push(valueInfo(buf, f));
    else if (f.no === GRAPH_INITIALIZER || f.no === GRAPH_SPARSE_INITIALIZER) {
      const tensor = f.no === GRAPH_INITIALIZER ? f : sub(buf, f, SPARSE_VALUES);
      const name = tensor && sub(buf, tensor, TENSOR_NAME);
      if (name) initializers.add(text(buf, name));
    }
  }
  return { inputs: inputs.filter((i) => !initializers.has(i.name)), outputs };
}

/** A file read at positions: the header of the field at `pos`, and byte ranges. */
class PositionalFile {
  private readonly head = Buffer.alloc(24);
  constructor(
    private readonly fh: FileHandle,
    readonly size: number,
  ) {}

  async bytes(start: number, end: number): Promise<Uint8Array> {
    const out = Buffer.alloc(end - start);
    const { bytesRead } = await this.fh.read(out, 0, out.byteLength, start);
    if (bytesRead !== out.byteLength) throw new Malformed('truncated file');
    return out;
  }

  /** The field whose key starts at `pos` (payload positions absolute), and where the next one starts. */
  async field(pos: number, end: number): Promise<Field & { next: number }> {
    const n = Math.min(this.head.byteLength, end - pos);
    const { bytesRead } = await this.fh.read(this.head, 0, n, pos);
    // The header is complete within 24 bytes (two varints); only its payload may lie beyond.
    const f = this.peek(this.head.subarray(0, bytesRead));
    const next = pos + f.end;
    if (next > end) throw new Malformed('field runs past the end of its message');
    return { ...f, start: pos + f.start, end: pos + f.end, next };
  }

  /** Decodes one field header from `view` (relative positions; `end` is where the field ends). */
  private peek(view: Uint8Array): Field {
    let pos = 0;
    const varint = (): number => {
      let result = 0;
      let scale = 1;
      for (let i = 0; i < 10; i++) {
        if (pos >= view.byteLength) throw new Malformed('truncated varint');
        const b = view[pos++]!;
        result += (b & 0x7f) * scale;
        if (b < 0x80) return result;
        scale *= 128;
      }
      throw new Malformed('varint longer than 10 bytes');
    };
    const key = varint();
    const no = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) {
      const value = varint();
      return { no, wire, value, start: pos, end: pos };
    }
    if (wire === 1) return { no, wire, value: 0, start: pos, end: pos + 8 };
    if (wire === 5) return { no, wire, value: 0, start: pos, end: pos + 4 };
    if (wire !== 2) throw new Malformed(`unsupported wire type ${wire}`);
    const len = varint();
    return { no, wire, value: 0, start: pos, end: pos + len };
  }

  async *fields(start: number, end: number): AsyncGenerator<Field> {
    for (let pos = start; pos < end; ) {
      const f = await this.field(pos, end);
      yield f;
      pos = f.next;
    }
  }

  /** The last length-delimited field `no` of the message in [start, end). */
  async sub(start: number, end: number, no: number): Promise<Field | undefined> {
    let last: Field | undefined;
    for await (const g of this.fields(start, end)) if (g.no === no && g.wire === 2) last = g;
    return last;
  }
}

/** parseOnnxSignature over a file read at positions: only field headers, names and the inputs' and outputs' own bytes. */
async function parseOnnxFile(file: PositionalFile): Promise<ModelSignature> {
  const graph = await file.sub(0, file.size, MODEL_GRAPH);
  if (!graph) throw new Malformed('no graph');
  const inputs: IoSignature[] = [];
  const outputs: IoSignature[] = [];
  const initializers = new Set<string>();
  const whole = async (f: Field): Promise<IoSignature> => {
    const buf = await file.bytes(f.start, f.end);
    return valueInfo(buf, { ...f, start: 0, end: buf.byteLength });
  };
  for await (const f of file.fields(graph.start, graph.end)) {
    if (f.wire !== 2) continue;
    if (f.no === GRAPH_INPUT) inputs.push(await whole(f));
    else if (f.no === GRAPH_OUTPUT) outputs.push(await whole(f));
    else if (f.no === GRAPH_INITIALIZER || f.no === GRAPH_SPARSE_INITIALIZER) {
      const tensor = f.no === GRAPH_INITIALIZER ? f : await file.sub(f.start, f.end, SPARSE_VALUES);
      const name = tensor && (await file.sub(tensor.start, tensor.end, TENSOR_NAME));
      if (name) initializers.add(Buffer.from(await file.bytes(name.start, name.end)).toString('utf8'));
    }
  }
  return { inputs: inputs.filter((i) => !initializers.has(i.name)), outputs };
}

/** Files up to this size are read whole (one read); larger ones at positions. */
export const WHOLE_FILE_MAX = 4 << 20;

/** The model file's signature; `shown` is its name in error texts (repository-relative, not absolute). */
export async function readOnnxSignature(modelPath: string, shown = modelPath, wholeFileMax = WHOLE_FILE_MAX): Promise<ModelSignature> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(modelPath);
    const size = (await fh.stat()).size;
    if (size > wholeFileMax) return await parseOnnxFile(new PositionalFile(fh, size));
    return parseOnnxSignature(await fh.readFile());
  } catch (e) {
    if (e instanceof Malformed) throw ServalError.invalidArg(`${shown} is not a valid ONNX model: ${e.message}`);
    const code = (e as NodeJS.ErrnoException).code;
    if (code === undefined) throw e;
    throw ServalError.invalidArg(
      code === 'ENOENT' || code === 'ENOTDIR' ? `model file ${shown} does not exist` : `cannot read model file ${shown}: ${code}`,
    );
  } finally {
    await fh?.close();
  }
}
