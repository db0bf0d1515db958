// Tensor byte helpers for the tests, written independently of src/ so expected values never come
// from the code under test. (Where bytes are only a fixture, not an expected value, a test may as
// well build them with src/kernel/datatypes.ts joinBytes; datatypes.test.ts checks it against
// bytesRaw here.)

/** [f(0), …, f(n-1)]; by default [0, …, n-1]. */
export function range(n: number): number[];
export function range<T>(n: number, f: (i: number) => T): T[];
export function range(n: number, f: (i: number) => unknown = (i) => i): unknown[] {
  return Array.from({ length: n }, (_, i) => f(i));
}

/** The same bytes as a Buffer (no copy). */
export const asBuffer = (u: Uint8Array): Buffer => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

// The protocol's datatypes written out as the KServe v2 spec lists them, not imported from src:
// a type the server stopped handling must fail the tests that walk this list.
export const ALL_TYPES = [
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
export type Dt = (typeof ALL_TYPES)[number];

export const SIZE: Record<Exclude<Dt, 'BYTES'>, number> = {
  BOOL: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  UINT64: 8,
  INT8: 1,
  INT16: 2,
  INT32: 4,
  INT64: 8,
  FP16: 2,
  FP32: 4,
  FP64: 8,
};

/** identity_<suffix> model name for a datatype. */
export function identityModel(dt: Dt): string {
  return dt === 'BYTES' ? 'identity_string' : `identity_${dt.toLowerCase()}`;
}

/** A seeded PRNG (mulberry32), so failures reproduce. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Little-endian bytes of numeric values. FP16 values are given as their 16-bit patterns. */
export function rawOf(dt: Exclude<Dt, 'BYTES'>, values: readonly (number | bigint | boolean)[]): Buffer {
  const b = Buffer.alloc(values.length * SIZE[dt]);
  values.forEach((v, i) => {
    const o = i * SIZE[dt];
    switch (dt) {
      case 'BOOL':
        b.writeUInt8(v ? 1 : 0, o);
        break;
      case 'UINT8':
        b.writeUInt8(Number(v), o);
        break;
      case 'UINT16':
      case 'FP16':
        b.writeUInt16LE(Number(v), o);
        break;
      case 'UINT32':
        b.writeUInt32LE(Number(v), o);
        break;
      case 'UINT64':
        b.writeBigUInt64LE(BigInt(v), o);
        break;
      case 'INT8':
        b.writeInt8(Number(v), o);
        break;
      case 'INT16':
        b.writeInt16LE(Number(v), o);
        break;
      case 'INT32':
        b.writeInt32LE(Number(v), o);
        break;
      case 'INT64':
        b.writeBigInt64LE(BigInt(v), o);
        break;
      case 'FP32':
        b.writeFloatLE(Number(v), o);
        break;
      case 'FP64':
        b.writeDoubleLE(Number(v), o);
        break;
    }
  });
  return b;
}

/** Values of little-endian bytes (FP16 as 16-bit patterns; 64-bit integers as bigint). */
export function valuesOf(dt: Exclude<Dt, 'BYTES'>, raw: Uint8Array): (number | bigint | boolean)[] {
  const b = asBuffer(raw);
  const n = b.byteLength / SIZE[dt];
  const out: (number | bigint | boolean)[] = [];
  for (let i = 0; i < n; i++) {
    const o = i * SIZE[dt];
    switch (dt) {
      case 'BOOL':
        out.push(b.readUInt8(o) !== 0);
        break;
      case 'UINT8':
        out.push(b.readUInt8(o));
        break;
      case 'UINT16':
      case 'FP16':
        out.push(b.readUInt16LE(o));
        break;
      case 'UINT32':
        out.push(b.readUInt32LE(o));
        break;
      case 'UINT64':
        out.push(b.readBigUInt64LE(o));
        break;
      case 'INT8':
        out.push(b.readInt8(o));
        break;
      case 'INT16':
        out.push(b.readInt16LE(o));
        break;
      case 'INT32':
        out.push(b.readInt32LE(o));
        break;
      case 'INT64':
        out.push(b.readBigInt64LE(o));
        break;
      case 'FP32':
        out.push(b.readFloatLE(o));
        break;
      case 'FP64':
        out.push(b.readDoubleLE(o));
        break;
    }
  }
  return out;
}

/** Serialized BYTES: 4-byte little-endian length, then the bytes, per element. */
export function bytesRaw(elements: readonly (string | Uint8Array)[]): Buffer {
  return Buffer.concat(
    elements.flatMap((e) => {
      const data = typeof e === 'string' ? Buffer.from(e, 'utf8') : Buffer.from(e);
      const len = Buffer.alloc(4);
      len.writeUInt32LE(data.byteLength);
      return [len, data];
    }),
  );
}

/** The elements of serialized BYTES (views into `raw`). */
export function splitBytesRaw(raw: Uint8Array): Buffer[] {
  const b = asBuffer(raw);
  const out: Buffer[] = [];
  let off = 0;
  while (off < b.byteLength) {
    const len = b.readUInt32LE(off);
    out.push(b.subarray(off + 4, off + 4 + len));
    off += 4 + len;
  }
  return out;
}

/** The elements of serialized BYTES as UTF-8 strings. */
export const stringsOf = (raw: Uint8Array): string[] => splitBytesRaw(raw).map((e) => e.toString('utf8'));

/** INT32 values as little-endian bytes. */
export const i32 = (values: readonly number[]): Buffer => rawOf('INT32', values);

/** Little-endian INT32 bytes as numbers; throws unless the bytes are whole INT32 values. */
export function fromI32(bytes: Uint8Array): number[] {
  if (bytes.byteLength % 4 !== 0) throw new Error(`${bytes.byteLength} bytes are not a whole number of INT32 values`);
  return valuesOf('INT32', bytes) as number[];
}

/** Random raw bytes valid for `dt` (BOOL bytes are 0/1; floats are arbitrary bit patterns). */
export function randomRaw(dt: Exclude<Dt, 'BYTES'>, count: number, rand: () => number): Buffer {
  const b = Buffer.alloc(count * SIZE[dt]);
  for (let i = 0; i < b.byteLength; i++) b[i] = Math.floor(rand() * 256);
  if (dt === 'BOOL') for (let i = 0; i < b.byteLength; i++) b[i] = b[i]! & 1;
  return b;
}

/** IEEE half bits → number (independent of src/core/datatypes.ts). */
export function halfToNumber(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1024 + m) * 2 ** (e - 25);
}

/** Typical and extreme JSON-safe values per type (64-bit extremes are tested separately). */
export const SAMPLE_VALUES: Record<Exclude<Dt, 'BYTES' | 'FP16'>, (number | boolean)[]> = {
  BOOL: [true, false, false, true],
  UINT8: [0, 1, 127, 255],
  UINT16: [0, 1, 32768, 65535],
  UINT32: [0, 1, 2147483648, 4294967295],
  UINT64: [0, 1, 4294967296, Number.MAX_SAFE_INTEGER],
  INT8: [-128, -1, 0, 127],
  INT16: [-32768, -1, 0, 32767],
  INT32: [-2147483648, -1, 0, 2147483647],
  INT64: [Number.MIN_SAFE_INTEGER, -1, 0, Number.MAX_SAFE_INTEGER],
  FP32: [0, -1.5, 0.1, 3.4028234663852886e38],
  FP64: [0, -1.5, 0.1, 1.7976931348623157e308],
};

/** What a value is expected to come back as from a model of this type. */
export function expectedJson(dt: Exclude<Dt, 'BYTES' | 'FP16'>, v: number | boolean): number | boolean {
  return dt === 'FP32' ? Math.fround(v as number) : v;
}
