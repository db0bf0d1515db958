// Assembles a server from options: repository, core, and the enabled front-ends; and stops it.
import { readFileSync } from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { builtinBackends } from './builtin_backends.js';
import { type CacheSettings, parseCacheSettings } from './cache/cache_config.js';
import { ResponseCache } from './cache/response_cache.js';
import { InferenceCore } from './core/server_core.js';
import { type GrpcServer, startGrpcServer } from './frontends/grpc/server.js';
import { buildHttpServer } from './frontends/http/server.js';
import { startMetricsServer } from './frontends/metrics/metrics.js';
import { parseRestrictions } from './frontends/restricted.js';
import { ByteBudget, defaultInflightBytes } from './kernel/byte_budget.js';
import type { LogControl, Logger } from './kernel/log.js';
import { projectRoot } from './kernel/paths.js';
import type { IndexRow } from './kernel/types.js';
import { parseMetricsConfig, type ServerOptions } from './options.js';
import { defaultInstanceLimits } from './repository/instance_limit.js';
import { ModelRepository } from './repository/repository.js';
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

export class StartupError extends Error {}

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
  if (opts.modelRepositories.length === 0) throw new StartupError('--model-repository must be specified');
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
  const repository = new ModelRepository(opts.modelRepositories, log, {
    mode: opts.modelControlMode,
    startupModels: opts.loadModels,
    autoComplete: !(opts.strictModelConfig || opts.disableAutoCompleteConfig),
    backends,
    ...(cache && { responseCache: new ResponseCache(cache.size) }),
    instanceLimits: {
      model: opts.modelInstanceLimit ?? defaultInstanceLimits().model,
      server: opts.serverInstanceLimit ?? defaultInstanceLimits().server,
    },
  });
  await repository.loadAll();
  const tracer = new TraceManager({ ...parseTraceConfig(opts.traceConfig), log });
  const core = new InferenceCore(repository, {
    id: opts.id,
    version: serverVersion(),
    strictReadiness: opts.strictReadiness,
    extensions: EXTENSIONS,
    tracer,
    logging,
  });
  const rows = repository.index();
  print(statusTable(rows));
  if (opts.exitOnError && rows.some((r) => r.state !== 'READY')) {
    await repository.unloadAll();
    throw new StartupError('failed to load all models');
  }

  repository.startPolling(opts.repositoryPollSecs);
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
        histogramLatencies: parseMetricsConfig(opts.metricsConfig ?? []).histogramLatencies,
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
      await core.unregisterSystemSharedMemory('');
      // Traces still held in memory are written, and the trace file's JSON array is closed.
      await tracer.close();
    })();
    return stopping;
  }
  return running;
}
