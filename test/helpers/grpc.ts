// A promise-based client for inference.GRPCInferenceService and grpc.health.v1.Health, loaded
// from the project's proto files with @grpc/proto-loader.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_DIR } from './paths.js';

export interface GrpcError extends Error {
  code: number;
  details: string;
}

export type Unary = (req: Record<string, unknown>, opts?: { deadlineMs?: number }) => Promise<any>;

export interface GrpcClient {
  call(method: string, req: Record<string, unknown>, opts?: { deadlineMs?: number }): Promise<any>;
  /** A call that can be cancelled by the client. */
  cancellable(method: string, req: Record<string, unknown>): { result: Promise<any>; cancel(): void };
  /** Resolves with the error a call fails with; fails the test if the call succeeds. */
  error(method: string, req: Record<string, unknown>): Promise<GrpcError>;
  health(service?: string): Promise<{ status: string }>;
  close(): void;
}

let defs: grpc.GrpcObject | undefined;

function definitions(): grpc.GrpcObject {
  defs ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(['grpc_service.proto', 'health.proto'], {
      includeDirs: [PROTO_DIR],
      keepCase: true,
      // Strings keep 64-bit values exact in both directions.
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    }),
  );
  return defs;
}

export function grpcClient(address: string): GrpcClient {
  const pkg = definitions() as any;
  const options = { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 };
  const svc = new pkg.inference.GRPCInferenceService(address, grpc.credentials.createInsecure(), options) as grpc.Client &
    Record<string, Function>;
  const health = new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Function>;

  const invoke = (client: grpc.Client & Record<string, Function>, method: string, req: unknown, deadlineMs = 30_000): Promise<any> =>
    new Promise((resolve, reject) => {
      client[method]!.call(client, req, { deadline: Date.now() + deadlineMs }, (err: GrpcError | null, res: unknown) =>
        err ? reject(err) : resolve(res),
      );
    });

  return {
    call: (method, req, opts) => invoke(svc, method, req, opts?.deadlineMs),
    cancellable: (method, req) => {
      let call: grpc.ClientUnaryCall | undefined;
      const result = new Promise((resolve, reject) => {
        call = svc[method]!.call(svc, req, (err: GrpcError | null, res: unknown) => (err ? reject(err) : resolve(res)));
      });
      return { result, cancel: () => call!.cancel() };
    },
    error: async (method, req) => {
      try {
        await invoke(svc, method, req);
      } catch (e) {
        return e as GrpcError;
      }
      throw new Error(`expected ${method} to fail, but it succeeded`);
    },
    health: (service = '') => invoke(health, 'Check', { service }),
    close: () => {
      svc.close();
      health.close();
    },
  };
}

export const status = grpc.status;
