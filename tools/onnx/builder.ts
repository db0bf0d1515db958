/**
 * A small ONNX graph builder on top of protobufjs and tools/onnx/onnx.proto.
 *
 * It covers what Serval's example-model generators need: typed graph inputs
 * and outputs (with symbolic dimensions such as a batch dimension),
 * initializers from typed arrays (stored as raw_data) or strings, nodes with
 * attributes, and serialization to ONNX bytes. Serialization is deterministic:
 * protobufjs writes fields in field-number order and nothing time- or
 * host-dependent is put into the model, so the same graph always gives the
 * same bytes.
 *
 * Also here: a seeded PRNG (xoshiro128**) with weight-initialization helpers
 * that only use exactly-rounded arithmetic (no Math.log/Math.cos), and an
 * IEEE-754 float32 -> float16 converter.
 */
import { existsSync } from 'node:fs';
import { endianness } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

/** ONNX TensorProto.DataType numbers. */
export const DataType = {
  UNDEFINED: 0,
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  STRING: 8,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  UINT32: 12,
  UINT64: 13,
} as const;

/** Element type names, as used by onnxruntime's JS Tensor. */
export type ElemType =
  | 'float32'
  | 'float16'
  | 'float64'
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'uint8'
  | 'uint16'
  | 'uint32'
  | 'uint64'
  | 'bool'
  | 'string';

export const ELEM_TYPE_TO_ONNX: Record<ElemType, number> = {
  float32: DataType.FLOAT,
  float16: DataType.FLOAT16,
  float64: DataType.DOUBLE,
  int8: DataType.INT8,
  int16: DataType.INT16,
  int32: DataType.INT32,
  int64: DataType.INT64,
  uint8: DataType.UINT8,
  uint16: DataType.UINT16,
  uint32: DataType.UINT32,
  uint64: DataType.UINT64,
  bool: DataType.BOOL,
  string: DataType.STRING,
};

/** AttributeProto.AttributeType numbers. */
const AttrType = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, FLOATS: 6, INTS: 7, STRINGS: 8 } as const;

/** Default opset of the "ai.onnx" domain and IR version written to models. */
export const DEFAULT_OPSET = 17;
export const DEFAULT_IR_VERSION = 8;

// ---------------------------------------------------------------------------
// Protobuf schema loading

let rootCache: protobuf.Root | undefined;

/**
 * Finds tools/onnx/onnx.proto both when running from source (vitest, tsx) and
 * from the compiled dist/tools/onnx/builder.js (tsc does not copy .proto files).
 */
function protoPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, 'onnx.proto'), join(here, '..', '..', '..', 'tools', 'onnx', 'onnx.proto')];
  for (const c of candidates) if (existsSync(c)) return c;
  throw new Error(`onnx.proto not found (looked in: ${candidates.join(', ')})`);
}

export function onnxRoot(): protobuf.Root {
  if (!rootCache) rootCache = protobuf.loadSync(protoPath());
  return rootCache;
}

export function modelProtoType(): protobuf.Type {
  return onnxRoot().lookupType('onnx.ModelProto');
}

// ---------------------------------------------------------------------------
// Plain-object shapes of the protobuf messages we emit (protobufjs fromObject input)

interface DimObj {
  dimValue?: number;
  dimParam?: string;
}
interface ValueInfoObj {
  name: string;
  type: { tensorType: { elemType: number; shape: { dim: DimObj[] } } };
}
interface TensorObj {
  name: string;
  dims: number[];
  dataType: number;
  rawData?: Uint8Array;
  stringData?: Uint8Array[];
}
interface AttributeObj {
  name: string;
  type: number;
  f?: number;
  i?: number;
  s?: Uint8Array;
  t?: TensorObj;
  floats?: number[];
  ints?: number[];
  strings?: Uint8Array[];
}
interface NodeObj {
  name: string;
  opType: string;
  domain?: string;
  input: string[];
  output: string[];
  attribute: AttributeObj[];
}

// ---------------------------------------------------------------------------
// Attributes

/** A float attribute (plain JS numbers are written as INT attributes). */
export class FloatAttr {
  constructor(readonly value: number) {}
}
/** A list-of-floats attribute. */
export class FloatsAttr {
  constructor(readonly value: readonly number[]) {}
}
/** A tensor attribute (e.g. for Constant). */
export class TensorAttr {
  constructor(
    readonly elemType: ElemType,
    readonly dims: readonly number[],
    readonly data: TensorData,
  ) {}
}
export const float = (v: number): FloatAttr => new FloatAttr(v);
export const floats = (v: readonly number[]): FloatsAttr => new FloatsAttr(v);

/** Attribute values: integer, ints, string, strings, or the wrappers above. */
export type AttrValue = number | readonly number[] | string | readonly string[] | FloatAttr | FloatsAttr | TensorAttr;

const utf8 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'utf8'));

function toAttribute(name: string, v: AttrValue): AttributeObj {
  if (v instanceof FloatAttr) return { name, type: AttrType.FLOAT, f: v.value };
  if (v instanceof FloatsAttr) return { name, type: AttrType.FLOATS, floats: [...v.value] };
  if (v instanceof TensorAttr) return { name, type: AttrType.TENSOR, t: makeTensor('', v.elemType, v.dims, v.data) };
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new Error(`attribute ${name}: ${v} is not an integer; wrap floats with float()`);
    return { name, type: AttrType.INT, i: v };
  }
  if (typeof v === 'string') return { name, type: AttrType.STRING, s: utf8(v) };
  if (v.length > 0 && typeof v[0] === 'string') return { name, type: AttrType.STRINGS, strings: (v as readonly string[]).map(utf8) };
  const ints = v as readonly number[];
  for (const x of ints) {
    if (!Number.isSafeInteger(x)) throw new Error(`attribute ${name}: ${x} is not an integer; wrap float lists with floats()`);
  }
  return { name, type: AttrType.INTS, ints: [...ints] };
}

// ---------------------------------------------------------------------------
// Tensors

export type NumericArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array;

/** Tensor contents: a typed array (float16 as Uint16Array bit patterns, bool as Uint8Array 0/1) or strings. */
export type TensorData = NumericArray | readonly string[];

const BYTES_PER_ELEMENT: Record<Exclude<ElemType, 'string'>, number> = {
  float32: 4,
  float16: 2,
  float64: 8,
  int8: 1,
  int16: 2,
  int32: 4,
  int64: 8,
  uint8: 1,
  uint16: 2,
  uint32: 4,
  uint64: 8,
  bool: 1,
};

const LITTLE_ENDIAN = endianness() === 'LE';

function makeTensor(name: string, elemType: ElemType, dims: readonly number[], data: TensorData): TensorObj {
  const count = dims.reduce((a, b) => a * b, 1);
  if (data.length !== count) {
    throw new Error(`tensor ${name}: ${data.length} elements given for dims [${dims.join(', ')}]`);
  }
  const t: TensorObj = { name, dims: [...dims], dataType: ELEM_TYPE_TO_ONNX[elemType] };
  if (elemType === 'string') {
    if (!Array.isArray(data)) throw new Error(`tensor ${name}: string tensors need a string[]`);
    t.stringData = (data as readonly string[]).map(utf8);
    return t;
  }
  if (Array.isArray(data)) throw new Error(`tensor ${name}: ${elemType} tensors need a typed array`);
  const arr = data as NumericArray;
  if (arr.BYTES_PER_ELEMENT !== BYTES_PER_ELEMENT[elemType]) {
    throw new Error(`tensor ${name}: ${arr.constructor.name} does not hold ${elemType}`);
  }
  if (!LITTLE_ENDIAN) throw new Error('raw_data is little-endian; big-endian hosts are not supported');
  // Copy so later changes to the caller's array cannot alter the model.
  t.rawData = new Uint8Array(arr.buffer.slice(arr.byteOffset, arr.byteOffset + arr.byteLength));
  return t;
}

// ---------------------------------------------------------------------------
// Graph builder

/** A dimension: a fixed size, or a symbolic name (e.g. "batch"). */
export type Dim = number | string;

export interface ModelOptions {
  opset?: number;
  irVersion?: number;
  producerName?: string;
  producerVersion?: string;
  docString?: string;
  /** Extra metadata_props entries (written in the given order). */
  metadata?: Record<string, string>;
}

function valueInfo(name: string, elemType: ElemType, dims: readonly Dim[]): ValueInfoObj {
  const dim = dims.map((d): DimObj => {
    if (typeof d === 'string') return { dimParam: d };
    if (!Number.isSafeInteger(d) || d < 0) throw new Error(`value ${name}: bad dimension ${d}`);
    return { dimValue: d };
  });
  return { name, type: { tensorType: { elemType: ELEM_TYPE_TO_ONNX[elemType], shape: { dim } } } };
}

export class GraphBuilder {
  private readonly inputs: ValueInfoObj[] = [];
  private readonly outputs: ValueInfoObj[] = [];
  private readonly initializers: TensorObj[] = [];
  private readonly nodes: NodeObj[] = [];
  private readonly names = new Set<string>();
  private readonly opCounts = new Map<string, number>();
  private tmpCounter = 0;

  constructor(readonly name: string) {}

  private claim(name: string): string {
    if (this.names.has(name)) throw new Error(`duplicate value name ${name}`);
    this.names.add(name);
    return name;
  }

  /** A fresh intermediate value name with the given prefix. */
  tmp(prefix = 't'): string {
    let n: string;
    do n = `${prefix}_${this.tmpCounter++}`;
    while (this.names.has(n));
    return n;
  }

  input(name: string, elemType: ElemType, dims: readonly Dim[]): string {
    this.inputs.push(valueInfo(this.claim(name), elemType, dims));
    return name;
  }

  /** Declares a graph output; some node must produce a value of this name. */
  output(name: string, elemType: ElemType, dims: readonly Dim[]): string {
    this.outputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  /** Adds a constant tensor (numeric data goes to raw_data, strings to string_data). */
  initializer(name: string, elemType: ElemType, dims: readonly number[], data: TensorData): string {
    this.initializers.push(makeTensor(this.claim(name), elemType, dims, data));
    return name;
  }

  /** Shorthand for an int64 initializer (shapes, axes). */
  int64s(name: string, values: readonly number[]): string {
    return this.initializer(name, 'int64', [values.length], BigInt64Array.from(values.map((v) => BigInt(v))));
  }

  /**
   * Adds a node. `outputs` may be names or a count (fresh names are made).
   * Returns the output names.
   */
  node(
    opType: string,
    inputs: readonly string[],
    outputs: readonly string[] | number = 1,
    attrs: Record<string, AttrValue> = {},
    opts: { name?: string; domain?: string } = {},
  ): string[] {
    const count = this.opCounts.get(opType) ?? 0;
    this.opCounts.set(opType, count + 1);
    const nodeName = opts.name ?? `${opType}_${count}`;
    const outs =
      typeof outputs === 'number'
        ? Array.from({ length: outputs }, () => this.claim(this.tmp(nodeName)))
        : outputs.map((o) => this.claim(o));
    const attribute = Object.keys(attrs).map((k) => toAttribute(k, attrs[k]!));
    const n: NodeObj = { name: nodeName, opType, input: [...inputs], output: outs, attribute };
    if (opts.domain) n.domain = opts.domain;
    this.nodes.push(n);
    return outs;
  }

  /** Like node() for single-output operators; returns the output name. */
  op(opType: string, inputs: readonly string[], attrs: Record<string, AttrValue> = {}, output?: string): string {
    return this.node(opType, inputs, output === undefined ? 1 : [output], attrs)[0]!;
  }

  /** The ModelProto as a plain object (protobufjs fromObject form). */
  toModelObject(options: ModelOptions = {}): Record<string, unknown> {
    const declared = new Set([...this.inputs.map((i) => i.name), ...this.initializers.map((i) => i.name)]);
    for (const n of this.nodes) for (const o of n.output) declared.add(o);
    for (const n of this.nodes) {
      for (const i of n.input) if (i !== '' && !declared.has(i)) throw new Error(`node ${n.name}: unknown input ${i}`);
    }
    for (const o of this.outputs) if (!declared.has(o.name)) throw new Error(`graph output ${o.name} is never produced`);
    const model: Record<string, unknown> = {
      irVersion: options.irVersion ?? DEFAULT_IR_VERSION,
      producerName: options.producerName ?? 'serval-tools',
      producerVersion: options.producerVersion ?? '1',
      opsetImport: [{ domain: '', version: options.opset ?? DEFAULT_OPSET }],
      graph: {
        name: this.name,
        node: this.nodes,
        initializer: this.initializers,
        input: this.inputs,
        output: this.outputs,
      },
    };
    if (options.docString) model.docString = options.docString;
    if (options.metadata) {
      model.metadataProps = Object.entries(options.metadata).map(([key, value]) => ({ key, value }));
    }
    return model;
  }

  /** Serializes the model to ONNX bytes. */
  encode(options: ModelOptions = {}): Uint8Array {
    const T = modelProtoType();
    const obj = this.toModelObject(options);
    const err = T.verify(obj);
    if (err) throw new Error(`invalid ModelProto: ${err}`);
    return T.encode(T.fromObject(obj)).finish();
  }
}

// ---------------------------------------------------------------------------
// Deterministic random numbers

/**
 * xoshiro128** seeded through splitmix32. Pure 32-bit integer arithmetic, so
 * the sequence is identical on every platform and Node version.
 */
export class Prng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    let x = seed >>> 0;
    const next = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
  }

  /** Next 32-bit unsigned integer. */
  nextU32(): number {
    const rotl = (v: number, k: number): number => ((v << k) | (v >>> (32 - k))) >>> 0;
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform in [lo, hi). */
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /** Integer uniform in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Float32Array of uniform values in [-limit, limit). */
  uniformArray(n: number, limit: number): Float32Array {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = (this.next() * 2 - 1) * limit;
    return a;
  }

  /**
   * He (Kaiming) uniform init for ReLU layers: U(-sqrt(6/fanIn), sqrt(6/fanIn)),
   * i.e. variance 2/fanIn, keeping activations at a stable scale through depth.
   */
  heUniform(n: number, fanIn: number, gain = 1): Float32Array {
    return this.uniformArray(n, gain * Math.sqrt(6 / fanIn));
  }
}

// ---------------------------------------------------------------------------
// float16

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 -> IEEE-754 binary16 bit pattern, round-to-nearest-even. */
export function toFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0); // inf / nan
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow -> inf
  if (e <= 0) {
    // subnormal half (or zero)
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++; // may carry into exponent: still correct
  return sign | half;
}

/** binary16 bit pattern -> number. */
export function fromFloat16Bits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

export function toFloat16Array(src: Float32Array): Uint16Array {
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = toFloat16Bits(src[i]!);
  return out;
}
