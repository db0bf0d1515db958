// The tensor datatypes of the KServe v2 protocol, and how each maps to the model
// config (TYPE_*), to ONNX Runtime, and to bytes on the wire.
import { isUtf8 } from 'node:buffer';
import { ServalError } from './errors.js';

export const DATATYPES = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
] as const;
export type DataType = (typeof DATATYPES)[number];

export type OrtType =
  | 'bool'
  | 'uint8'
  | 'uint16'
  | 'uint32'
  | 'uint64'
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'float16'
  | 'float32'
  | 'float64'
  | 'string';

interface TypeInfo {
  /** Bytes per element on the wire; 0 for BYTES (variable). */
  size: number;
  ort: OrtType;
  config: string;
}

const INFO: Record<DataType, TypeInfo> = {
  BOOL: { size: 1, ort: 'bool', config: 'TYPE_BOOL' },
  UINT8: { size: 1, ort: 'uint8', config: 'TYPE_UINT8' },
  UINT16: { size: 2, ort: 'uint16', config: 'TYPE_UINT16' },
  UINT32: { size: 4, ort: 'uint32', config: 'TYPE_UINT32' },
  UINT64: { size: 8, ort: 'uint64', config: 'TYPE_UINT64' },
  INT8: { size: 1, ort: 'int8', config: 'TYPE_INT8' },
  INT16: { size: 2, ort: 'int16', config: 'TYPE_INT16' },
  INT32: { size: 4, ort: 'int32', config: 'TYPE_INT32' },
  INT64: { size: 8, ort: 'int64', config: 'TYPE_INT64' },
  FP16: { size: 2, ort: 'float16', config: 'TYPE_FP16' },
  FP32: { size: 4, ort: 'float32', config: 'TYPE_FP32' },
  FP64: { size: 8, ort: 'float64', config: 'TYPE_FP64' },
  BYTES: { size: 0, ort: 'string', config: 'TYPE_STRING' },
};

const BY_CONFIG = new Map<string, DataType>(DATATYPES.map((d) => [INFO[d].config, d]));
const BY_ORT = new Map<string, DataType>(DATATYPES.map((d) => [INFO[d].ort, d]));

export function isDataType(s: unknown): s is DataType {
  return typeof s === 'string' && Object.hasOwn(INFO, s);
}

/** Element size in bytes; 0 for BYTES. */
export function elementSize(dt: DataType): number {
  return INFO[dt].size;
}

export function toOrtType(dt: DataType): OrtType {
  return INFO[dt].ort;
}

export function toConfigType(dt: DataType): string {
  return INFO[dt].config;
}

/** TYPE_FP32 → FP32. Returns undefined for config types that have no wire form here (TYPE_BF16, TYPE_INVALID). */
export function fromConfigType(t: string): DataType | undefined {
  return BY_CONFIG.get(t);
}

export function fromOrtType(t: string): DataType | undefined {
  return BY_ORT.get(t);
}

export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export type NumericArray =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

/** A typed-array class: views of `n` elements at byte offset `o`. */
export type NumericArrayClass = { new (b: ArrayBufferLike, o: number, n: number): NumericArray; BYTES_PER_ELEMENT: number };

/** The typed-array class of each numeric datatype (FP16 as raw bits, BOOL as bytes). */
export const VIEW_CTOR: Readonly<Record<Exclude<DataType, 'BYTES'>, NumericArrayClass>> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
};

/**
 * A typed-array view over raw little-endian tensor bytes. Views need aligned offsets;
 * an unaligned buffer (possible inside a received HTTP body) is copied once.
 */
export function typedView(dt: Exclude<DataType, 'BYTES'>, buf: Uint8Array): NumericArray {
  const size = INFO[dt].size;
  const Ctor = VIEW_CTOR[dt];
  if (buf.byteOffset % size !== 0) buf = Uint8Array.prototype.slice.call(buf) as Uint8Array;
  return new Ctor(buf.buffer, buf.byteOffset, buf.byteLength / size);
}

// ---------------------------------------------------------------------------
// BYTES: each element is a 4-byte little-endian length followed by its bytes.

/** Splits serialized BYTES into element slices (views, no copies). Throws on malformed input. */
export function splitBytes(buf: Uint8Array, what: string): Uint8Array[] {
  const out: Uint8Array[] = [];
  walkBytes(buf, what, (start, end) => void out.push(buf.subarray(start, end)));
  return out;
}

/**
 * Walks serialized BYTES, calling `each` with every element's byte range, and returns the count:
 * linear, and without an object per element when `each` makes none (millions of small elements).
 * Throws on malformed input.
 */
export function walkBytes(buf: Uint8Array, what: string, each?: (start: number, end: number) => void): number {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let off = 0;
  let n = 0;
  while (off < buf.byteLength) {
    if (off + 4 > buf.byteLength) {
      throw ServalError.invalidArg(`${what}: malformed BYTES data, truncated 4-byte length prefix at byte ${off}`);
    }
    const len = dv.getUint32(off, true);
    off += 4;
    if (off + len > buf.byteLength) {
      throw ServalError.invalidArg(
        `${what}: malformed BYTES data, element of length ${len} at byte ${off - 4} runs past the end of the ${buf.byteLength}-byte buffer`,
      );
    }
    each?.(off, off + len);
    n++;
    off += len;
  }
  return n;
}

/** Counts BYTES elements without materialising them. */
export function countBytesElements(buf: Uint8Array, what: string): number {
  return walkBytes(buf, what);
}

/**
 * The index of the first element of well-formed serialized BYTES that is not valid UTF-8, or -1.
 * ASCII elements (the usual text) are passed by a byte loop with no view per element.
 */
export function firstNonUtf8Element(buf: Uint8Array): number {
  let index = 0;
  let found = -1;
  walkBytes(buf, 'BYTES', (start, end) => {
    if (found < 0) {
      let i = start;
      while (i < end && buf[i]! < 0x80) i++;
      if (i < end && !isUtf8(buf.subarray(i, end))) found = index;
    }
    index++;
  });
  return found;
}

export function joinBytes(elements: readonly (Uint8Array | string)[]): Buffer {
  // Strings are measured, then encoded straight into the result: no Buffer per element.
  let total = 0;
  for (const e of elements) total += 4 + (typeof e === 'string' ? Buffer.byteLength(e, 'utf8') : e.byteLength);
  const out = Buffer.allocUnsafe(total);
  let off = 0;
  for (const e of elements) {
    let len: number;
    if (typeof e === 'string') len = out.write(e, off + 4, 'utf8');
    else {
      out.set(e, off + 4);
      len = e.byteLength;
    }
    out.writeUInt32LE(len, off);
    off += 4 + len;
  }
  return out;
}

/** Serialized BYTES as one JS string per element (UTF-8), with no view or Buffer per element in between. */
export function bytesToStrings(buf: Uint8Array, what: string): string[] {
  const whole = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: string[] = [];
  walkBytes(buf, what, (start, end) => void out.push(whole.toString('utf8', start, end)));
  return out;
}

// ---------------------------------------------------------------------------
// JSON `data` arrays ⇄ raw bytes. JSON tensors are the slow path; they are
// converted once here so the rest of the server only ever sees raw bytes.

/** Nesting deeper than this is refused (a tensor's rank is far below it); Triton limits it too. */
export const MAX_JSON_DATA_DEPTH = 100;

/** Flattens nested arrays without recursion, so no nesting can exhaust the stack. */
function flatten(data: unknown, out: unknown[]): void {
  if (!Array.isArray(data)) {
    out.push(data);
    return;
  }
  const stack: { list: unknown[]; next: number }[] = [{ list: data, next: 0 }];
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    if (top.next === top.list.length) {
      stack.pop();
      continue;
    }
    const v = top.list[top.next++];
    if (!Array.isArray(v)) out.push(v);
    else if (stack.length >= MAX_JSON_DATA_DEPTH) {
      throw ServalError.invalidArg(`Unable to parse 'data': nesting exceeds the maximum depth of ${MAX_JSON_DATA_DEPTH}`);
    } else stack.push({ list: v, next: 0 });
  }
}

/** Converts a JSON `data` value (flat or nested) into raw little-endian bytes. */
export function jsonToRaw(dt: DataType, data: unknown, what: string, expectedCount?: number): Buffer {
  const flat: unknown[] = [];
  flatten(data, flat);
  if (expectedCount !== undefined && flat.length !== expectedCount) {
    // Triton's HTTP front-end words it so.
    throw ServalError.invalidArg("Unable to parse 'data': Shape does not match true shape of 'data' field");
  }
  if (dt === 'BYTES') {
    return joinBytes(
      flat.map((v) => {
        if (typeof v === 'string') return v;
        // Triton accepts only strings for BYTES in JSON; numbers are a client mistake.
        throw ServalError.invalidArg(`${what}: expected a string for a BYTES element, got ${shown(v)}`);
      }),
    );
  }
  const size = INFO[dt].size;
  const out = Buffer.alloc(flat.length * size);
  const view = typedView(dt, out);
  for (let i = 0; i < flat.length; i++) {
    let v = flat[i];
    // Long integers arrive as bigint (kernel/json.ts); only the 64-bit types keep them exact.
    if (typeof v === 'bigint' && dt !== 'INT64' && dt !== 'UINT64') v = Number(v);
    switch (dt) {
      case 'BOOL':
        if (typeof v !== 'boolean') throw badJson(what, dt, v);
        (view as Uint8Array)[i] = v ? 1 : 0;
        break;
      case 'INT64':
      case 'UINT64': {
        if (typeof v !== 'number' && typeof v !== 'bigint') throw badJson(what, dt, v);
        if (typeof v === 'number' && !Number.isInteger(v)) throw badJson(what, dt, v);
        const b = BigInt(v);
        const ok = dt === 'INT64' ? b >= -(1n << 63n) && b < 1n << 63n : b >= 0n && b < 1n << 64n;
        if (!ok) throw badJson(what, dt, v);
        (view as BigInt64Array | BigUint64Array)[i] = b;
        break;
      }
      case 'FP16':
        if (typeof v !== 'number') throw badJson(what, dt, v);
        (view as Uint16Array)[i] = floatToHalf(v);
        break;
      case 'FP32':
      case 'FP64':
        if (typeof v !== 'number') throw badJson(what, dt, v);
        (view as Float32Array)[i] = v;
        break;
      default: {
        if (typeof v !== 'number' || !Number.isInteger(v)) throw badJson(what, dt, v);
        const [lo, hi] = INT_RANGE[dt]!;
        if (v < lo || v > hi) throw badJson(what, dt, v);
        (view as Int32Array)[i] = v;
      }
    }
  }
  return out;
}

const INT_RANGE: Partial<Record<DataType, [number, number]>> = {
  UINT8: [0, 0xff],
  UINT16: [0, 0xffff],
  UINT32: [0, 0xffffffff],
  INT8: [-0x80, 0x7f],
  INT16: [-0x8000, 0x7fff],
  INT32: [-0x80000000, 0x7fffffff],
};

function badJson(what: string, dt: DataType, v: unknown): ServalError {
  return ServalError.invalidArg(`${what}: value ${shown(v)} is not a valid ${dt}`);
}

/** A JSON value for an error text; exact big integers (BigInt, kernel/json.ts) anywhere inside as digits. */
function shown(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x)) ?? String(v);
}

/**
 * Raw bytes → flat JSON array. 64-bit integers beyond 2^53 cannot be a JS number;
 * they are emitted via a placeholder so the JSON encoder writes exact digits.
 */
export function rawToJson(dt: DataType, buf: Uint8Array, what: string): unknown[] {
  if (dt === 'BYTES') return splitBytes(buf, what).map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8'));
  const view = typedView(dt, buf);
  switch (dt) {
    case 'BOOL':
      return Array.from(view as Uint8Array, (x) => x !== 0);
    case 'FP16':
      return Array.from(view as Uint16Array, halfToFloat);
    case 'INT64':
    case 'UINT64':
      return Array.from(view as BigInt64Array, (b) => {
        const n = Number(b);
        return Number.isSafeInteger(n) ? n : new ExactInteger(b);
      });
    case 'FP32':
    case 'FP64': {
      const values = Array.from(view as Float32Array);
      floatArrays.add(values);
      return values;
    }
    default:
      return Array.from(view as Int32Array);
  }
}

// Triton writes JSON with rapidjson, which keeps a whole float's ".0" (`1.0`, not `1`) and writes
// exponents without a '+' (`1e21`). rawToJson's float arrays are remembered so that the JSON
// encoder (kernel/json.ts) writes them that way; consumers see plain arrays of numbers.
const floatArrays = new WeakSet<unknown[]>();

/** Whether `v` is float tensor data from rawToJson (FP32, FP64). */
export function isFloatArray(v: unknown): v is number[] {
  return Array.isArray(v) && floatArrays.has(v);
}

/** A float's JSON text as Triton's writer gives it: `1.0`, `-0.0`, `0.5`, `3e38`, `1e-7`; not finite: null. */
export function floatText(v: number): string {
  if (!Number.isFinite(v)) return 'null';
  if (Object.is(v, -0)) return '-0.0';
  // Whole values below 1e21 are written in full, as JavaScript does, then ".0".
  if (Number.isInteger(v) && Math.abs(v) < 1e21) return `${v}.0`;
  return String(v).replace('e+', 'e');
}

/** Marks a 64-bit integer the JSON encoder must print exactly (see kernel/json.ts). */
export class ExactInteger {
  constructor(readonly value: bigint) {}
}

// ---------------------------------------------------------------------------
// IEEE 754 half precision.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function floatToHalf(v: number): number {
  f32[0] = v;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  let exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  exp = exp - 127 + 15;
  if (exp >= 0x1f) return sign | 0x7c00;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - exp;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = sign | (exp << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++;
  return half;
}

export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}
