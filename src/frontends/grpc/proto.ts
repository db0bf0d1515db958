// Triton's protos as every gRPC piece of the project loads them (the server, tests, tools): one
// set of loader options, so a test or tool sees messages exactly as the server does.
import type * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoDir } from '../../kernel/paths.js';

export const PROTO_LOAD_OPTIONS: protoLoader.Options = {
  keepCase: true,
  // 64-bit values stay strings so INT64/UINT64 contents and parameters are exact.
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

export function loadProtos(files: string[] = ['grpc_service.proto']): protoLoader.PackageDefinition {
  return protoLoader.loadSync(files, { includeDirs: [protoDir()], ...PROTO_LOAD_OPTIONS });
}

export type Method = grpc.MethodDefinition<unknown, unknown>;

/** inference.GRPCInferenceService's methods by name, with proto-loader's (de)serializers. */
export function inferenceMethods(): Record<string, Method> {
  return loadProtos()['inference.GRPCInferenceService'] as unknown as Record<string, Method>;
}
