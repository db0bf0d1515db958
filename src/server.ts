// Assembles a server from options: repository, core, and the enabled front-ends; and stops it.
import { readFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import type http from 'node:http';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { builtinBackends } from './builtin_backends.js';
import { type CacheSettings, parseCacheSettings } from './cache/cache_config.js';
import { ResponseCache } from './cache/response_cache.js';
import { InferenceCore } from './core/server_core.js';
import type { GrpcKeepalive, GrpcTls } from './frontends/grpc/connection.js';
import { type GrpcServer, startGrpcServer } from './frontends/grpc/server.js';
import { headerPattern } from './frontends/header_forward.js';
import { buildHttpServer } from './frontends/http/server.js';
import { startMetricsServer } from './frontends/metrics/metrics.js';
import { parseRestrictions } from './frontends/restricted.js';
import { ByteBudget, defaultInflightBytes } from './kernel/byte_budget.js';
import { type ErrorCode, ServalError } from './kernel/errors.js';
import type { LogControl, Logger } from './kernel/log.js';
import { projectRoot } from './kernel/paths.js';
import type { IndexRow } from './kernel/types.js';
import { parseMetricsConfig, type ServerOptions } from './options.js';
import { reportIgnoredOptions } from './options_triton.js';
import { defaultInstanceLimits } from './repository/instance_limit.js';
import { NamespacedRepository } from './repository/namespaces.js';
import { ModelRepository } from './repository/repository.js';
import { rateLimiterFromOptions } from './scheduler/rate_limiter.js';
import { ServerLoad } from './scheduler/server_load.js';
import { parseTraceConfig } from './trace/config.js';
import { TraceManager } from './trace/trace_manager.js';

export const EXTENSIONS = [
  'classification',
  'sequence',
  'model_repository',
  'model_repository(unload_dependents)',
  'schedule_policy',
  'model_configuration',
  'binary_tensor_data',
  'parameters',
  'statistics',
  'system_shared_memory',
  'trace',
  'logging',
];

export function serverVersion(): string {
  const pkg = JSON.parse(readFileSync(path.join(projectRoot(), 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

export interface RunningServer {
  core: InferenceCore;
  httpPort?: number;
  grpcPort?: number;
  metricsPort?: number;
  stop(): Promise<void>;
}

export class StartupError extends Error {
  constructor(
    message: string,
    /** Triton's status for it, which `creating server: ` prints before the text. */
    readonly code: ErrorCode = 'INTERNAL',
  ) {
    super(message);
  }
}

/** The model status table tritonserver prints at start-up. */
export function statusTable(rows: IndexRow[]): string {
  const body = rows.map((r) => [r.name, r.version || '-', r.state === 'READY' ? 'READY' : `${r.state || 'UNAVAILABLE'}: ${r.reason}`]);
  const head = ['Model', 'Version', 'Status'];
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const line = `+${widths.map((w) => '-'.repeat(w + 2)).join('+')}+`;
  const fmt = (r: string[]): string => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line, fmt(head), line, ...body.map(fmt), line].join('\n');
}

/** `logging` is the control behind `log`: the logging extension changes it (a private one when absent). */
export async function startServer(
  opts: ServerOptions,
  log: Logger,
  print: (line: string) => void,
  logging?: LogControl,
): Promise<RunningServer> {
  if (opts.modelRepositories.length === 0) throw new StartupError('--model-repository must be specified', 'INVALID_ARG');
  reportIgnoredOptions(opts.ignoredOptions ?? [], log);
  let backends: ReturnType<typeof builtinBackends>;
  try {
    backends = builtinBackends({ log, backendConfig: opts.backendConfig });
  } catch (e) {
    throw new StartupError((e as Error).message);
  }
  let cache: CacheSettings | undefined;
  try {
    cache = parseCacheSettings(opts.cacheConfig ?? [], opts.responseCacheByteSize);
  } catch (e) {
    throw new StartupError((e as Error).message);
  }
  // --model-namespacing: each repository folder a namespace of its own (repository/namespaces.ts).
  const Repository = opts.modelNamespacing && opts.modelRepositories.length > 1 ? NamespacedRepository : ModelRepository;
  const repository = new Repository(opts.modelRepositories, log, {
    mode: opts.modelControlMode,
    startupModels: opts.loadModels,
    autoComplete: !(opts.strictModelConfig || opts.disableAutoCompleteConfig),
    backends,
    ...(cache && { responseCache: new ResponseCache(cache.size) }),
    rateLimiter: rateLimiterFromOptions(opts.rateLimit ?? 'off', opts.rateLimitResource ?? []),
    load: new ServerLoad(),
    instanceLimits: {
      model: opts.modelInstanceLimit ?? defaultInstanceLimits().model,
      server: opts.serverInstanceLimit ?? defaultInstanceLimits().server,
    },
    configName: opts.modelConfigName ?? '',
    loadThreads: opts.modelLoadThreadCount ?? 4,
    loadRetries: opts.modelLoadRetryCount ?? 0,
  });
  // With --exit-on-error=false a repository that cannot be read does not stop the server: as
  // tritonserver, it keeps answering (not live, not ready) so the failure can be seen.
  let initFailure: string | undefined;
  try {
    // tritonserver's first check of a repository, and its text.
    for (const root of opts.modelRepositories) {
      await stat(root).catch(() => {
        throw ServalError.internal(`failed to stat file ${root}`);
      });
    }
    await repository.loadAll();
  } catch (e) {
    if (opts.exitOnError) throw e;
    initFailure = (e as Error).message;
    log.error(`failed to initialize: ${initFailure}`);
  }
  const tracer = new TraceManager({ ...parseTraceConfig(opts.traceConfig), log });
  const core = new InferenceCore(repository, {
    id: opts.id,
    version: serverVersion(),
    strictReadiness: opts.strictReadiness,
    extensions: EXTENSIONS,
    tracer,
    logging,
    allowClientShm: opts.allowClientShm,
  });
  if (initFailure !== undefined) core.initializationFailed(initFailure);
  const rows = repository.index();
  print(statusTable(rows));
  if (opts.exitOnError && rows.some((r) => r.state !== 'READY')) {
    await repository.unloadAll();
    throw new StartupError('failed to load all models');
  }

  if (initFailure === undefined) repository.startPolling(opts.repositoryPollSecs);
  let http: FastifyInstance | undefined;
  let grpcServer: GrpcServer | undefined;
  let metrics: http.Server | undefined;
  let stopping: Promise<void> | undefined;
  const running: RunningServer = { core, stop };
  // One budget for both protocols: memory is shared, whichever way the bytes come in.
  const budget = new ByteBudget(opts.maxInflightBytes ?? defaultInflightBytes());
  // Which front-end failed, and on which address, is what an operator needs (a busy port).
  let starting = '';
  try {
    if (opts.allowGrpc) {
      starting = `the gRPC service on ${opts.grpcAddress}:${opts.grpcPort}`;
      const g = await startGrpcServer(core, log, opts.grpcAddress, opts.grpcPort, {
        restrictions: parseRestrictions(opts.grpcRestrictedProtocol, 'grpc-restricted-protocol'),
        budget,
        limits: { messageMs: opts.grpcMessageReceiveTimeoutSecs * 1000, idleMs: opts.grpcMessageIdleTimeoutSecs * 1000 },
        ...grpcConnection(opts),
        forwardPattern: headerPattern(opts.grpcHeaderForwardPattern ?? '', 'grpc-header-forward-pattern'),
      });
      grpcServer = g;
      running.grpcPort = g.port;
      print(`Started GRPCInferenceService at ${opts.grpcAddress}:${g.port}`);
    }
    if (opts.allowHttp) {
      starting = `the HTTP service on ${opts.httpAddress}:${opts.httpPort}`;
      http = buildHttpServer(core, log, {
        maxInputSize: opts.httpMaxInputSize,
        restrictions: parseRestrictions(opts.httpRestrictedApi, 'http-restricted-api'),
        dashboard: opts.allowDashboard,
        budget,
        bodyTimeouts: { idleMs: opts.httpBodyIdleTimeoutSecs * 1000, totalMs: opts.httpBodyTimeoutSecs * 1000 },
        forwardPattern: headerPattern(opts.httpHeaderForwardPattern ?? '', 'http-header-forward-pattern'),
      });
      await http.listen({ port: opts.httpPort, host: opts.httpAddress });
      const addr = http.server.address();
      running.httpPort = typeof addr === 'object' && addr ? addr.port : opts.httpPort;
      print(`Started HTTPService at ${opts.httpAddress}:${running.httpPort}`);
    }
    if (opts.allowMetrics) {
      starting = `the metrics service on ${opts.metricsAddress}:${opts.metricsPort}`;
      const m = await startMetricsServer(core, opts.metricsAddress, opts.metricsPort, {
        intervalMs: opts.metricsIntervalMs,
        cpuMetrics: opts.allowCpuMetrics,
        ...parseMetricsConfig(opts.metricsConfig ?? []),
      });
      metrics = m.server;
      running.metricsPort = m.port;
      print(`Started Metrics Service at ${opts.metricsAddress}:${m.port}`);
    }
  } catch (e) {
    await stop();
    throw new StartupError(`failed to start ${starting}: ${(e as Error).message}`);
  }

  function stop(): Promise<void> {
    stopping ??= (async () => {
      core.stopAccepting();
      const closers: Promise<unknown>[] = [];
      if (http) closers.push(http.close());
      // Open ModelStreamInfer streams end once their in-flight requests are answered.
      if (grpcServer) closers.push(grpcServer.shutdown());
      if (metrics) {
        const m = metrics;
        closers.push(new Promise<void>((r) => m.close(() => r())));
        m.closeAllConnections();
      }
      await Promise.allSettled(closers);
      await repository.unloadAll();
      // Every system shared memory region's fd is closed: clients' objects outlive the server.
      // (Without --allow-client-shm no client could register one.)
      if (opts.allowClientShm) await core.unregisterSystemSharedMemory('');
      // Traces still held in memory are written, and the trace file's JSON array is closed.
      await tracer.close();
    })();
    return stopping;
  }
  return running;
}

/** tritonserver's gRPC TLS and keepalive flags as the gRPC front-end takes them (its defaults where absent). */
function grpcConnection(opts: ServerOptions): { tls?: GrpcTls; keepalive: GrpcKeepalive } {
  // --grpc-use-ssl-mutual implies --grpc-use-ssl, as in tritonserver.
  const mutual = opts.grpcUseSslMutual ?? false;
  const tls =
    opts.grpcUseSsl || mutual
      ? { serverCert: opts.grpcServerCert ?? '', serverKey: opts.grpcServerKey ?? '', rootCert: opts.grpcRootCert ?? '', mutual }
      : undefined;
  const keepalive: GrpcKeepalive = {
    timeMs: opts.grpcKeepaliveTime ?? 7200000,
    timeoutMs: opts.grpcKeepaliveTimeout ?? 20000,
    permitWithoutCalls: opts.grpcKeepalivePermitWithoutCalls ?? false,
    minRecvPingIntervalMs: opts.grpcHttp2MinRecvPingIntervalWithoutData ?? 300000,
    maxPingStrikes: opts.grpcHttp2MaxPingStrikes ?? 2,
    ...(opts.grpcMaxConnectionAge !== undefined && { maxConnectionAgeMs: opts.grpcMaxConnectionAge }),
    ...(opts.grpcMaxConnectionAgeGrace !== undefined && { maxConnectionAgeGraceMs: opts.grpcMaxConnectionAgeGrace }),
  };
  return { ...(tls && { tls }), keepalive };
}
