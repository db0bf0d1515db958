#!/usr/bin/env node
// Prints a canonical JSON description of the gRPC protocol files in proto/
// (by default proto/grpc_service.proto, which imports proto/model_config.proto),
// as protobufjs reads them with keepCase, the way Serval loads them.
//
//   npm run build && node dist/tools/ci/proto_descriptors.js [FILE.proto ...]
//
// Files are loaded by the server's own loader (src/config/schema.ts): resolved against proto/,
// imports too, keepCase. The output is what
// test/conformance/test_proto_vendored.py builds from the compiled descriptors
// that tritonclient ships (tritonclient.grpc.service_pb2 / model_config_pb2),
// so the two can be compared without protoc:
//
//   {
//     "files":    { "<file>.proto": "<package>" },
//     "messages": { "<pkg.Full.Name>": { "file", "fields": [FIELD...], "field_order": [NAME...],
//                                         "oneofs": [NAME...] } },
//     "enums":    { "<pkg.Full.Name>": { "file", "values": { NAME: NUMBER } } },
//     "services": { "<pkg.Full.Name>": { "file", "methods": { NAME: METHOD } } }
//   }
//   FIELD  = { name, number, label: "optional"|"repeated",
//              type: scalar name | "message" | "enum" | "map",
//              type_name: "pkg.Full.Name" | null,        (message/enum, or a map's value)
//              key_type: scalar name | null,             (maps only)
//              value_type: scalar name|"message"|"enum"|null,  (maps only)
//              oneof: NAME | null }                      (proto3 `optional` is "optional" + null)
//   METHOD = { input_type, output_type, client_streaming, server_streaming }
//
// "fields" are listed by number, "field_order" gives the names in declaration
// order (Serval's Triton-style config JSON follows it). Map entry messages
// (FooEntry) are folded into their map fields, as protobufjs has no message
// for them.
import { basename, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { loadProtoRoot, SCALAR_TYPES } from '../../src/config/schema.js';

interface FieldDescription {
  name: string;
  number: number;
  label: 'optional' | 'repeated';
  type: string;
  type_name: string | null;
  key_type: string | null;
  value_type: string | null;
  oneof: string | null;
}

interface MethodDescription {
  input_type: string;
  output_type: string;
  client_streaming: boolean;
  server_streaming: boolean;
}

export interface ProtoDescription {
  files: Record<string, string>;
  messages: Record<string, { file: string | null; fields: FieldDescription[]; field_order: string[]; oneofs: string[] }>;
  enums: Record<string, { file: string | null; values: Record<string, number> }>;
  services: Record<string, { file: string | null; methods: Record<string, MethodDescription> }>;
}

const fullName = (obj: protobuf.ReflectionObject): string => obj.fullName.replace(/^\./, '');
const fileOf = (obj: protobuf.ReflectionObject): string | null => (obj.filename ? basename(obj.filename) : null);

function valueKind(field: protobuf.Field): { type: string; type_name: string | null } {
  if (SCALAR_TYPES.has(field.type)) return { type: field.type, type_name: null };
  const t = field.resolvedType;
  if (t instanceof protobuf.Enum) return { type: 'enum', type_name: fullName(t) };
  if (t instanceof protobuf.Type) return { type: 'message', type_name: fullName(t) };
  throw new Error(`unresolved type ${field.type} of ${field.fullName}`);
}

function describeField(field: protobuf.Field): FieldDescription {
  // A proto3 `optional` field lives in a synthetic oneof "_<name>": report it
  // as a plain optional field, as the Python side does.
  const oneof = field.partOf && !(field.partOf.oneof.length === 1 && field.partOf.name === `_${field.name}`) ? field.partOf.name : null;
  if (field instanceof protobuf.MapField) {
    const v = valueKind(field);
    return {
      name: field.name,
      number: field.id,
      label: 'repeated',
      type: 'map',
      type_name: v.type_name,
      key_type: field.keyType,
      value_type: v.type,
      oneof: null,
    };
  }
  const v = valueKind(field);
  return {
    name: field.name,
    number: field.id,
    label: field.repeated ? 'repeated' : 'optional',
    type: v.type,
    type_name: v.type_name,
    key_type: null,
    value_type: null,
    oneof,
  };
}

export function describe(files: string[]): ProtoDescription {
  const root = loadProtoRoot(files);
  const out: ProtoDescription = { files: {}, messages: {}, enums: {}, services: {} };
  const walk = (ns: protobuf.NamespaceBase): void => {
    for (const obj of ns.nestedArray) {
      if (obj instanceof protobuf.Type) {
        out.messages[fullName(obj)] = {
          file: fileOf(obj),
          fields: obj.fieldsArray.map((f) => describeField(f)).sort((a, b) => a.number - b.number),
          field_order: obj.fieldsArray.map((f) => f.name),
          oneofs: obj.oneofsArray
            .filter((o) => !(o.oneof.length === 1 && o.name === `_${o.oneof[0]}`))
            .map((o) => o.name)
            .sort(),
        };
      } else if (obj instanceof protobuf.Enum) {
        out.enums[fullName(obj)] = { file: fileOf(obj), values: { ...obj.values } };
      } else if (obj instanceof protobuf.Service) {
        const methods: Record<string, MethodDescription> = {};
        for (const m of obj.methodsArray) {
          methods[m.name] = {
            input_type: fullName(m.resolvedRequestType!),
            output_type: fullName(m.resolvedResponseType!),
            client_streaming: Boolean(m.requestStream),
            server_streaming: Boolean(m.responseStream),
          };
        }
        out.services[fullName(obj)] = { file: fileOf(obj), methods };
      }
      // A top-level message, enum or service names its file's package: the
      // namespace it sits in.
      const topLevel = obj instanceof protobuf.Type || obj instanceof protobuf.Enum || obj instanceof protobuf.Service;
      const file = fileOf(obj);
      if (topLevel && file && obj.parent && !(obj.parent instanceof protobuf.Type)) {
        out.files[file] = fullName(obj.parent);
      }
      if (obj instanceof protobuf.Namespace) walk(obj); // packages, and messages' nested types
    }
  };
  walk(root);
  return out;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(obj)
        .sort()
        .map((k) => [k, sortKeys(obj[k])]),
    );
  }
  return value;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const files = args.length ? args.map((f) => basename(f)) : ['grpc_service.proto', 'model_config.proto'];
  process.stdout.write(`${JSON.stringify(sortKeys(describe(files)), null, 2)}\n`);
}
