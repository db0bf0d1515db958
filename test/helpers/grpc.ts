// A promise-based client for inference.GRPCInferenceService and grpc.health.v1.Health, loaded
// from the project's proto files with @grpc/proto-loader the way the server loads them (int64 as
// strings, enums as names). Used by the in-process front-end tests and the integration tests.
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { expect } from 'vitest';
import { loadProtos } from '../../src/frontends/grpc/proto.js';

export const status = grpc.status;

export interface GrpcError extends Error {
  code: number;
  details: string;
}

/** A response message a test did not declare a type for: the test's expectations check what it reads. */
// biome-ignore lint/suspicious/noExplicitAny: a response message is checked by the test's expectations, not by a declared type
export type Message = any;

export interface CallOptions {
  /** Milliseconds until the call's deadline (default 30 s). */
  deadlineMs?: number;
}

export interface GrpcClient {
  /** A unary call; `T` is the caller's view of the response message. */
  call<T = Message>(method: string, req: Record<string, unknown>, opts?: CallOptions): Promise<T>;
  /** A call that can be cancelled by the client (no deadline). */
  cancellable<T = Message>(method: string, req: Record<string, unknown>): { result: Promise<T>; cancel(): void };
  /** Resolves with the error a call fails with; fails the test if the call succeeds. */
  error(method: string, req: Record<string, unknown>, opts?: CallOptions): Promise<GrpcError>;
  /** grpc.health.v1.Health/Check. */
  health(service?: string): Promise<{ status: string }>;
  /** The error grpc.health.v1.Health/Check fails with; fails the test if the call succeeds. */
  healthError(service: string): Promise<GrpcError>;
  close(): void;
}

let definition: protoLoader.PackageDefinition | undefined;

/** The server's proto files, loaded once as the server loads them (every gRPC test helper uses this). */
export function packageDefinition(): protoLoader.PackageDefinition {
  definition ??= loadProtos(['grpc_service.proto', 'health.proto']);
  return definition;
}

function service(name: string): protoLoader.ServiceDefinition {
  const svc = packageDefinition()[name] as protoLoader.ServiceDefinition | undefined;
  if (!svc) throw new Error(`no service ${name} in the proto files`);
  return svc;
}

export function grpcClient(address: string): GrpcClient {
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  });
  const inference = service('inference.GRPCInferenceService');
  const health = service('grpc.health.v1.Health');

  /** Starts a unary call; `deadlineMs` undefined: no deadline. */
  const start = <T>(svc: protoLoader.ServiceDefinition, method: string, req: Record<string, unknown>, deadlineMs: number | undefined) => {
    const m = svc[method];
    if (!m) throw new Error(`no method ${method} in the service`);
    let call: grpc.ClientUnaryCall | undefined;
    const result = new Promise<T>((resolve, reject) => {
      const options = deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs };
      call = client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, req, options, (err, res) =>
        err ? reject(err) : resolve(res as T),
      );
    });
    return { result, cancel: () => call!.cancel() };
  };
  const invoke = <T>(svc: protoLoader.ServiceDefinition, method: string, req: Record<string, unknown>, deadlineMs = 30_000): Promise<T> =>
    start<T>(svc, method, req, deadlineMs).result;
  const failure = async (
    svc: protoLoader.ServiceDefinition,
    method: string,
    req: Record<string, unknown>,
    deadlineMs?: number,
  ): Promise<GrpcError> => {
    try {
      await invoke(svc, method, req, deadlineMs);
    } catch (e) {
      // Not a gRPC status (a typo in the method name, say): the test's own fault, not the call's.
      if (typeof (e as Partial<GrpcError>).code !== 'number') throw e;
      return e as GrpcError;
    }
    throw new Error(`expected ${method} to fail, but it succeeded`);
  };

  return {
    call: (method, req, opts) => invoke(inference, method, req, opts?.deadlineMs),
    cancellable: (method, req) => start(inference, method, req, undefined),
    error: (method, req, opts) => failure(inference, method, req, opts?.deadlineMs),
    health: (svc = '') => invoke(health, 'Check', { service: svc }),
    healthError: (svc) => failure(health, 'Check', { service: svc }),
    close: () => client.close(),
  };
}

/** Calls `method`, which must fail with status `code` and exactly these `details` (or details matching them); returns the error. */
export async function expectGrpcError(
  client: GrpcClient,
  method: string,
  req: Record<string, unknown>,
  code: number,
  details: string | RegExp,
): Promise<GrpcError> {
  const e = await client.error(method, req);
  expect(e.code, e.details).toBe(code);
  if (typeof details === 'string') expect(e.details).toBe(details);
  else expect(e.details).toMatch(details);
  return e;
}
