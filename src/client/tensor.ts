// Tensors for the client: TypedArrays in, raw little-endian bytes on the wire (both protocols'
// binary forms), TypedArrays out. Of the server it shares only the datatype list.
import os from 'node:os';
import { type DataType, isDataType, type NumericArray, VIEW_CTOR } from '../kernel/datatypes.js';
import { ServalClientError } from './errors.js';

// The protocol's datatype names are the server's own list (kernel/datatypes.ts: no server state).
export { DATATYPES, type DataType, isDataType } from '../kernel/datatypes.js';

/** The numeric TypedArrays (the server's own list). */
export type TypedArray = NumericArray;

/** One BYTES element: a string (sent as UTF-8) or raw bytes. */
export type BytesElement = string | Uint8Array;

/** What an input's `data` may be: a TypedArray, BYTES elements, or booleans for BOOL. */
export type TensorData = TypedArray | readonly BytesElement[] | readonly boolean[];

/** The TypedArray a datatype decodes to (FP16 as its raw bits, BOOL as 0/1 bytes). */
export interface TypedArrayOf {
  BOOL: Uint8Array;
  UINT8: Uint8Array;
  UINT16: Uint16Array;
  UINT32: Uint32Array;
  UINT64: BigUint64Array;
  INT8: Int8Array;
  INT16: Int16Array;
  INT32: Int32Array;
  INT64: BigInt64Array;
  FP16: Uint16Array;
  FP32: Float32Array;
  FP64: Float64Array;
  BYTES: Uint8Array[];
}

export type Parameters = Record<string, string | number | boolean | bigint>;

export interface InferInput {
  name: string;
  shape: readonly number[];
  data: TensorData;
  /** Inferred from `data` when left out (Float32Array → FP32, string[] → BYTES, ...). */
  datatype?: DataType;
  parameters?: Parameters;
}

export interface OutputTensor<D extends DataType = DataType> {
  name: string;
  datatype: D;
  shape: number[];
  data: TypedArrayOf[D];
  parameters: Parameters;
}

const CTOR = VIEW_CTOR;

// The wire is little-endian; a TypedArray view is only right on a little-endian host (every
// platform Node ships for). Checked once rather than swapping bytes per element.
if (os.endianness() !== 'LE') throw new Error('serval/client needs a little-endian host');

/** The datatype a TypedArray stands for when the input does not name one. */
export function datatypeOf(data: TensorData): DataType {
  if (data instanceof Float32Array) return 'FP32';
  if (data instanceof Float64Array) return 'FP64';
  if (data instanceof Int32Array) return 'INT32';
  if (data instanceof Uint32Array) return 'UINT32';
  if (data instanceof BigInt64Array) return 'INT64';
  if (data instanceof BigUint64Array) return 'UINT64';
  if (data instanceof Int16Array) return 'INT16';
  if (data instanceof Uint16Array) return 'UINT16';
  if (data instanceof Int8Array) return 'INT8';
  if (data instanceof Uint8Array) return 'UINT8';
  if (data.length > 0 && typeof data[0] === 'boolean') return 'BOOL';
  return 'BYTES';
}

export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

const utf8 = new TextEncoder();

/** An input as the wire carries it: its datatype and its raw bytes (a view of `data` where possible). */
export function encodeInput(input: InferInput): { datatype: DataType; bytes: Uint8Array } {
  const { name, shape, data } = input;
  const datatype = input.datatype ?? datatypeOf(data);
  if (!isDataType(datatype)) throw new ServalClientError(`input '${name}': unknown datatype '${datatype}'`);
  if (!shape.every((d) => Number.isInteger(d) && d >= 0)) {
    throw new ServalClientError(`input '${name}': shape [${shape.join(',')}] must be non-negative integers`);
  }
  const count = elementCount(shape);
  if (data.length !== count) {
    throw new ServalClientError(`input '${name}': shape [${shape.join(',')}] has ${count} elements but data has ${data.length}`);
  }
  if (datatype === 'BYTES') {
    if (ArrayBuffer.isView(data)) throw new ServalClientError(`input '${name}': BYTES data must be an array of strings or Uint8Arrays`);
    return { datatype, bytes: encodeBytes(name, data as readonly unknown[]) };
  }
  if (!ArrayBuffer.isView(data)) {
    if (datatype === 'BOOL' && (data as readonly unknown[]).every((v) => typeof v === 'boolean')) {
      return { datatype, bytes: Uint8Array.from(data as readonly boolean[], (v) => (v ? 1 : 0)) };
    }
    throw new ServalClientError(`input '${name}': ${datatype} data must be a TypedArray`);
  }
  const want = CTOR[datatype];
  // Same element size and kind: FP16 travels as Uint16Array bits, BOOL as a Uint8Array of 0/1.
  const compatible =
    data.constructor === want ||
    (datatype === 'FP16' && data instanceof Uint16Array) ||
    (datatype === 'BOOL' && data instanceof Uint8Array) ||
    (datatype === 'UINT8' && data instanceof Uint8Array);
  if (!compatible) {
    throw new ServalClientError(`input '${name}': datatype ${datatype} needs a ${want.name}, got a ${data.constructor.name}`);
  }
  return { datatype, bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

function encodeBytes(name: string, elements: readonly unknown[]): Uint8Array {
  const parts: Uint8Array[] = [];
  let total = 0;
  for (const e of elements) {
    let b: Uint8Array;
    if (typeof e === 'string') b = utf8.encode(e);
    else if (e instanceof Uint8Array) b = e;
    else throw new ServalClientError(`input '${name}': BYTES elements must be strings or Uint8Arrays`);
    parts.push(b);
    total += 4 + b.byteLength;
  }
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const b of parts) {
    view.setUint32(at, b.byteLength, true);
    out.set(b, at + 4);
    at += 4 + b.byteLength;
  }
  return out;
}

/** Raw output bytes → the datatype's TypedArray (a view when aligned, else one copy). */
export function decodeOutput<D extends DataType>(name: string, datatype: D, shape: readonly number[], bytes: Uint8Array): TypedArrayOf[D] {
  if (datatype === 'BYTES') return decodeBytes(name, bytes) as TypedArrayOf[D];
  const ctor = CTOR[datatype as Exclude<DataType, 'BYTES'>];
  if (!ctor) throw new ServalClientError(`output '${name}': unknown datatype '${datatype}'`);
  const size = ctor.BYTES_PER_ELEMENT;
  const count = elementCount(shape);
  if (bytes.byteLength !== count * size) {
    throw new ServalClientError(`output '${name}': ${bytes.byteLength} bytes for ${count} ${datatype} elements`);
  }
  // A copy (new Uint8Array, not slice: Buffer's slice is a view) when the view is misaligned.
  const aligned = bytes.byteOffset % size === 0 ? bytes : new Uint8Array(bytes);
  return new ctor(aligned.buffer, aligned.byteOffset, count) as TypedArrayOf[D];
}

function decodeBytes(name: string, bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (at < bytes.byteLength) {
    if (at + 4 > bytes.byteLength) throw new ServalClientError(`output '${name}': truncated BYTES element length`);
    const n = view.getUint32(at, true);
    if (at + 4 + n > bytes.byteLength) throw new ServalClientError(`output '${name}': truncated BYTES element`);
    out.push(bytes.subarray(at + 4, at + 4 + n));
    at += 4 + n;
  }
  return out;
}

/** JSON `data` of an HTTP response (a server that answered without binary outputs) → the same forms. */
export function fromJsonData<D extends DataType>(name: string, datatype: D, data: unknown): TypedArrayOf[D] {
  const flat = (Array.isArray(data) ? data.flat(Number.POSITIVE_INFINITY) : [data]) as unknown[];
  if (datatype === 'BYTES') return flat.map((v) => utf8.encode(String(v))) as TypedArrayOf[D];
  const ctor = CTOR[datatype as Exclude<DataType, 'BYTES'>];
  if (!ctor) throw new ServalClientError(`output '${name}': unknown datatype '${datatype}'`);
  const out = new ctor(new ArrayBuffer(flat.length * ctor.BYTES_PER_ELEMENT), 0, flat.length);
  if (out instanceof BigInt64Array || out instanceof BigUint64Array) out.set(flat.map((v) => BigInt(v as number)));
  else (out as Exclude<TypedArray, BigInt64Array | BigUint64Array>).set(flat.map((v) => Number(v)));
  return out as TypedArrayOf[D];
}

const utf8d = new TextDecoder();

/** A BYTES output's elements as strings (UTF-8). */
export function bytesToStrings(elements: readonly Uint8Array[]): string[] {
  return elements.map((e) => utf8d.decode(e));
}
