// Loads Triton's model configuration schema (proto/model_config.proto) and
// exposes a small, cached, reflection view of it that the text-format
// parser and the JSON converter share.

import { resolve } from 'node:path';
import protobuf from 'protobufjs';
import { protoDir } from '../kernel/paths.js';

const PROTO_DIR = protoDir();

/** Loads .proto files from PROTO_DIR with snake_case field names kept. */
export function loadProtoRoot(files: string | string[]): protobuf.Root {
  const root = new protobuf.Root();
  // Resolve imports (e.g. `import "model_config.proto"`) against PROTO_DIR.
  root.resolvePath = (_origin: string, target: string): string => resolve(PROTO_DIR, target);
  root.loadSync(files, { keepCase: true });
  root.resolveAll();
  return root;
}

export const modelConfigRoot: protobuf.Root = loadProtoRoot('model_config.proto');
export const ModelConfigType: protobuf.Type = modelConfigRoot.lookupType('inference.ModelConfig');

/** Accessor form of ModelConfigType (same object). */
export function modelConfigType(): protobuf.Type {
  return ModelConfigType;
}

// ---------------------------------------------------------------------------
// Reflection view

/** Protobuf scalar type names as they appear in .proto files. */
export type ScalarTypeName =
  | 'double'
  | 'float'
  | 'int32'
  | 'uint32'
  | 'sint32'
  | 'fixed32'
  | 'sfixed32'
  | 'int64'
  | 'uint64'
  | 'sint64'
  | 'fixed64'
  | 'sfixed64'
  | 'bool'
  | 'string'
  | 'bytes';

export const SCALAR_TYPES: ReadonlySet<string> = new Set<ScalarTypeName>([
  'double',
  'float',
  'int32',
  'uint32',
  'sint32',
  'fixed32',
  'sfixed32',
  'int64',
  'uint64',
  'sint64',
  'fixed64',
  'sfixed64',
  'bool',
  'string',
  'bytes',
]);

/** The value type of a field (or of a map's values). */
export type ValueSpec =
  | { kind: 'scalar'; scalar: ScalarTypeName }
  | { kind: 'enum'; enumType: protobuf.Enum; enumName: string }
  | { kind: 'message'; message: MessageSpec };

export interface FieldSpec {
  /** Proto (snake_case) name. */
  name: string;
  /** lowerCamelCase name used by protobuf's JSON mapping. */
  jsonName: string;
  id: number;
  repeated: boolean;
  /** Set for map fields; `value` then describes the map's values. */
  mapKey?: ScalarTypeName;
  value: ValueSpec;
  /** Name of the containing oneof, if any. */
  oneof?: string;
  /** Whether an unset singular field is distinguishable from its default. */
  hasPresence: boolean;
}

export interface MessageSpec {
  /** Fully qualified name without the leading dot, e.g. "inference.ModelInput". */
  fullName: string;
  /** Fields in declaration order (Triton's JSON prints them in this order). */
  fields: FieldSpec[];
  byName: ReadonlyMap<string, FieldSpec>;
  /** Both proto and JSON names, for JSON parsing. */
  byAnyName: ReadonlyMap<string, FieldSpec>;
}

const specCache = new WeakMap<protobuf.Type, MessageSpec>();

function stripDot(name: string): string {
  return name.startsWith('.') ? name.slice(1) : name;
}

/** protobuf's default JSON name: drop underscores, upper-case what follows. */
export function toJsonName(protoName: string): string {
  return protoName.replace(/_+([a-zA-Z0-9])/g, (_m, c: string) => c.toUpperCase());
}

function asScalar(type: string, where: string): ScalarTypeName {
  if (!SCALAR_TYPES.has(type)) throw new Error(`${where}: unsupported type ${type}`);
  return type as ScalarTypeName;
}

function valueSpecOf(field: protobuf.Field): ValueSpec {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) return { kind: 'message', message: describeMessage(resolved) };
  if (resolved instanceof protobuf.Enum) {
    return { kind: 'enum', enumType: resolved, enumName: stripDot(resolved.fullName) };
  }
  return { kind: 'scalar', scalar: asScalar(field.type, field.fullName) };
}

/** Returns the (cached) reflection view of a resolved protobufjs Type. */
export function describeMessage(type: protobuf.Type): MessageSpec {
  const cached = specCache.get(type);
  if (cached) return cached;

  const fields: FieldSpec[] = [];
  const byName = new Map<string, FieldSpec>();
  const byAnyName = new Map<string, FieldSpec>();
  const spec: MessageSpec = { fullName: stripDot(type.fullName), fields, byName, byAnyName };
  // Cache before recursing so self-referencing types terminate.
  specCache.set(type, spec);

  for (const field of type.fieldsArray) {
    field.resolve();
    const isMap = field instanceof protobuf.MapField;
    const value = valueSpecOf(field);
    const oneof = field.partOf?.name;
    const fs: FieldSpec = {
      name: field.name,
      jsonName: field.jsonName ?? toJsonName(field.name),
      id: field.id,
      repeated: field.repeated || isMap,
      value,
      hasPresence: !field.repeated && !isMap && (value.kind === 'message' || oneof !== undefined),
    };
    if (isMap) fs.mapKey = asScalar(field.keyType, field.fullName);
    if (oneof !== undefined) fs.oneof = oneof;
    fields.push(fs);
    byName.set(fs.name, fs);
    byAnyName.set(fs.name, fs);
    byAnyName.set(fs.jsonName, fs);
  }
  return spec;
}

/** Reflection view of inference.ModelConfig. */
export const modelConfigSpec: MessageSpec = describeMessage(ModelConfigType);

/** Name protobuf gives the synthetic entry message of a map field. */
export function mapEntryName(owner: MessageSpec, field: FieldSpec): string {
  const camel = toJsonName(field.name);
  return `${owner.fullName}.${camel.charAt(0).toUpperCase()}${camel.slice(1)}Entry`;
}

// ---------------------------------------------------------------------------
// Scalar value helpers shared by the text and JSON converters

/** Inclusive value range of each protobuf integer type. */
export const INTEGER_RANGES: Readonly<Record<string, readonly [bigint, bigint]>> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};

/**
 * Rounds to float32 and returns the shortest decimal that maps back to the
 * same float32, i.e. what protobuf stores and prints for a `float` field.
 */
export function roundToFloat32(x: number): number {
  if (!Number.isFinite(x)) return x;
  const f = Math.fround(x);
  for (let p = 1; p <= 9; p++) {
    const candidate = Number(f.toPrecision(p));
    if (Math.fround(candidate) === f) return candidate;
  }
  return f;
}

/**
 * Sets an own enumerable property. Map keys come from user input, and a
 * plain assignment of "__proto__" would change the prototype instead.
 */
export function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}
