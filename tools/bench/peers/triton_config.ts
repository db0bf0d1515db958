/**
 * Triton's answer to the ModelConfig call for a model served by MLServer in the peer benchmark
 * (tools/bench/peers/mlserver_launch.py serves it; MLServer has no such call and perf_analyzer
 * needs it). Derived from the model's config.pbtxt with Serval's own parser: the HTTP form is
 * Triton's config JSON (config/config_json.ts), the gRPC form an encoded
 * inference.ModelConfigResponse (proto/grpc_service.proto). Nothing about a model is written
 * here by hand.
 */
import { toTritonConfigJson } from '../../../src/config/config_json.js';
import { parseModelConfigText } from '../../../src/config/pbtxt.js';
import { loadProtoRoot } from '../../../src/config/schema.js';

export interface TritonConfigAnswer {
  /** GET /v2/models/{m}/config's body. */
  json: Record<string, unknown>;
  /** inference.ModelConfigResponse, protobuf-encoded, base64. */
  grpc: string;
}

let responseType: ReturnType<ReturnType<typeof loadProtoRoot>['lookupType']> | undefined;

export function tritonConfigAnswer(pbtxt: string, fileName = 'config.pbtxt'): TritonConfigAnswer {
  const config = parseModelConfigText(pbtxt, fileName) as Record<string, unknown>;
  responseType ??= loadProtoRoot('grpc_service.proto').lookupType('inference.ModelConfigResponse');
  const message = responseType.fromObject({ config });
  return {
    json: toTritonConfigJson(config),
    grpc: Buffer.from(responseType.encode(message).finish()).toString('base64'),
  };
}
