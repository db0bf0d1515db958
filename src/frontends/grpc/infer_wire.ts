// ModelInfer messages straight off and onto the wire, in place of proto-loader's generic codec for
// the two inference methods (per-request CPU, issue 16). The reader yields the message in the
// shape proto-loader would (so infer_codec.ts does the rest unchanged) but with numeric shapes,
// no Long objects and no defaults for absent fields, and raw_input_contents as views of the
// received message; the writer measures a response first and fills a single Buffer (or, for
// unary_infer.ts, a gRPC frame in parts that leaves large raw outputs where they are).
// Malformed input never throws out of grpc-js' deserializer: the reader hands back the error and
// the handler answers it as Triton does (gRPC C++ answers a request that does not parse INTERNAL),
// with a text saying what is wrong and where.
import { ServalError } from '../../kernel/errors.js';
import type { InferParameter, InferParameter__Output } from './generated/inference/InferParameter.js';
import type { ModelInferResponse } from './generated/inference/ModelInferResponse.js';
import type { ModelStreamInferResponse } from './generated/inference/ModelStreamInferResponse.js';
import type { GrpcInferRequest, GrpcTensorContents } from './infer_codec.js';

/** What the ModelInfer deserializer hands the handler: the message, or why it could not be read. */
export type WireInferRequest = GrpcInferRequest & { wireError?: ServalError };

const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;

class Malformed extends Error {}

const TWO32 = 4294967296;

/** A protobuf reader over one Buffer; bytes fields come back as views of it. */
class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** A varint of up to 32 significant bits (tags, lengths, int32/uint32/bool), as an unsigned number. */
  uint32(): number {
    let v = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= this.end) throw new Malformed('truncated varint');
      const b = this.buf[this.pos++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v >>> 0 === v ? v : v % TWO32;
    }
    // An int32 sent as a negative number takes 10 bytes: its high bits are dropped, as protobuf does.
    this.skipVarintTail();
    return v % TWO32;
  }

  private skipVarintTail(): void {
    for (let i = 0; i < 5; i++) {
      if (this.pos >= this.end) throw new Malformed('truncated varint');
      if (this.buf[this.pos++]! < 0x80) return;
    }
    throw new Malformed('varint longer than 10 bytes');
  }

  /** A 64-bit varint as [low 32 bits, high 32 bits], both unsigned. */
  private varint64(): [number, number] {
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Malformed('truncated varint');
      const b = this.buf[this.pos++]!;
      const bits = b & 0x7f;
      if (i < 4) lo += bits * 2 ** (7 * i);
      else if (i === 4) {
        lo += (bits & 0x0f) * 2 ** 28;
        hi += bits >> 4;
      } else hi += bits * 2 ** (7 * i - 32);
      if (b < 0x80) return [lo >>> 0, (hi % TWO32) >>> 0];
    }
    throw new Malformed('varint longer than 10 bytes');
  }

  /** int64 as a number (shapes): exact up to 2^53, like Number() of proto-loader's string. */
  int64Number(): number {
    const [lo, hi] = this.varint64();
    if (hi < 0x200000) return hi * TWO32 + lo;
    return Number(BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)));
  }

  /** int64/uint64 as its exact decimal string (proto-loader's `longs: String`). */
  int64String(signed: boolean): string {
    const [lo, hi] = this.varint64();
    if (hi < 0x200000) return String(hi * TWO32 + lo);
    const u = (BigInt(hi) << 32n) | BigInt(lo);
    return (signed ? BigInt.asIntN(64, u) : u).toString();
  }

  int32(): number {
    return this.uint32() | 0;
  }

  bool(): boolean {
    const [lo, hi] = this.varint64();
    return lo !== 0 || hi !== 0;
  }

  private need(n: number): number {
    const at = this.pos;
    if (n > this.end - at) throw new Malformed('length past the end of the message');
    this.pos = at + n;
    return at;
  }

  float(): number {
    return this.buf.readFloatLE(this.need(4));
  }

  double(): number {
    return this.buf.readDoubleLE(this.need(8));
  }

  /** A length-delimited field: [start, end) of its payload. */
  span(): [number, number] {
    const n = this.uint32();
    const at = this.need(n);
    return [at, at + n];
  }

  bytes(): Buffer {
    const [s, e] = this.span();
    return this.buf.subarray(s, e);
  }

  string(): string {
    const [s, e] = this.span();
    return s === e ? '' : this.buf.toString('utf8', s, e);
  }

  sub(): Reader {
    const [s, e] = this.span();
    return new Reader(this.buf, s, e);
  }

  tag(): [field: number, wire: number] {
    const t = this.uint32();
    const field = Math.floor(t / 8);
    if (field === 0) throw new Malformed('field number 0');
    return [field, t & 7];
  }

  skip(wire: number): void {
    switch (wire) {
      case VARINT:
        this.varint64();
        return;
      case FIXED64:
        this.need(8);
        return;
      case LEN:
        this.span();
        return;
      case FIXED32:
        this.need(4);
        return;
      default:
        // Groups (3, 4) are proto2-only and unused here; 6 and 7 do not exist.
        throw new Malformed(`unsupported wire type ${wire}`);
    }
  }
}

function expect(wire: number, want: number, what: string): void {
  if (wire !== want) throw new Malformed(`${what}: wire type ${wire}, expected ${want}`);
}

/** A repeated scalar, packed (LEN) or one element per tag. */
function repeated<T>(r: Reader, wire: number, scalarWire: number, what: string, out: T[], one: (r: Reader) => T): void {
  if (wire === LEN) {
    const p = r.sub();
    while (!p.done) out.push(one(p));
    return;
  }
  expect(wire, scalarWire, what);
  out.push(one(r));
}

function readParameter(r: Reader): InferParameter__Output {
  const p: InferParameter__Output = {};
  while (!r.done) {
    const [f, w] = r.tag();
    // A oneof: the last member on the wire wins, the others are cleared.
    switch (f) {
      case 1:
        expect(w, VARINT, 'bool_param');
        set(p, 'bool_param', r.bool());
        break;
      case 2:
        expect(w, VARINT, 'int64_param');
        set(p, 'int64_param', r.int64String(true));
        break;
      case 3:
        expect(w, LEN, 'string_param');
        set(p, 'string_param', r.string());
        break;
      case 4:
        expect(w, FIXED64, 'double_param');
        set(p, 'double_param', r.double());
        break;
      case 5:
        expect(w, VARINT, 'uint64_param');
        set(p, 'uint64_param', r.int64String(false));
        break;
      default:
        r.skip(w);
    }
  }
  return p;
}

function set<K extends 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param'>(
  p: InferParameter__Output,
  k: K,
  v: InferParameter__Output[K],
): void {
  if (p.parameter_choice && p.parameter_choice !== k) delete p[p.parameter_choice];
  p.parameter_choice = k;
  p[k] = v;
}

/** One `map<string, InferParameter>` entry, added to `into` (a later duplicate key wins). */
function readParamEntry(r: Reader, wire: number, into: Record<string, InferParameter__Output>): void {
  expect(wire, LEN, 'parameters');
  const e = r.sub();
  let key = '';
  let value: InferParameter__Output = {};
  while (!e.done) {
    const [f, w] = e.tag();
    if (f === 1) {
      expect(w, LEN, 'parameter key');
      key = e.string();
    } else if (f === 2) {
      expect(w, LEN, 'parameter value');
      value = readParameter(e.sub());
    } else e.skip(w);
  }
  into[key] = value;
}

type Contents = Required<Omit<GrpcTensorContents, 'bytes_serialized'>> & Pick<GrpcTensorContents, 'bytes_serialized'>;

function emptyContents(): Contents {
  return {
    bool_contents: [],
    int_contents: [],
    int64_contents: [],
    uint_contents: [],
    uint64_contents: [],
    fp32_contents: [],
    fp64_contents: [],
    bytes_contents: [],
  };
}

/**
 * InferTensorContents; a second occurrence of the field merges into the first (repeated fields
 * append). `bytes_contents` elements are gathered as byte ranges and serialized once at the end,
 * into `bytes_serialized`, rather than kept as one Buffer per element.
 */
function readContents(r: Reader, c: Contents): Contents {
  let spans: Uint32Array | undefined;
  let n = 0;
  while (!r.done) {
    const [f, w] = r.tag();
    switch (f) {
      case 1:
        repeated(r, w, VARINT, 'bool_contents', c.bool_contents, (x) => x.bool());
        break;
      case 2:
        repeated(r, w, VARINT, 'int_contents', c.int_contents, (x) => x.int32());
        break;
      case 3:
        repeated(r, w, VARINT, 'int64_contents', c.int64_contents, (x) => x.int64String(true));
        break;
      case 4:
        repeated(r, w, VARINT, 'uint_contents', c.uint_contents, (x) => x.uint32());
        break;
      case 5:
        repeated(r, w, VARINT, 'uint64_contents', c.uint64_contents, (x) => x.int64String(false));
        break;
      case 6:
        repeated(r, w, FIXED32, 'fp32_contents', c.fp32_contents, (x) => x.float());
        break;
      case 7:
        repeated(r, w, FIXED64, 'fp64_contents', c.fp64_contents, (x) => x.double());
        break;
      case 8: {
        expect(w, LEN, 'bytes_contents');
        const [s, e] = r.span();
        if (!spans || 2 * n === spans.length) {
          const grown = new Uint32Array(spans ? spans.length * 2 : 64);
          if (spans) grown.set(spans);
          spans = grown;
        }
        spans[2 * n] = s;
        spans[2 * n + 1] = e;
        n++;
        break;
      }
      default:
        r.skip(w);
    }
  }
  if (spans) c.bytes_serialized = serializeSpans(r.buf, spans, n, c.bytes_serialized);
  return c;
}

/** The elements at `spans` (start, end pairs into `buf`) in BYTES' serialized form, after `before`. */
function serializeSpans(buf: Buffer, spans: Uint32Array, n: number, before: Buffer | undefined): Buffer {
  let total = before?.byteLength ?? 0;
  for (let i = 0; i < n; i++) total += 4 + spans[2 * i + 1]! - spans[2 * i]!;
  const out = Buffer.allocUnsafe(total);
  let off = 0;
  if (before) {
    out.set(before);
    off = before.byteLength;
  }
  for (let i = 0; i < n; i++) {
    const s = spans[2 * i]!;
    const e = spans[2 * i + 1]!;
    out.writeUInt32LE(e - s, off);
    buf.copy(out, off + 4, s, e);
    off += 4 + e - s;
  }
  return out;
}

type InputTensor = GrpcInferRequest['inputs'][number];
type OutputTensor = GrpcInferRequest['outputs'][number];

function readInput(r: Reader): InputTensor {
  const t: InputTensor = { name: '', datatype: '', shape: [], parameters: {}, contents: null };
  const shape: number[] = [];
  let contents: Contents | null = null;
  while (!r.done) {
    const [f, w] = r.tag();
    switch (f) {
      case 1:
        expect(w, LEN, 'input name');
        t.name = r.string();
        break;
      case 2:
        expect(w, LEN, 'input datatype');
        t.datatype = r.string();
        break;
      case 3:
        repeated(r, w, VARINT, 'input shape', shape, (x) => x.int64Number());
        break;
      case 4:
        readParamEntry(r, w, t.parameters);
        break;
      case 5:
        expect(w, LEN, 'input contents');
        contents = readContents(r.sub(), contents ?? emptyContents());
        break;
      default:
        r.skip(w);
    }
  }
  t.shape = shape;
  t.contents = contents;
  return t;
}

function readOutput(r: Reader): OutputTensor {
  const o: OutputTensor = { name: '', parameters: {} };
  while (!r.done) {
    const [f, w] = r.tag();
    if (f === 1) {
      expect(w, LEN, 'output name');
      o.name = r.string();
    } else if (f === 2) readParamEntry(r, w, o.parameters);
    else r.skip(w);
  }
  return o;
}

/**
 * Reads a ModelInferRequest. Never throws: a malformed message comes back with `wireError`
 * (INTERNAL, Triton's status for a message that does not parse) and whatever was read before the
 * fault (the id, for a stream's answer).
 */
export function readInferRequest(buf: Buffer): WireInferRequest {
  const m: WireInferRequest = {
    model_name: '',
    model_version: '',
    id: '',
    parameters: {},
    inputs: [],
    outputs: [],
    raw_input_contents: [],
  };
  const r = new Reader(buf, 0, buf.byteLength);
  try {
    while (!r.done) {
      const [f, w] = r.tag();
      switch (f) {
        case 1:
          expect(w, LEN, 'model_name');
          m.model_name = r.string();
          break;
        case 2:
          expect(w, LEN, 'model_version');
          m.model_version = r.string();
          break;
        case 3:
          expect(w, LEN, 'id');
          m.id = r.string();
          break;
        case 4:
          readParamEntry(r, w, m.parameters);
          break;
        case 5:
          expect(w, LEN, 'inputs');
          m.inputs.push(readInput(r.sub()));
          break;
        case 6:
          expect(w, LEN, 'outputs');
          m.outputs.push(readOutput(r.sub()));
          break;
        case 7:
          expect(w, LEN, 'raw_input_contents');
          m.raw_input_contents.push(r.bytes());
          break;
        default:
          r.skip(w);
      }
    }
  } catch (e) {
    if (!(e instanceof Malformed)) throw e;
    m.wireError = ServalError.malformed(`malformed ModelInferRequest: ${e.message} (at byte ${r.pos})`);
  }
  return m;
}

// ---- writer ----

type Param = InferParameter;
type ResponseTensor = NonNullable<ModelInferResponse['outputs']>[number];

/** Bytes of a varint of a non-negative integer below 2^53. */
function varintSize(n: number): number {
  let s = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    s++;
  }
  return s;
}

/** A 64-bit field value as an unsigned 64-bit bigint, or a number when that is exact and small. */
function int64Of(v: number | string | { toString(): string }): number | bigint {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  const b = typeof v === 'number' ? BigInt(Math.trunc(v)) : BigInt(v.toString());
  return BigInt.asUintN(64, b);
}

function int64Size(v: number | bigint): number {
  if (typeof v === 'number') return varintSize(v);
  let s = 1;
  for (let x = v; x >= 128n; x >>= 7n) s++;
  return s;
}

const strSize = (s: string): number => Buffer.byteLength(s, 'utf8');
const lenField = (n: number): number => 1 + varintSize(n) + n;

function paramSize(p: Param): number {
  if (p.bool_param !== undefined) return 2;
  if (p.int64_param !== undefined) return 1 + int64Size(int64Of(p.int64_param));
  if (p.string_param !== undefined) return lenField(strSize(p.string_param));
  if (p.double_param !== undefined) return 9;
  if (p.uint64_param !== undefined) return 1 + int64Size(int64Of(p.uint64_param));
  return 0;
}

function paramsSize(m: Record<string, Param> | undefined, keys: string[]): number {
  let s = 0;
  for (const k of keys) {
    const entry = lenField(strSize(k)) + lenField(paramSize(m![k]!));
    s += lenField(entry);
  }
  return s;
}

class Writer {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  varint(n: number): void {
    const b = this.buf;
    while (n >= 128) {
      b[this.pos++] = (n % 128) | 0x80;
      n = Math.floor(n / 128);
    }
    b[this.pos++] = n;
  }

  int64(v: number | bigint): void {
    if (typeof v === 'number') {
      this.varint(v);
      return;
    }
    const b = this.buf;
    while (v >= 128n) {
      b[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    b[this.pos++] = Number(v);
  }

  tag(field: number, wire: number): void {
    this.buf[this.pos++] = (field << 3) | wire;
  }

  string(field: number, s: string, len: number): void {
    this.tag(field, LEN);
    this.varint(len);
    if (len) this.pos += this.buf.write(s, this.pos, 'utf8');
  }

  bytes(field: number, data: Uint8Array): void {
    this.tag(field, LEN);
    this.varint(data.byteLength);
    this.buf.set(data, this.pos);
    this.pos += data.byteLength;
  }

  param(p: Param, size: number): void {
    this.varint(size);
    if (p.bool_param !== undefined) {
      this.tag(1, VARINT);
      this.buf[this.pos++] = p.bool_param ? 1 : 0;
    } else if (p.int64_param !== undefined) {
      this.tag(2, VARINT);
      this.int64(int64Of(p.int64_param));
    } else if (p.string_param !== undefined) {
      this.string(3, p.string_param, strSize(p.string_param));
    } else if (p.double_param !== undefined) {
      this.tag(4, FIXED64);
      this.pos = this.buf.writeDoubleLE(Number(p.double_param), this.pos);
    } else if (p.uint64_param !== undefined) {
      this.tag(5, VARINT);
      this.int64(int64Of(p.uint64_param));
    }
  }

  params(field: number, m: Record<string, Param> | undefined, keys: string[]): void {
    for (const k of keys) {
      const p = m![k]!;
      const ks = strSize(k);
      const ps = paramSize(p);
      this.tag(field, LEN);
      this.varint(lenField(ks) + lenField(ps));
      this.string(1, k, ks);
      this.tag(2, LEN);
      this.param(p, ps);
    }
  }
}

const keysOf = (m: Record<string, Param> | undefined): string[] => (m ? Object.keys(m) : []);

interface Sized {
  size: number;
  /** The bytes before raw_output_contents (the fields the writer writes first). */
  fields: number;
  keys: string[];
  tensors: { size: number; keys: string[]; shape: (number | bigint)[]; shapeSize: number; name: number; datatype: number }[];
  name: number;
  version: number;
  id: number;
}

/**
 * Sizes of a ModelInferResponse as encodeGrpcInfer builds it (raw_output_contents, no typed
 * contents: the encoder never sends them), so the writer fills one exact allocation.
 */
function measure(res: ModelInferResponse): Sized {
  const name = strSize(res.model_name ?? '');
  const version = strSize(res.model_version ?? '');
  const id = strSize(res.id ?? '');
  const keys = keysOf(res.parameters);
  let size = (name ? lenField(name) : 0) + (version ? lenField(version) : 0) + (id ? lenField(id) : 0);
  size += paramsSize(res.parameters, keys);
  const tensors = (res.outputs ?? []).map((o: ResponseTensor) => {
    const tn = strSize(o.name ?? '');
    const td = strSize(o.datatype ?? '');
    const tkeys = keysOf(o.parameters);
    const shape = (o.shape ?? []).map((d) => int64Of(d));
    let shapeSize = 0;
    for (const d of shape) shapeSize += int64Size(d);
    const ts =
      (tn ? lenField(tn) : 0) + (td ? lenField(td) : 0) + (shape.length ? lenField(shapeSize) : 0) + paramsSize(o.parameters, tkeys);
    size += lenField(ts);
    return { size: ts, keys: tkeys, shape, shapeSize, name: tn, datatype: td };
  });
  const fields = size;
  for (const raw of res.raw_output_contents ?? []) size += lenField(rawLength(raw));
  return { size, fields, keys, tensors, name, version, id };
}

function rawOf(raw: Buffer | Uint8Array | string): Uint8Array {
  return typeof raw === 'string' ? Buffer.from(raw, 'base64') : raw;
}

function rawLength(raw: Buffer | Uint8Array | string): number {
  return rawOf(raw).byteLength;
}

function writeResponse(w: Writer, res: ModelInferResponse, s: Sized): void {
  writeFields(w, res, s);
  for (const raw of res.raw_output_contents ?? []) w.bytes(6, rawOf(raw));
}

/** Every field but raw_output_contents (which come last), `s.fields` bytes. */
function writeFields(w: Writer, res: ModelInferResponse, s: Sized): void {
  if (s.name) w.string(1, res.model_name!, s.name);
  if (s.version) w.string(2, res.model_version!, s.version);
  if (s.id) w.string(3, res.id!, s.id);
  w.params(4, res.parameters, s.keys);
  (res.outputs ?? []).forEach((o, i) => {
    const t = s.tensors[i]!;
    w.tag(5, LEN);
    w.varint(t.size);
    if (t.name) w.string(1, o.name!, t.name);
    if (t.datatype) w.string(2, o.datatype!, t.datatype);
    if (t.shape.length) {
      w.tag(3, LEN);
      w.varint(t.shapeSize);
      for (const d of t.shape) w.int64(d);
    }
    w.params(4, o.parameters, t.keys);
  });
}

/** A ModelInferResponse in one allocation; the raw outputs are copied straight into it. */
export function writeInferResponse(res: ModelInferResponse): Buffer {
  const s = measure(res);
  const w = new Writer(Buffer.allocUnsafe(s.size));
  writeResponse(w, res, s);
  return w.buf;
}

/** Raw outputs from this size on are sent as their own bytes by writeInferResponseParts, not copied. */
export const SEPARATE_RAW_OUTPUT = 64 * 1024;

/**
 * A ModelInferResponse as one gRPC frame in parts, to be written in order: the 5-byte frame
 * prefix (uncompressed, big-endian length) with every small field; each raw output of
 * `separate` bytes or more as the output's own bytes (a view, not a copy), its tag and length
 * ending the part before it. `size` is the message's length (the frame is 5 bytes more).
 */
export function writeInferResponseParts(res: ModelInferResponse, separate = SEPARATE_RAW_OUTPUT): { parts: Uint8Array[]; size: number } {
  const s = measure(res);
  const raws = (res.raw_output_contents ?? []).map(rawOf);
  // The small parts' sizes first, so each is one exact allocation.
  const small: number[] = [];
  let cur = 5 + s.fields;
  for (const raw of raws) {
    cur += 1 + varintSize(raw.byteLength);
    if (raw.byteLength >= separate) {
      small.push(cur);
      cur = 0;
    } else cur += raw.byteLength;
  }
  small.push(cur);
  const parts: Uint8Array[] = [];
  let k = 0;
  let w = new Writer(Buffer.allocUnsafe(small[k++]!));
  w.buf[0] = 0;
  w.buf.writeUInt32BE(s.size, 1);
  w.pos = 5;
  writeFields(w, res, s);
  for (const raw of raws) {
    if (raw.byteLength < separate) {
      w.bytes(6, raw);
      continue;
    }
    w.tag(6, LEN);
    w.varint(raw.byteLength);
    parts.push(w.buf, raw);
    w = new Writer(Buffer.allocUnsafe(small[k++]!));
  }
  if (w.buf.byteLength) parts.push(w.buf);
  return { parts, size: s.size };
}

/** A ModelStreamInferResponse (error_message and/or infer_response) in one allocation. */
export function writeStreamResponse(msg: ModelStreamInferResponse): Buffer {
  const err = strSize(msg.error_message ?? '');
  const inner = msg.infer_response ? measure(msg.infer_response) : undefined;
  const size = (err ? lenField(err) : 0) + (inner ? lenField(inner.size) : 0);
  const w = new Writer(Buffer.allocUnsafe(size));
  if (err) w.string(1, msg.error_message!, err);
  if (inner) {
    w.tag(2, LEN);
    w.varint(inner.size);
    writeResponse(w, msg.infer_response!, inner);
  }
  return w.buf;
}
