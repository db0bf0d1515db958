// The tensor datatypes of the KServe v2 protocol, and how each maps to the model
// config (TYPE_*), to ONNX Runtime, and to bytes on the wire.
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

type NumericArray =
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

const VIEW_CTOR: Record<Exclude<DataType, 'BYTES'>, new (b: ArrayBufferLike, o: number, n: number) => NumericArray> = {
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
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let off = 0;
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
    out.push(buf.subarray(off, off + len));
    off += len;
  }
  return out;
}

/** Counts BYTES elements without materialising them. */
export function countBytesElements(buf: Uint8Array, what: string): number {
  return splitBytes(buf, what).length;
}

export function joinBytes(elements: readonly (Uint8Array | string)[]): Buffer {
  const parts = elements.map((e) => (typeof e === 'string' ? Buffer.from(e, 'utf8') : e));
  let total = 0;
  for (const p of parts) total += 4 + p.byteLength;
  const out = Buffer.allocUnsafe(total);
  let off = 0;
  for (const p of parts) {
    out.writeUInt32LE(p.byteLength, off);
    off += 4;
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

// ---------------------------------------------------------------------------
// JSON `data` arrays ⇄ raw bytes. JSON tensors are the slow path; they are
// converted once here so the rest of the server only ever sees raw bytes.

function flatten(data: unknown, out: unknown[]): void {
  if (Array.isArray(data)) for (const d of data) flatten(d, out);
  else out.push(data);
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
        throw ServalError.invalidArg(`${what}: expected a string for a BYTES element, got ${JSON.stringify(v)}`);
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
  return ServalError.invalidArg(`${what}: value ${JSON.stringify(typeof v === 'bigint' ? v.toString() : v)} is not a valid ${dt}`);
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
    default:
      return Array.from(view as Float32Array);
  }
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
