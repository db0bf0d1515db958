// Conversion between the internal model-config object (see types.ts and
// pbtxt.ts) and the JSON form Triton uses on the wire:
//
//  - GET /v2/models/{m}[/versions/{v}]/config returns, and
//    tritonclient.http's get_model_config() hands back, the output of
//    ModelConfigToJson() in triton-inference-server/core
//    src/model_config_utils.cc:
//      1. protobuf MessageToJsonString() with preserve_proto_field_names
//         and always_print_primitive_fields, i.e. snake_case keys, fields
//         in .proto declaration order, every implicit-presence field
//         printed (""/0/false/first enum name/[]/{}), unset message and
//         oneof fields omitted, enums as names, 64-bit integers as
//         strings, bytes as base64, non-finite floats as "NaN"/"Infinity";
//      2. Triton's fix-ups, which turn a hard-coded list of 64-bit fields
//         back into JSON numbers. 64-bit fields not on that list (and map
//         keys) stay strings.
//  - RepositoryModelLoad's "config" parameter (tritonclient load_model(
//    config=...)) is parsed by Triton's JsonToModelConfig(): protobuf
//    JsonStringToMessage with unknown fields rejected and enum names
//    matched case-insensitively. fromTritonConfigJson() mirrors that.

import {
  type FieldSpec,
  INTEGER_RANGES,
  type MessageSpec,
  modelConfigSpec,
  roundToFloat32,
  type ScalarTypeName,
  setOwn,
  type ValueSpec,
} from './schema.js';

/** A model-config JSON (or internal object) that does not fit the schema. */
export class ConfigJsonError extends Error {
  /** Dotted path of the offending field, e.g. "input[0].dims[1]" ("" = root). */
  readonly path: string;
  readonly reason: string;

  constructor(path: string, reason: string) {
    super(path === '' ? `invalid model config: ${reason}` : `invalid model config field "${path}": ${reason}`);
    this.name = 'ConfigJsonError';
    this.path = path;
    this.reason = reason;
  }
}

type JsonObject = Record<string, unknown>;

const INT64_TYPES = new Set<ScalarTypeName>(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
const FLOAT_MAX = 3.4028234663852886e38;

function isPlainObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

function join(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`;
}

function mapPath(path: string, key: string): string {
  return `${path}[${JSON.stringify(key)}]`;
}

function describe(v: unknown): string {
  if (v instanceof Uint8Array) return 'a Buffer';
  if (Array.isArray(v)) return 'an array';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}

function enumDefault(value: Extract<ValueSpec, { kind: 'enum' }>): string {
  return value.enumType.valuesById[0] ?? (Object.keys(value.enumType.values)[0] as string);
}

// ---------------------------------------------------------------------------
// Shared scalar checks

/** Integer from a number or decimal string, range-checked and JS-safe. */
function toInteger(v: unknown, scalar: ScalarTypeName, path: string, allowString: boolean): number {
  let big: bigint;
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) throw new ConfigJsonError(path, `expected an integer (${scalar}), got ${describe(v)}`);
    if (!Number.isSafeInteger(v)) {
      throw new ConfigJsonError(path, `integer ${v} is beyond 2^53 and not exactly representable`);
    }
    big = BigInt(v);
  } else if (typeof v === 'string' && allowString && /^-?\d+$/.test(v)) {
    big = BigInt(v);
  } else {
    throw new ConfigJsonError(path, `expected an integer (${scalar}), got ${describe(v)}`);
  }
  const [min, max] = INTEGER_RANGES[scalar] as readonly [bigint, bigint];
  if (big < min || big > max) throw new ConfigJsonError(path, `integer ${big} out of range for ${scalar}`);
  const n = Number(big);
  if (!Number.isSafeInteger(n)) {
    throw new ConfigJsonError(path, `integer ${big} (${scalar}) is not exactly representable as a JavaScript number`);
  }
  return n;
}

function checkFloatRange(n: number, scalar: 'float' | 'double', path: string): number {
  if (scalar === 'float') {
    if (Number.isFinite(n) && Math.abs(n) > FLOAT_MAX) throw new ConfigJsonError(path, `${n} out of range for float`);
    return roundToFloat32(n);
  }
  return n;
}

// ---------------------------------------------------------------------------
// Internal object -> Triton JSON

function scalarToProtoJson(v: unknown, scalar: ScalarTypeName, path: string): unknown {
  switch (scalar) {
    case 'string':
      if (typeof v !== 'string') throw new ConfigJsonError(path, `expected a string, got ${describe(v)}`);
      return v;
    case 'bytes':
      if (!(v instanceof Uint8Array)) throw new ConfigJsonError(path, `expected a Buffer, got ${describe(v)}`);
      return Buffer.from(v).toString('base64');
    case 'bool':
      if (typeof v !== 'boolean') throw new ConfigJsonError(path, `expected a boolean, got ${describe(v)}`);
      return v;
    case 'float':
    case 'double': {
      if (typeof v !== 'number') throw new ConfigJsonError(path, `expected a number, got ${describe(v)}`);
      if (Number.isNaN(v)) return 'NaN';
      if (v === Infinity) return 'Infinity';
      if (v === -Infinity) return '-Infinity';
      return checkFloatRange(v, scalar, path);
    }
    default: {
      const n = toInteger(v, scalar, path, false);
      // protobuf prints 64-bit integers as JSON strings.
      return INT64_TYPES.has(scalar) ? String(n) : n;
    }
  }
}

function enumToProtoJson(v: unknown, value: Extract<ValueSpec, { kind: 'enum' }>, path: string): string {
  if (typeof v === 'string' && Object.hasOwn(value.enumType.values, v)) return v;
  if (typeof v === 'number' && value.enumType.valuesById[v] !== undefined) return value.enumType.valuesById[v];
  throw new ConfigJsonError(path, `expected a ${value.enumName} value name, got ${describe(v)}`);
}

function valueToProtoJson(v: unknown, value: ValueSpec, path: string): unknown {
  switch (value.kind) {
    case 'message':
      if (!isPlainObject(v)) throw new ConfigJsonError(path, `expected an object (${value.message.fullName}), got ${describe(v)}`);
      return messageToProtoJson(value.message, v, path);
    case 'enum':
      return enumToProtoJson(v, value, path);
    case 'scalar':
      return scalarToProtoJson(v, value.scalar, path);
  }
}

/** Canonical string form of a map key (JSON object keys are strings). */
function canonicalMapKey(key: string, scalar: ScalarTypeName, path: string): string {
  if (scalar === 'string') return key;
  if (scalar === 'bool') {
    if (key !== 'true' && key !== 'false') throw new ConfigJsonError(path, `map key ${JSON.stringify(key)} is not a bool`);
    return key;
  }
  return String(toInteger(key, scalar, path, true));
}

function defaultProtoJson(field: FieldSpec): unknown {
  const value = field.value;
  if (value.kind === 'enum') return enumDefault(value);
  if (value.kind === 'scalar') {
    if (value.scalar === 'string' || value.scalar === 'bytes') return '';
    if (value.scalar === 'bool') return false;
    return INT64_TYPES.has(value.scalar) ? '0' : 0;
  }
  throw new Error('unreachable: message fields have presence');
}

/**
 * protobuf MessageToJsonString(preserve_proto_field_names,
 * always_print_primitive_fields) applied to the internal object.
 */
function messageToProtoJson(spec: MessageSpec, obj: JsonObject, path: string): JsonObject {
  for (const key of Object.keys(obj)) {
    if (!spec.byName.has(key)) throw new ConfigJsonError(join(path, key), `unknown field in ${spec.fullName}`);
  }
  const out: JsonObject = {};
  const oneofSeen = new Map<string, string>();
  for (const field of spec.fields) {
    const v = obj[field.name];
    const fpath = join(path, field.name);
    if (field.mapKey !== undefined) {
      if (v !== undefined && !isPlainObject(v)) throw new ConfigJsonError(fpath, `expected an object (map), got ${describe(v)}`);
      const map: JsonObject = {};
      for (const [k, mv] of Object.entries(v ?? {})) {
        const kp = mapPath(fpath, k);
        setOwn(map, canonicalMapKey(k, field.mapKey, kp), valueToProtoJson(mv, field.value, kp));
      }
      out[field.name] = map;
    } else if (field.repeated) {
      if (v !== undefined && !Array.isArray(v)) throw new ConfigJsonError(fpath, `expected an array, got ${describe(v)}`);
      out[field.name] = (v ?? []).map((e: unknown, i: number) => valueToProtoJson(e, field.value, `${fpath}[${i}]`));
    } else if (v === undefined) {
      // Presence fields are omitted when unset; the rest print their default.
      if (!field.hasPresence) out[field.name] = defaultProtoJson(field);
    } else {
      if (field.oneof !== undefined) {
        const other = oneofSeen.get(field.oneof);
        if (other !== undefined) {
          throw new ConfigJsonError(fpath, `"${other}" and "${field.name}" both set in oneof "${field.oneof}"`);
        }
        oneofSeen.set(field.oneof, field.name);
      }
      out[field.name] = valueToProtoJson(v, field.value, fpath);
    }
  }
  return out;
}

// Triton's int64 fix-ups (ModelConfigToJson in core/src/model_config_utils.cc).
// They run on the parsed protobuf JSON and only touch the listed paths.

function fixInt(obj: unknown, name: string): void {
  if (isPlainObject(obj) && typeof obj[name] === 'string') obj[name] = Number(obj[name]);
}

function fixIntArray(obj: unknown, name: string): void {
  if (isPlainObject(obj) && Array.isArray(obj[name])) {
    obj[name] = (obj[name] as unknown[]).map((s) => Number(s));
  }
}

function eachObject(arr: unknown, fn: (o: JsonObject) => void): void {
  if (Array.isArray(arr)) for (const o of arr) if (isPlainObject(o)) fn(o);
}

function applyTritonInt64Fixups(json: JsonObject): void {
  for (const name of ['input', 'output']) {
    eachObject(json[name], (io) => {
      fixIntArray(io, 'dims');
      fixIntArray(io.reshape, 'shape');
    });
  }

  const vp = json.version_policy;
  if (isPlainObject(vp)) fixIntArray(vp.specific, 'versions');

  const db = json.dynamic_batching;
  if (isPlainObject(db)) {
    fixInt(db, 'max_queue_delay_microseconds');
    fixInt(db, 'priority_levels');
    fixInt(db, 'default_priority_level');
    fixInt(db.default_queue_policy, 'default_timeout_microseconds');
    // Map keys stay strings: JSON object keys cannot be numbers.
    const pqp = db.priority_queue_policy;
    if (isPlainObject(pqp)) for (const policy of Object.values(pqp)) fixInt(policy, 'default_timeout_microseconds');
  }

  const sb = json.sequence_batching;
  if (isPlainObject(sb)) {
    fixInt(sb, 'max_sequence_idle_microseconds');
    fixInt(sb.oldest, 'max_queue_delay_microseconds');
    fixInt(sb.direct, 'max_queue_delay_microseconds');
    // Triton looks up "initial_state" on sequence_batching instead of on
    // each state, so state[].initial_state[].dims keep their string form.
    // Reproduced on purpose: clients see exactly what Triton sends.
    eachObject(sb.state, (state) => fixIntArray(state, 'dims'));
  }

  const ens = json.ensemble_scheduling;
  if (isPlainObject(ens)) eachObject(ens.step, (step) => fixInt(step, 'model_version'));

  eachObject(json.model_warmup, (warmup) => {
    const inputs = warmup.inputs;
    if (isPlainObject(inputs)) for (const input of Object.values(inputs)) fixIntArray(input, 'dims');
  });
  // Not fixed by Triton, hence still strings: instance_group[].
  // secondary_devices[].device_id and optimization.cuda.graph_spec[]
  // (.graph_lower_bound).input{}.dim.
}

/**
 * The JSON object Triton returns for a model's configuration
 * (GET /v2/models/{name}/config), built from the internal object form.
 * Serialize it with JSON.stringify(); key order matches Triton's.
 *
 * @throws ConfigJsonError if `config` does not fit inference.ModelConfig.
 */
export function toTritonConfigJson(config: Record<string, unknown>): Record<string, unknown> {
  if (!isPlainObject(config)) throw new ConfigJsonError('', `expected an object, got ${describe(config)}`);
  const json = messageToProtoJson(modelConfigSpec, config, '');
  applyTritonInt64Fixups(json);
  return json;
}

// ---------------------------------------------------------------------------
// Triton JSON -> internal object

function scalarFromJson(v: unknown, scalar: ScalarTypeName, path: string): unknown {
  switch (scalar) {
    case 'string':
      if (typeof v !== 'string') throw new ConfigJsonError(path, `expected a string, got ${describe(v)}`);
      return v;
    case 'bytes':
      if (typeof v !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(v)) {
        throw new ConfigJsonError(path, `expected a base64 string, got ${describe(v)}`);
      }
      return Buffer.from(v.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    case 'bool':
      if (typeof v !== 'boolean') throw new ConfigJsonError(path, `expected true or false, got ${describe(v)}`);
      return v;
    case 'float':
    case 'double': {
      let n: number;
      if (typeof v === 'number') {
        n = v;
      } else if (v === 'NaN') {
        n = NaN;
      } else if (v === 'Infinity') {
        n = Infinity;
      } else if (v === '-Infinity') {
        n = -Infinity;
      } else if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) {
        n = Number(v);
      } else {
        throw new ConfigJsonError(path, `expected a number, got ${describe(v)}`);
      }
      return checkFloatRange(n, scalar, path);
    }
    default:
      // protobuf's JSON parser takes integers as numbers or decimal strings.
      return toInteger(v, scalar, path, true);
  }
}

function enumFromJson(v: unknown, value: Extract<ValueSpec, { kind: 'enum' }>, path: string): string {
  const values = value.enumType.values;
  if (typeof v === 'string') {
    if (Object.hasOwn(values, v)) return v;
    // Triton parses with case_insensitive_enum_parsing.
    const upper = v.toUpperCase();
    if (Object.hasOwn(values, upper)) return upper;
    throw new ConfigJsonError(path, `unknown ${value.enumName} value ${JSON.stringify(v)}`);
  }
  if (typeof v === 'number' && Number.isInteger(v)) {
    const name = value.enumType.valuesById[v];
    if (name !== undefined) return name;
    throw new ConfigJsonError(path, `unknown ${value.enumName} number ${v}`);
  }
  throw new ConfigJsonError(path, `expected a ${value.enumName} value name, got ${describe(v)}`);
}

function valueFromJson(v: unknown, value: ValueSpec, path: string): unknown {
  if (v === null) throw new ConfigJsonError(path, 'null is not allowed here');
  switch (value.kind) {
    case 'message':
      if (!isPlainObject(v)) throw new ConfigJsonError(path, `expected an object (${value.message.fullName}), got ${describe(v)}`);
      return messageFromJson(value.message, v, path);
    case 'enum':
      return enumFromJson(v, value, path);
    case 'scalar':
      return scalarFromJson(v, value.scalar, path);
  }
}

function messageFromJson(spec: MessageSpec, obj: JsonObject, path: string): JsonObject {
  const out: JsonObject = {};
  const oneofSeen = new Map<string, string>();
  for (const [key, v] of Object.entries(obj)) {
    const field = spec.byAnyName.get(key);
    const fpath = join(path, field?.name ?? key);
    if (!field) throw new ConfigJsonError(fpath, `unknown field in ${spec.fullName}`);
    if (Object.hasOwn(out, field.name)) {
      throw new ConfigJsonError(fpath, 'field given more than once');
    }
    // protobuf treats null as "not set".
    if (v === null) continue;

    if (field.mapKey !== undefined) {
      if (!isPlainObject(v)) throw new ConfigJsonError(fpath, `expected an object (map), got ${describe(v)}`);
      const map: JsonObject = {};
      for (const [k, mv] of Object.entries(v)) {
        const kp = mapPath(fpath, k);
        setOwn(map, canonicalMapKey(k, field.mapKey, kp), valueFromJson(mv, field.value, kp));
      }
      out[field.name] = map;
    } else if (field.repeated) {
      if (!Array.isArray(v)) throw new ConfigJsonError(fpath, `expected an array, got ${describe(v)}`);
      out[field.name] = v.map((e: unknown, i: number) => valueFromJson(e, field.value, `${fpath}[${i}]`));
    } else {
      if (field.oneof !== undefined) {
        const other = oneofSeen.get(field.oneof);
        if (other !== undefined) {
          throw new ConfigJsonError(fpath, `"${other}" and "${field.name}" both set in oneof "${field.oneof}"`);
        }
        oneofSeen.set(field.oneof, field.name);
      }
      out[field.name] = valueFromJson(v, field.value, fpath);
    }
  }
  return out;
}

/**
 * Parses a Triton model-config JSON (an object, or its JSON text as sent in
 * RepositoryModelLoad's "config" parameter) into the internal object form
 * of parseTextProto(). Accepts proto or lowerCamelCase field names, 64-bit
 * integers as numbers or strings, enum names (any case) or numbers; null
 * means "not set". Fields present in the JSON are kept even when they hold
 * the default value.
 *
 * @throws ConfigJsonError naming the offending field.
 */
export function fromTritonConfigJson(json: unknown): Record<string, unknown> {
  let value = json;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value) as unknown;
    } catch (err) {
      throw new ConfigJsonError('', `not valid JSON: ${(err as Error).message}`);
    }
  }
  if (!isPlainObject(value)) throw new ConfigJsonError('', `expected a JSON object, got ${describe(value)}`);
  return messageFromJson(modelConfigSpec, value, '');
}
