// gRPC calls that carry metadata (restricted protocols need it), unary and streaming, on a plain
// grpc-js client; the services are the project's proto files, loaded as the server loads them.
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { packageDefinition } from './grpc.js';

const packageDef = packageDefinition();
export const INFERENCE = packageDef['inference.GRPCInferenceService'] as protoLoader.ServiceDefinition;
export const HEALTH = packageDef['grpc.health.v1.Health'] as protoLoader.ServiceDefinition;

export interface CallError {
  code: number;
  details: string;
}

/** A unary call with metadata; resolves with the reply or the error. */
export function unary(
  client: grpc.Client,
  svc: protoLoader.ServiceDefinition,
  method: string,
  req: Record<string, unknown>,
  meta: Record<string, string> = {},
): Promise<{ reply?: Record<string, unknown>; error?: CallError }> {
  const m = svc[method]!;
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(meta)) md.set(k, v);
  return new Promise((resolve) => {
    client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, req, md, { deadline: Date.now() + 10_000 }, (err, res) =>
      resolve(err ? { error: err } : { reply: res as Record<string, unknown> }),
    );
  });
}

/** Opens a streaming call (server- or bidi-streaming), sends `req` if the client streams, and collects until the end. */
export function streamed(
  client: grpc.Client,
  svc: protoLoader.ServiceDefinition,
  method: string,
  req: Record<string, unknown>,
  meta: Record<string, string> = {},
): Promise<{ replies: unknown[]; error?: CallError }> {
  const m = svc[method]!;
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(meta)) md.set(k, v);
  return new Promise((resolve) => {
    const replies: unknown[] = [];
    const options = { deadline: Date.now() + 10_000 };
    const call = m.requestStream
      ? client.makeBidiStreamRequest(m.path, m.requestSerialize, m.responseDeserialize, md, options)
      : client.makeServerStreamRequest(m.path, m.requestSerialize, m.responseDeserialize, req, md, options);
    if (m.requestStream) {
      (call as grpc.ClientDuplexStream<unknown, unknown>).write(req);
      (call as grpc.ClientDuplexStream<unknown, unknown>).end();
    }
    call.on('data', (d: unknown) => replies.push(d));
    call.on('error', (e: CallError) => resolve({ replies, error: e }));
    call.on('end', () => resolve({ replies }));
  });
}
