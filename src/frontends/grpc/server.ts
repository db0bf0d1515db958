// The gRPC front-end: inference.GRPCInferenceService and grpc.health.v1.Health over @grpc/grpc-js.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { CoreApi } from '../../core/api.js';
import { Cancellation } from '../../kernel/cancel.js';
import { asServalError, grpcStatus, ServalError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/log.js';
import { protoDir } from '../../kernel/paths.js';
import { decodeGrpcInfer, encodeGrpcInfer, type GrpcInferRequest } from './infer_codec.js';

// Triton accepts messages up to 2 GiB; grpc-js defaults to 4 MiB.
const MAX_MESSAGE = 2 ** 31 - 1;

type Call<Req> = grpc.ServerUnaryCall<Req, unknown>;
type Callback = grpc.sendUnaryData<unknown>;

function loadDefinitions(): grpc.GrpcObject {
  const def = protoLoader.loadSync(['grpc_service.proto', 'health.proto'], {
    includeDirs: [protoDir()],
    keepCase: true,
    // 64-bit values stay strings so INT64/UINT64 contents and parameters are exact.
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(def);
}

/**
 * The one error path: wraps a synchronous or async handler so every error maps through the one
 * status table; server faults (INTERNAL, unexpected errors) are logged with the method and the
 * inference request's id.
 */
function unaryWith(log: Logger) {
  return <Req>(fn: (req: Req, call: Call<Req>) => unknown) =>
    (call: Call<Req>, cb: Callback): void => {
      Promise.resolve()
        .then(() => fn(call.request, call))
        .then(
          (res) => cb(null, res),
          (e: unknown) => {
            const err = asServalError(e);
            if (err.code === 'INTERNAL') {
              const id = (call.request as { id?: unknown } | undefined)?.id;
              log.error('grpc request failed', {
                method: call.getPath(),
                request_id: typeof id === 'string' ? id : undefined,
                error: e instanceof Error ? (e.stack ?? e.message) : String(e),
              });
            }
            cb(Object.assign(new Error(err.message), { code: grpcStatus(err.code), details: err.message, metadata: new grpc.Metadata() }));
          },
        );
    };
}

interface RepositoryRequest {
  model_name: string;
  parameters?: Record<string, { parameter_choice?: string } & Record<string, unknown>>;
}

/** ModelRepositoryParameter map → plain values (bytes stay Buffers). */
function repositoryParams(m: RepositoryRequest['parameters']): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, p] of Object.entries(m ?? {})) out[k] = p.parameter_choice ? p[p.parameter_choice] : undefined;
  return out;
}

export interface GrpcServer {
  server: grpc.Server;
  port: number;
}

export async function startGrpcServer(core: CoreApi, log: Logger, host: string, port: number): Promise<GrpcServer> {
  const unary = unaryWith(log);
  const pkg = loadDefinitions() as unknown as {
    inference: { GRPCInferenceService: grpc.ServiceClientConstructor };
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  };
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_MESSAGE,
    'grpc.max_send_message_length': MAX_MESSAGE,
  });

  server.addService(pkg.inference.GRPCInferenceService.service, {
    ServerLive: unary(() => ({ live: core.isLive() })),
    ServerReady: unary(() => ({ ready: core.isReady() })),
    ModelReady: unary((r: { name: string; version: string }) => ({ ready: core.isModelReady(r.name, r.version ?? '') })),
    ServerMetadata: unary(() => core.serverMetadata()),
    ModelMetadata: unary((r: { name: string; version: string }) => core.modelMetadata(r.name, r.version ?? '')),
    ModelConfig: unary((r: { name: string; version: string }) => ({ config: core.modelConfig(r.name, r.version ?? '') })),
    ModelStatistics: unary((r: { name: string; version: string }) => ({ model_stats: core.statistics(r.name ?? '', r.version ?? '') })),
    RepositoryIndex: unary(async (r: { ready: boolean }) => ({ models: await core.repositoryIndex(r.ready ?? false) })),
    RepositoryModelLoad: unary(async (r: RepositoryRequest) => {
      await core.loadModel(r.model_name, repositoryParams(r.parameters));
      return {};
    }),
    RepositoryModelUnload: unary(async (r: RepositoryRequest) => {
      await core.unloadModel(r.model_name);
      return {};
    }),
    ModelInfer: unary(async (r: GrpcInferRequest, call) => {
      const req = decodeGrpcInfer(r);
      const cancellation = new Cancellation();
      call.once('cancelled', () => cancellation.cancel());
      req.cancellation = cancellation;
      return encodeGrpcInfer(await core.infer(req));
    }),
  });

  server.addService(pkg.grpc.health.v1.Health.service, {
    Check: unary((r: { service: string }) => {
      const svc = r.service ?? '';
      if (svc !== '' && svc !== 'inference.GRPCInferenceService') {
        throw ServalError.notFound(`unknown service '${svc}'`);
      }
      return { status: core.isReady() ? 'SERVING' : 'NOT_SERVING' };
    }),
  });

  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  log.debug('grpc server bound', { port: bound });
  return { server, port: bound };
}
