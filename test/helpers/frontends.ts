// Helpers for the in-process front-end tests (test/unit/http_frontend.test.ts,
// test/unit/grpc_frontend.test.ts): tensors as bytes, the binary tensor extension, a captured
// logger, a fake CoreApi, and a typed gRPC client over the project's proto files.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { CoreApi } from '../../src/core/api.js';
import { ServalError } from '../../src/kernel/errors.js';
import { createLogger, type Logger } from '../../src/kernel/log.js';
import { protoDir } from '../../src/kernel/paths.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';

export const range = (n: number, f: (i: number) => number = (i) => i): number[] => Array.from({ length: n }, (_, i) => f(i));

/** INT32 values as little-endian bytes. */
export function i32(values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => {
    b.writeInt32LE(v, i * 4);
  });
  return b;
}

/** Little-endian INT32 bytes as numbers. */
export function fromI32(bytes: Uint8Array): number[] {
  if (bytes.byteLength % 4 !== 0) throw new Error(`${bytes.byteLength} bytes are not a whole number of INT32 values`);
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return range(b.byteLength / 4, (i) => b.readInt32LE(i * 4));
}

/** A binary-extension body: the JSON header, then the blobs; and the header's length. */
export function binaryBody(doc: unknown, blobs: Uint8Array[]): { body: Buffer; headerLength: number } {
  const header = Buffer.from(JSON.stringify(doc));
  return { body: Buffer.concat([header, ...blobs]), headerLength: header.byteLength };
}

export interface HttpOutput {
  name: string;
  datatype: string;
  shape: number[];
  data?: unknown[];
  parameters?: Record<string, unknown>;
}

export interface HttpInferResponse {
  model_name: string;
  model_version: string;
  id?: string;
  parameters?: Record<string, unknown>;
  outputs: HttpOutput[];
}

/**
 * Splits a response body into its JSON header and the binary outputs it announces, in output
 * order. Throws when the binary tail is not exactly what the header announces.
 */
export function splitBinaryResponse(body: Buffer, headerLength: number): { doc: HttpInferResponse; binary: Map<string, Buffer> } {
  const doc = JSON.parse(body.toString('utf8', 0, headerLength)) as HttpInferResponse;
  const binary = new Map<string, Buffer>();
  let off = headerLength;
  for (const o of doc.outputs) {
    const size = o.parameters?.binary_data_size;
    if (typeof size !== 'number') continue;
    if (off + size > body.byteLength) throw new Error(`output '${o.name}' announces ${size} bytes past the end of the body`);
    binary.set(o.name, body.subarray(off, off + size));
    off += size;
  }
  if (off !== body.byteLength) throw new Error(`the response has ${body.byteLength - off} bytes no output claims`);
  return { doc, binary };
}

/** A logger whose lines (errors and warnings; verbose 0) are kept for the test to read. */
export function capturedLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger(0, (l) => lines.push(l)), lines };
}

const unused = (what: string) => (): never => {
  throw new Error(`fake core: ${what} was not expected to be called`);
};

/**
 * A CoreApi that is not InferenceCore. Its `infer` and `modelMetadata` fail according to the
 * model name, so the front-ends' one error path can be driven with any kind of error:
 *   boom        → a plain `new Error('boom')` thrown synchronously (an unexpected fault)
 *   boom_async  → a plain `new Error('boom')` as a rejected promise
 *   internal    → ServalError INTERNAL
 *   busy        → ServalError UNAVAILABLE
 *   invalid     → ServalError INVALID_ARG
 *   unsupported → ServalError UNSUPPORTED
 * Every call to `infer` is recorded in `requests`.
 */
export function fakeCore(): CoreApi & { requests: InferRequest[] } {
  const requests: InferRequest[] = [];
  const fail = (model: string, what: string): never => {
    switch (model) {
      case 'boom':
      case 'boom_async':
        throw new Error('boom');
      case 'internal':
        throw ServalError.internal(`${what} exploded inside the core`);
      case 'busy':
        throw ServalError.unavailable('Exceeds maximum queue size');
      case 'invalid':
        throw ServalError.invalidArg(`[request id: <id_unknown>] ${what}: bad request for model '${model}'`);
      case 'unsupported':
        throw ServalError.unsupported(`${what}: not supported by the fake core`);
      default:
        throw ServalError.notFound(`Request for unknown model: '${model}' is not found`);
    }
  };
  return {
    requests,
    isLive: () => true,
    isReady: () => true,
    isAccepting: () => true,
    serverMetadata: () => ({ name: 'fake', version: '9.9.9', extensions: [] }),
    isModelReady: () => false,
    modelMetadata: (name: string) => fail(name, 'metadata'),
    modelConfig: (name: string) => fail(name, 'config'),
    statistics: unused('statistics'),
    metricsSnapshot: () => [],
    repositoryIndex: async () => [],
    loadModel: unused('loadModel'),
    unloadModel: unused('unloadModel'),
    infer(req: InferRequest): Promise<InferResponse> {
      requests.push(req);
      if (req.modelName === 'boom_async') return Promise.reject(new Error('boom'));
      return fail(req.modelName, 'infer');
    },
  };
}

/** Lines of a captured log at level=error. */
export const errorLines = (lines: string[]): string[] => lines.filter((l) => / level=error /.test(l));

// ---- gRPC --------------------------------------------------------------------------------------

let definition: protoLoader.PackageDefinition | undefined;

/** The project's proto files, loaded the way the server loads them (int64 as strings, enums as names). */
function packageDefinition(): protoLoader.PackageDefinition {
  definition ??= protoLoader.loadSync(['grpc_service.proto', 'health.proto'], {
    includeDirs: [protoDir()],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return definition;
}

export interface GrpcError extends Error {
  code: number;
  details: string;
}

export interface TestGrpcClient {
  /** A unary GRPCInferenceService call; `T` is the caller's view of the response message. */
  call<T>(method: string, req: Record<string, unknown>): Promise<T>;
  /** The error a call fails with; throws if the call succeeds. */
  error(method: string, req: Record<string, unknown>): Promise<GrpcError>;
  close(): void;
}

export function grpcTestClient(address: string, service = 'inference.GRPCInferenceService'): TestGrpcClient {
  const svc = packageDefinition()[service] as protoLoader.ServiceDefinition | undefined;
  if (!svc) throw new Error(`no service ${service} in the proto files`);
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  });
  const call = <T>(method: string, req: Record<string, unknown>): Promise<T> => {
    const m = svc[method];
    if (!m) return Promise.reject(new Error(`no method ${service}/${method}`));
    return new Promise<T>((resolve, reject) => {
      client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, req, { deadline: Date.now() + 10_000 }, (err, res) =>
        err ? reject(err) : resolve(res as T),
      );
    });
  };
  return {
    call,
    async error(method, req) {
      try {
        await call<unknown>(method, req);
      } catch (e) {
        return e as GrpcError;
      }
      throw new Error(`expected ${method} to fail, but it succeeded`);
    },
    close: () => client.close(),
  };
}
