// The gRPC front-end: inference.GRPCInferenceService and grpc.health.v1.Health over @grpc/grpc-js.
import * as grpc from '@grpc/grpc-js';
import type { CoreApi } from '../../core/api.js';
import type { ByteBudget } from '../../kernel/byte_budget.js';
import { Cancellation } from '../../kernel/cancel.js';
import { ServalError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/log.js';
import { forwardedMetadata, type HeaderPattern } from '../header_forward.js';
import { grpcRefusal, type Restrictions, restrictedAddService } from '../restricted.js';
import {
  type GrpcKeepalive,
  type GrpcTls,
  keepaliveOptions,
  policeServerPings,
  serverCredentials,
  widenFlowControl,
} from './connection.js';
import type { HealthHandlers } from './generated/grpc/health/v1/Health.js';
import type { HealthCheckRequest__Output } from './generated/grpc/health/v1/HealthCheckRequest.js';
import type { ProtoGrpcType } from './generated/grpc_service.js';
import type { ProtoGrpcType as HealthProto } from './generated/health.js';
import type { GRPCInferenceServiceHandlers } from './generated/inference/GRPCInferenceService.js';
import type { ModelConfig } from './generated/inference/ModelConfig.js';
import type { ModelConfigRequest__Output } from './generated/inference/ModelConfigRequest.js';
import type { ModelMetadataRequest__Output } from './generated/inference/ModelMetadataRequest.js';
import type { ModelReadyRequest__Output } from './generated/inference/ModelReadyRequest.js';
import type { ModelRepositoryParameter__Output } from './generated/inference/ModelRepositoryParameter.js';
import type { ModelStatisticsRequest__Output } from './generated/inference/ModelStatisticsRequest.js';
import type { RepositoryIndexRequest__Output } from './generated/inference/RepositoryIndexRequest.js';
import type { RepositoryModelLoadRequest__Output } from './generated/inference/RepositoryModelLoadRequest.js';
import type { RepositoryModelUnloadRequest__Output } from './generated/inference/RepositoryModelUnloadRequest.js';
import { readInferRequest, type WireInferRequest, writeInferResponse } from './infer_wire.js';
import { serveLeanGrpc } from './lean_grpc.js';
import { loadProtos } from './proto.js';
import type { ReceiveLimits } from './receive_timeout.js';
import { sharedMemoryHandlers } from './shared_memory.js';
import { streamInfer } from './stream.js';
import { traceLoggingHandlers } from './trace_logging.js';
import { grpcFault, modelInfer, serveUnaryInfer, type UnaryInferOptions } from './unary_infer.js';

// Triton accepts messages up to 2 GiB; grpc-js defaults to 4 MiB.
const MAX_MESSAGE = 2 ** 31 - 1;

function loadDefinitions(): ProtoGrpcType & HealthProto {
  const def = loadProtos(['grpc_service.proto', 'health.proto']);
  return grpc.loadPackageDefinition(def) as unknown as ProtoGrpcType & HealthProto;
}

/**
 * The inference service with its two inference methods read and written by infer_wire.ts rather
 * than proto-loader's generic codec: the handlers get the message as read (or its wire error) and
 * give back encoded Buffers.
 */
function inferenceService(pkg: ProtoGrpcType): grpc.ServiceDefinition {
  const base = pkg.inference.GRPCInferenceService.service;
  const own = <Req, Res>(
    m: grpc.MethodDefinition<Req, Res>,
    requestDeserialize: (b: Buffer) => WireInferRequest,
  ): grpc.MethodDefinition<WireInferRequest, Buffer> => ({
    ...m,
    // Only a client would serialize requests; the server never does.
    requestSerialize: m.requestSerialize as unknown as grpc.serialize<WireInferRequest>,
    requestDeserialize,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  });
  // A malformed unary request is answered INTERNAL with the reader's text (Triton's status for a
  // request that does not parse); on a stream, an unreadable message ends the call (grpc-js
  // answers INTERNAL), since no id can be trusted to answer it in-band.
  const streamDeserialize = (b: Buffer): WireInferRequest => {
    const m = readInferRequest(b);
    if (m.wireError) throw m.wireError;
    return m;
  };
  return { ...base, ModelInfer: own(base.ModelInfer, readInferRequest), ModelStreamInfer: own(base.ModelStreamInfer, streamDeserialize) };
}

/**
 * The one error path: wraps a synchronous or async handler so every error maps through the one
 * status table; server faults (INTERNAL, unexpected errors) are logged with the method and the
 * inference request's id.
 */
function unaryWith(log: Logger) {
  return <Req, Res>(fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Res | Promise<Res>): grpc.handleUnaryCall<Req, Res> =>
    (call, cb) => {
      const fail = (e: unknown): void => {
        const { code, details } = grpcFault(log, call.getPath(), (call.request as { id?: unknown } | undefined)?.id, e);
        cb(Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() }));
      };
      // Called directly, not from a microtask: one promise hop less per request; a synchronous
      // throw takes the same path as a rejection.
      let out: Res | Promise<Res>;
      try {
        out = fn(call.request, call);
      } catch (e) {
        fail(e);
        return;
      }
      if (out instanceof Promise) out.then((res) => cb(null, res), fail);
      else cb(null, out);
    };
}

/** ModelRepositoryParameter map → plain values (bytes stay Buffers). */
function repositoryParams(m: Record<string, ModelRepositoryParameter__Output>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, p] of Object.entries(m)) out[k] = p.parameter_choice ? p[p.parameter_choice] : undefined;
  return out;
}

export interface GrpcServer {
  server: grpc.Server;
  port: number;
  /** Graceful stop: open streams end once their in-flight requests are answered, then tryShutdown. */
  shutdown(): Promise<void>;
}

export async function startGrpcServer(
  core: CoreApi,
  log: Logger,
  host: string,
  port: number,
  /**
   * `limits`: per-message receive limits (receive_timeout.ts); none when absent. `tls`: serve over
   * TLS (connection.ts); `keepalive`: Triton's keepalive and ping settings; `forwardPattern`: the
   * metadata forwarded as request parameters (--grpc-header-forward-pattern).
   */
  opts: {
    restrictions?: Restrictions;
    budget?: ByteBudget;
    limits?: ReceiveLimits;
    tls?: GrpcTls;
    keepalive?: GrpcKeepalive;
    forwardPattern?: HeaderPattern;
  } = {},
): Promise<GrpcServer> {
  const unary = unaryWith(log);
  const pattern = opts.forwardPattern;
  const forward = pattern ? (md: grpc.Metadata) => forwardedMetadata(pattern, md) : undefined;
  const streams = streamInfer(core, log, opts.budget, forward);
  const infer = modelInfer(core, opts.budget);
  const pkg = loadDefinitions();
  // Read before the server exists, so a missing certificate fails start-up with its flag's name.
  const credentials = serverCredentials(opts.tls);
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_MESSAGE,
    'grpc.max_send_message_length': MAX_MESSAGE,
    ...keepaliveOptions(opts.keepalive),
  });

  // Every service goes through this: --grpc-restricted-protocol guards its methods by name.
  const addService = restrictedAddService(server, opts.restrictions);
  addService(inferenceService(pkg), {
    ...({
      ServerLive: unary(() => ({ live: core.isLive() })),
      ServerReady: unary(() => ({ ready: core.isReady() })),
      ModelReady: unary((r: ModelReadyRequest__Output) => ({ ready: core.isModelReady(r.name, r.version) })),
      ServerMetadata: unary(() => core.serverMetadata()),
      ModelMetadata: unary((r: ModelMetadataRequest__Output) => core.modelMetadata(r.name, r.version)),
      // The config in Triton's JSON form: its keys and enum names are the proto's, so the message
      // encoder takes it as it is, and both protocols answer from the same object.
      ModelConfig: unary((r: ModelConfigRequest__Output) => ({ config: core.modelConfig(r.name, r.version) as ModelConfig })),
      ModelStatistics: unary((r: ModelStatisticsRequest__Output) => ({ model_stats: core.statistics(r.name, r.version) })),
      RepositoryIndex: unary(async (r: RepositoryIndexRequest__Output) => ({ models: await core.repositoryIndex(r.ready) })),
      RepositoryModelLoad: unary(async (r: RepositoryModelLoadRequest__Output) => {
        await core.loadModel(r.model_name, repositoryParams(r.parameters));
        return {};
      }),
      RepositoryModelUnload: unary(async (r: RepositoryModelUnloadRequest__Output) => {
        await core.unloadModel(r.model_name, repositoryParams(r.parameters));
        return {};
      }),
      ...sharedMemoryHandlers(core, unary),
      ...traceLoggingHandlers(core, unary),
    } satisfies Partial<GRPCInferenceServiceHandlers>),
    // The two inference methods carry infer_wire.ts' messages (see inferenceService).
    ModelStreamInfer: streams.handler,
    // Uncompressed calls are served by unary_infer.ts before grpc-js sees them; the rest come here.
    ModelInfer: unary((r: WireInferRequest, call: grpc.ServerUnaryCall<WireInferRequest, Buffer>): Promise<Buffer> => {
      const cancellation = new Cancellation();
      call.once('cancelled', () => cancellation.cancel());
      const forwarded = forward?.(call.metadata);
      return infer(r, { cancellation, ...(forwarded && { forwarded }) }, writeInferResponse);
    }),
  });
  // One unary ModelInfer, on grpc-js' sessions and on lean connections alike.
  const unaryInfer: UnaryInferOptions = {
    run: infer,
    log,
    maxMessage: MAX_MESSAGE,
    refusal: grpcRefusal(opts.restrictions, 'ModelInfer'),
    forward,
    budget: opts.budget,
    limits: opts.limits,
  };
  serveUnaryInfer(server, unaryInfer);

  addService(pkg.grpc.health.v1.Health.service, {
    Check: unary((r: HealthCheckRequest__Output) => {
      if (r.service !== '' && r.service !== 'inference.GRPCInferenceService') {
        throw ServalError.notFound(`unknown service '${r.service}'`);
      }
      return { status: core.isReady() ? 'SERVING' : 'NOT_SERVING' };
    }),
  } satisfies Partial<HealthHandlers>);

  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, credentials, (err, p) => (err ? reject(err) : resolve(p))),
  );
  // Before the two below, so the in-process connections it makes to grpc-js get them too.
  const lean = serveLeanGrpc(server, { ...unaryInfer, keepalive: opts.keepalive });
  policeServerPings(server, opts.keepalive);
  widenFlowControl(server);
  log.debug('grpc server bound', { port: bound });
  const shutdown = (): Promise<void> => {
    streams.drain();
    const closed = new Promise<void>((r) => server.tryShutdown(() => r()));
    return lean ? Promise.all([closed, lean.shutdown()]).then(() => {}) : closed;
  };
  return { server, port: bound, shutdown };
}
