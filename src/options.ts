// Server options: tritonserver's flag names, optionally from a YAML settings file that uses the
// same names (flags on the command line win).
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { parseCacheSettings } from './cache/cache_config.js';
import { headerPattern } from './frontends/header_forward.js';
import { parseRestrictions } from './frontends/restricted.js';
import { isLogFormat } from './kernel/log.js';
import { checkIgnoredValue, IGNORED_OPTIONS, resolveLongOption, TRITON_OPTIONS } from './options_triton.js';
import { rateLimiterFromOptions } from './scheduler/rate_limiter.js';
import { parseTraceConfig } from './trace/config.js';

export interface ServerOptions {
  modelRepositories: string[];
  httpPort: number;
  grpcPort: number;
  metricsPort: number;
  httpAddress: string;
  grpcAddress: string;
  metricsAddress: string;
  allowHttp: boolean;
  allowGrpc: boolean;
  allowMetrics: boolean;
  /** The live dashboard at GET /dashboard on the HTTP port. */
  allowDashboard: boolean;
  allowCpuMetrics: boolean;
  /** Accepted for tritonserver compatibility; Serval has no GPU metrics (no NVML/DCGM). */
  allowGpuMetrics: boolean;
  logVerbose: number;
  logInfo: boolean;
  logWarning: boolean;
  logError: boolean;
  /** default or ISO8601 (kernel/log.ts). */
  logFormat: string;
  logFile: string;
  /** --trace-config entries in order (the deprecated --trace-* flags become entries too); trace/config.ts reads them. */
  traceConfig: string[];
  exitOnError: boolean;
  strictReadiness: boolean;
  id: string;
  httpMaxInputSize: number;
  exitTimeoutSecs: number;
  metricsIntervalMs: number;
  modelControlMode: 'none' | 'poll' | 'explicit';
  repositoryPollSecs: number;
  loadModels: string[];
  strictModelConfig: boolean;
  disableAutoCompleteConfig: boolean;
  /** `API_1,API_2:KEY=VALUE` groups, as given (parsed by frontends/restricted.ts). */
  httpRestrictedApi: string[];
  grpcRestrictedProtocol: string[];
  /** `--backend-config=BACKEND,SETTING=VALUE` entries, as given (builtin_backends.ts reads them). */
  backendConfig: string[];
  /** `--cache-config=CACHE,SETTING=VALUE` entries, as given (cache/cache_config.ts reads them). */
  cacheConfig: string[];
  /** `--metrics-config=SETTING=VALUE` entries, as given (parseMetricsConfig reads them). */
  metricsConfig: string[];
  /** tritonserver's deprecated `--response-cache-byte-size`; undefined when not given. */
  responseCacheByteSize?: number;
  /** The in-flight byte budget (kernel/byte_budget.ts); undefined = a quarter of the memory limit, 0 = none. */
  maxInflightBytes?: number;
  /** Instances one model's load may start (repository/instance_limit.ts); undefined = the default, 0 = no limit. */
  modelInstanceLimit?: number;
  /** Instances of all loaded models together; undefined = the default, 0 = no limit. */
  serverInstanceLimit?: number;
  /** An HTTP request body with no data for this long is refused with 408 (0 = no limit). */
  httpBodyIdleTimeoutSecs: number;
  /** An HTTP request body not complete after this long is refused with 408 (0 = no limit). */
  httpBodyTimeoutSecs: number;
  /** A gRPC request message not complete this long after its first byte ends its stream (0 = no limit). */
  grpcMessageReceiveTimeoutSecs: number;
  /** A gRPC request message with no data for this long ends its stream (0 = no limit). */
  grpcMessageIdleTimeoutSecs: number;
  /** --model-config-name: a model folder's configs/NAME.pbtxt wins over config.pbtxt ('' = config.pbtxt). */
  modelConfigName: string;
  /** --model-namespacing: the same model name may live in several repositories. */
  modelNamespacing: boolean;
  /** Models loaded at once (start-up, poll and repository API loads). */
  modelLoadThreadCount: number;
  /** Further attempts after a model's load fails. */
  modelLoadRetryCount: number;
  /** Client shared-memory registration is refused unless true (Triton 2.73's default). */
  allowClientShm: boolean;
  grpcUseSsl: boolean;
  grpcUseSslMutual: boolean;
  grpcServerCert: string;
  grpcServerKey: string;
  grpcRootCert: string;
  /** gRPC keepalive and HTTP/2 ping settings, tritonserver's units (milliseconds). */
  grpcKeepaliveTime: number;
  grpcKeepaliveTimeout: number;
  grpcKeepalivePermitWithoutCalls: boolean;
  grpcHttp2MaxPingsWithoutData: number;
  grpcHttp2MinRecvPingIntervalWithoutData: number;
  grpcHttp2MaxPingStrikes: number;
  /** Milliseconds; undefined = no limit (Triton's "undefined" default). */
  grpcMaxConnectionAge?: number;
  grpcMaxConnectionAgeGrace?: number;
  /** Regular expressions for headers forwarded as request parameters ('' = none). */
  httpHeaderForwardPattern: string;
  grpcHeaderForwardPattern: string;
  /** --rate-limit: off or execution_count. */
  rateLimit: string;
  /** `--rate-limit-resource NAME:COUNT[:DEVICE]` entries, as given. */
  rateLimitResource: string[];
  /** Triton options Serval accepts but has no use for, with the values given (startServer reports them). */
  ignoredOptions: [string, string][];
}

export const DEFAULTS: ServerOptions = {
  modelRepositories: [],
  httpPort: 8000,
  grpcPort: 8001,
  metricsPort: 8002,
  httpAddress: '0.0.0.0',
  grpcAddress: '0.0.0.0',
  metricsAddress: '0.0.0.0',
  allowHttp: true,
  allowGrpc: true,
  allowMetrics: true,
  allowDashboard: true,
  allowCpuMetrics: true,
  allowGpuMetrics: true,
  logVerbose: 0,
  logInfo: true,
  logWarning: true,
  logError: true,
  logFormat: 'default',
  logFile: '',
  traceConfig: [],
  exitOnError: true,
  strictReadiness: true,
  id: 'serval',
  httpMaxInputSize: 64 * 1024 * 1024,
  exitTimeoutSecs: 30,
  metricsIntervalMs: 2000,
  modelControlMode: 'none',
  repositoryPollSecs: 15,
  loadModels: [],
  strictModelConfig: false,
  disableAutoCompleteConfig: false,
  httpRestrictedApi: [],
  grpcRestrictedProtocol: [],
  backendConfig: [],
  cacheConfig: [],
  metricsConfig: [],
  // An idle minute is a stall, not a slow network (the same as the header timeout); 15 minutes
  // carry the default 64 MiB --http-max-input-size over a 1 Mbit/s link (about 9 minutes).
  httpBodyIdleTimeoutSecs: 60,
  httpBodyTimeoutSecs: 900,
  // As for HTTP: an idle minute inside a message is a stall; 15 minutes carry a 64 MiB message
  // over a 1 Mbit/s link (about 9 minutes). A stream idle between messages is never timed.
  grpcMessageReceiveTimeoutSecs: 900,
  grpcMessageIdleTimeoutSecs: 60,
  modelConfigName: '',
  modelNamespacing: false,
  modelLoadThreadCount: 4,
  modelLoadRetryCount: 0,
  allowClientShm: false,
  grpcUseSsl: false,
  grpcUseSslMutual: false,
  grpcServerCert: '',
  grpcServerKey: '',
  grpcRootCert: '',
  grpcKeepaliveTime: 7200000,
  grpcKeepaliveTimeout: 20000,
  grpcKeepalivePermitWithoutCalls: false,
  grpcHttp2MaxPingsWithoutData: 2,
  grpcHttp2MinRecvPingIntervalWithoutData: 300000,
  grpcHttp2MaxPingStrikes: 2,
  httpHeaderForwardPattern: '',
  grpcHeaderForwardPattern: '',
  rateLimit: 'off',
  rateLimitResource: [],
  ignoredOptions: [],
};

type Kind = 'string' | 'list' | 'int' | 'bool' | 'mode';
const FLAGS: Record<string, [keyof ServerOptions, Kind]> = {
  'model-repository': ['modelRepositories', 'list'],
  'model-store': ['modelRepositories', 'list'],
  'http-port': ['httpPort', 'int'],
  'grpc-port': ['grpcPort', 'int'],
  'metrics-port': ['metricsPort', 'int'],
  'http-address': ['httpAddress', 'string'],
  'grpc-address': ['grpcAddress', 'string'],
  'metrics-address': ['metricsAddress', 'string'],
  'allow-http': ['allowHttp', 'bool'],
  'allow-grpc': ['allowGrpc', 'bool'],
  'allow-metrics': ['allowMetrics', 'bool'],
  'allow-dashboard': ['allowDashboard', 'bool'],
  'allow-cpu-metrics': ['allowCpuMetrics', 'bool'],
  'allow-gpu-metrics': ['allowGpuMetrics', 'bool'],
  'log-verbose': ['logVerbose', 'int'],
  'log-info': ['logInfo', 'bool'],
  'log-warning': ['logWarning', 'bool'],
  'log-error': ['logError', 'bool'],
  'log-format': ['logFormat', 'string'],
  'log-file': ['logFile', 'string'],
  'trace-config': ['traceConfig', 'list'],
  'exit-on-error': ['exitOnError', 'bool'],
  'strict-readiness': ['strictReadiness', 'bool'],
  id: ['id', 'string'],
  'http-max-input-size': ['httpMaxInputSize', 'int'],
  'exit-timeout-secs': ['exitTimeoutSecs', 'int'],
  'metrics-interval-ms': ['metricsIntervalMs', 'int'],
  'model-control-mode': ['modelControlMode', 'mode'],
  'repository-poll-secs': ['repositoryPollSecs', 'int'],
  'load-model': ['loadModels', 'list'],
  'strict-model-config': ['strictModelConfig', 'bool'],
  'disable-auto-complete-config': ['disableAutoCompleteConfig', 'bool'],
  'http-restricted-api': ['httpRestrictedApi', 'list'],
  'grpc-restricted-protocol': ['grpcRestrictedProtocol', 'list'],
  'backend-config': ['backendConfig', 'list'],
  'cache-config': ['cacheConfig', 'list'],
  'metrics-config': ['metricsConfig', 'list'],
  'response-cache-byte-size': ['responseCacheByteSize', 'int'],
  'max-inflight-bytes': ['maxInflightBytes', 'int'],
  'model-instance-limit': ['modelInstanceLimit', 'int'],
  'server-instance-limit': ['serverInstanceLimit', 'int'],
  'http-body-idle-timeout-secs': ['httpBodyIdleTimeoutSecs', 'int'],
  'http-body-timeout-secs': ['httpBodyTimeoutSecs', 'int'],
  'grpc-message-receive-timeout-secs': ['grpcMessageReceiveTimeoutSecs', 'int'],
  'grpc-message-idle-timeout-secs': ['grpcMessageIdleTimeoutSecs', 'int'],
  'model-config-name': ['modelConfigName', 'string'],
  'model-namespacing': ['modelNamespacing', 'bool'],
  'model-load-thread-count': ['modelLoadThreadCount', 'int'],
  'model-load-retry-count': ['modelLoadRetryCount', 'int'],
  'allow-client-shm': ['allowClientShm', 'bool'],
  'grpc-use-ssl': ['grpcUseSsl', 'bool'],
  'grpc-use-ssl-mutual': ['grpcUseSslMutual', 'bool'],
  'grpc-server-cert': ['grpcServerCert', 'string'],
  'grpc-server-key': ['grpcServerKey', 'string'],
  'grpc-root-cert': ['grpcRootCert', 'string'],
  'grpc-keepalive-time': ['grpcKeepaliveTime', 'int'],
  'grpc-keepalive-timeout': ['grpcKeepaliveTimeout', 'int'],
  'grpc-keepalive-permit-without-calls': ['grpcKeepalivePermitWithoutCalls', 'bool'],
  'grpc-http2-max-pings-without-data': ['grpcHttp2MaxPingsWithoutData', 'int'],
  'grpc-http2-min-recv-ping-interval-without-data': ['grpcHttp2MinRecvPingIntervalWithoutData', 'int'],
  'grpc-http2-max-ping-strikes': ['grpcHttp2MaxPingStrikes', 'int'],
  'grpc-max-connection-age': ['grpcMaxConnectionAge', 'int'],
  'grpc-max-connection-age-grace': ['grpcMaxConnectionAgeGrace', 'int'],
  'http-header-forward-pattern': ['httpHeaderForwardPattern', 'string'],
  'grpc-header-forward-pattern': ['grpcHeaderForwardPattern', 'string'],
  'rate-limit': ['rateLimit', 'string'],
  'rate-limit-resource': ['rateLimitResource', 'list'],
};

export class UsageError extends Error {}

/** A value tritonserver's option parser refuses: it prints the usage, then `Bad option: "--x".` and the reason. */
export class BadOptionError extends UsageError {
  constructor(
    readonly flag: string,
    readonly reason: string,
  ) {
    super(`Bad option: "--${flag}". ${reason}`);
  }
}

function convert(flag: string, kind: Kind, raw: unknown): unknown {
  const s = String(raw);
  switch (kind) {
    case 'int': {
      const n = /^\d+$/.test(s.trim()) ? Number(s) : NaN;
      if (/^\d+$/.test(s.trim()) && !Number.isSafeInteger(n))
        throw new BadOptionError(flag, `Provided option value is out of bound. Got ${s}`);
      // Triton's texts; Serval also refuses what std::stoi would cut short or wrap (`8000x`, `1.5`, `-1`).
      if (!Number.isSafeInteger(n)) throw new BadOptionError(flag, `Invalid option value. Got ${s}`);
      return n;
    }
    case 'bool': {
      const v = s.toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off'].includes(v)) return false;
      throw new BadOptionError(flag, `invalid value for bool option: ${s}`);
    }
    case 'mode':
      if (s === 'none' || s === 'poll' || s === 'explicit') return s;
      throw new UsageError(`--${flag} expects none, poll or explicit, got '${s}'`);
    default:
      return s;
  }
}

/** tritonserver's deprecated trace flags, as the --trace-config entries they stand for. */
const LEGACY_TRACE: Record<string, string> = {
  'trace-file': 'triton,file=',
  'trace-level': 'level=',
  'trace-rate': 'rate=',
  'trace-count': 'count=',
  'trace-log-frequency': 'triton,log-frequency=',
};

/** Every long option: tritonserver's in its order (getopt's ambiguity text lists them so), then Serval's own. */
const LONG_OPTIONS = [...new Set([...TRITON_OPTIONS.map(([n]) => n), ...Object.keys(FLAGS), ...Object.keys(LEGACY_TRACE), 'config-file'])];
const TRITON_ARG = new Map(TRITON_OPTIONS);

/** The full option name an argument's name abbreviates, as tritonserver's getopt_long resolves it. */
function longOption(arg: string, key: string): string {
  try {
    // Two names of one setting (--model-store, --model-repository) are not ambiguous.
    return resolveLongOption(arg, key, LONG_OPTIONS, (n) => FLAGS[n]?.[0] ?? n);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

function apply(opts: ServerOptions, flag: string, raw: unknown): void {
  if (flag in IGNORED_OPTIONS) {
    for (const v of Array.isArray(raw) ? raw : [raw]) {
      try {
        checkIgnoredValue(flag, TRITON_ARG.get(flag) ?? 'string', String(v));
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
      opts.ignoredOptions.push([flag, String(v)]);
    }
    return;
  }
  const legacy = LEGACY_TRACE[flag];
  if (legacy !== undefined) {
    for (const v of Array.isArray(raw) ? raw : [raw]) opts.traceConfig.push(`${legacy}${String(v)}`);
    return;
  }
  const spec = FLAGS[flag];
  if (!spec) throw new UsageError(`unrecognized option '--${flag}'`);
  const [key, kind] = spec;
  const values = kind === 'list' && Array.isArray(raw) ? raw : [raw];
  for (const v of values) {
    if (kind === 'list') (opts[key] as string[]).push(String(v));
    else (opts as unknown as Record<string, unknown>)[key] = convert(flag, kind, v);
  }
}

export function parseArgs(argv: string[]): ServerOptions & { help: boolean } {
  const cli: [string, string][] = [];
  let settingsFile: string | undefined;
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h') {
      help = true;
      continue;
    }
    // getopt's end of options: anything after it is an argument, which Serval takes none of.
    if (a === '--') {
      if (i + 1 < argv.length) throw new UsageError(`unexpected argument '${argv[i + 1]}'`);
      break;
    }
    if (!a.startsWith('--')) throw new UsageError(`unexpected argument '${a}'`);
    const [key, given] = a.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    const flag = longOption(a, key);
    let value = given;
    if (flag === 'help') {
      help = true;
      continue;
    }
    if (value === undefined) {
      const kind = FLAGS[flag]?.[1] ?? TRITON_ARG.get(flag);
      const next = argv[i + 1];
      // A bare boolean flag means true (`--strict-readiness`); otherwise the value follows.
      if ((kind === 'bool' || kind === 'none') && (next === undefined || next.startsWith('--'))) value = 'true';
      else {
        if (next === undefined) throw new UsageError(`option '--${flag}' requires an argument`);
        value = next;
        i++;
      }
    }
    if (flag === 'config-file') settingsFile = value;
    else cli.push([flag, value]);
  }
  const opts: ServerOptions = {
    ...DEFAULTS,
    modelRepositories: [],
    loadModels: [],
    httpRestrictedApi: [],
    grpcRestrictedProtocol: [],
    traceConfig: [],
    backendConfig: [],
    cacheConfig: [],
    metricsConfig: [],
    rateLimitResource: [],
    ignoredOptions: [],
  };
  if (settingsFile) {
    let doc: unknown;
    try {
      doc = parseYaml(readFileSync(settingsFile, 'utf8'));
    } catch (e) {
      throw new UsageError(`cannot read settings file '${settingsFile}': ${(e as Error).message}`);
    }
    if (doc !== null && (typeof doc !== 'object' || Array.isArray(doc))) {
      throw new UsageError(`settings file '${settingsFile}' must be a mapping of option names to values`);
    }
    for (const [k, v] of Object.entries((doc ?? {}) as Record<string, unknown>)) apply(opts, longOption(`--${k}`, k), v);
  }
  // Repositories named on the command line replace those of the settings file.
  if (cli.some(([f]) => f === 'model-repository' || f === 'model-store')) opts.modelRepositories = [];
  if (cli.some(([f]) => f === 'load-model')) opts.loadModels = [];
  if (cli.some(([f]) => f === 'http-restricted-api')) opts.httpRestrictedApi = [];
  if (cli.some(([f]) => f === 'grpc-restricted-protocol')) opts.grpcRestrictedProtocol = [];
  if (cli.some(([f]) => f === 'backend-config')) opts.backendConfig = [];
  if (cli.some(([f]) => f === 'cache-config')) opts.cacheConfig = [];
  if (cli.some(([f]) => f === 'metrics-config')) opts.metricsConfig = [];
  if (cli.some(([f]) => f === 'rate-limit-resource')) opts.rateLimitResource = [];
  if (cli.some(([f]) => f === 'trace-config' || f in LEGACY_TRACE)) opts.traceConfig = [];
  for (const [f, v] of cli) apply(opts, f, v);
  // Checked here so a bad group fails at start-up with tritonserver's message.
  try {
    parseRestrictions(opts.httpRestrictedApi, 'http-restricted-api');
    parseRestrictions(opts.grpcRestrictedProtocol, 'grpc-restricted-protocol');
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  // The name becomes a file name inside every model folder: it must not leave configs/.
  if (/[\s/\\]|^\.\.?$/.test(opts.modelConfigName)) {
    throw new UsageError(`--model-config-name: '${opts.modelConfigName}' must be a file name without spaces or path separators`);
  }
  if (!isLogFormat(opts.logFormat))
    throw new UsageError(`invalid argument for --log-format: '${opts.logFormat}' (default, ISO8601 or logfmt)`);
  try {
    parseTraceConfig(opts.traceConfig);
    parseCacheSettings(opts.cacheConfig, opts.responseCacheByteSize);
    parseMetricsConfig(opts.metricsConfig);
    headerPattern(opts.httpHeaderForwardPattern, 'http-header-forward-pattern');
    headerPattern(opts.grpcHeaderForwardPattern, 'grpc-header-forward-pattern');
    rateLimiterFromOptions(opts.rateLimit, opts.rateLimitResource);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  return { ...opts, help };
}

/** What --metrics-config sets; Triton's defaults for what it leaves out. */
export interface MetricsConfig {
  /** histogram_latencies: Triton's latency histograms (nv_inference_first_response_histogram_ms). */
  histogramLatencies: boolean;
  /** counter_latencies: the cumulative nv_inference_*_duration_us counters (default true). */
  counterLatencies: boolean;
  /** summary_latencies: the nv_inference_*_summary_us summaries (default false). */
  summaryLatencies: boolean;
  /** summary_quantiles: [quantile, allowed error] pairs (Triton's default below). */
  summaryQuantiles: [number, number][];
}

/** Triton's default summary quantiles (MetricReporterConfig in core's metric_model_reporter.h). */
export const DEFAULT_SUMMARY_QUANTILES: [number, number][] = [
  [0.5, 0.05],
  [0.9, 0.01],
  [0.95, 0.001],
  [0.99, 0.001],
  [0.999, 0.000001],
];

const METRICS_SETTINGS = ['counter_latencies', 'summary_latencies', 'summary_quantiles', 'histogram_latencies'];

/** `0.5:0.05,0.9:0.01,...`: each quantile in [0, 1] with its allowed error in [0, 1]. */
function parseQuantiles(value: string): [number, number][] {
  return value.split(',').map((pair) => {
    const m = /^\s*([0-9.eE+-]+)\s*:\s*([0-9.eE+-]+)\s*$/.exec(pair);
    const q = m ? Number(m[1]) : NaN;
    const e = m ? Number(m[2]) : NaN;
    if (!(q >= 0 && q <= 1 && e >= 0 && e <= 1)) {
      throw new Error(`--metrics-config summary_quantiles: '${pair}' is not <quantile>:<error> with both between 0 and 1`);
    }
    return [q, e];
  });
}

/**
 * tritonserver's `--metrics-config SETTING=VALUE` entries: counter_latencies, summary_latencies,
 * summary_quantiles and histogram_latencies. Where Triton silently ignores a setting it does not
 * know or a value it cannot read, Serval refuses it at start-up, naming it.
 */
export function parseMetricsConfig(entries: readonly string[]): MetricsConfig {
  const config: MetricsConfig = {
    histogramLatencies: false,
    counterLatencies: true,
    summaryLatencies: false,
    summaryQuantiles: DEFAULT_SUMMARY_QUANTILES,
  };
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    const key = eq < 0 ? entry : entry.slice(0, eq);
    const value = eq < 0 ? '' : entry.slice(eq + 1);
    // A setting's value, not an option's: Serval's own text rather than tritonserver's `Bad option`.
    const bool = (): boolean => {
      const v = value.toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off'].includes(v)) return false;
      throw new UsageError(`--metrics-config ${key} expects true or false, got '${value}'`);
    };
    switch (key) {
      case 'histogram_latencies':
        config.histogramLatencies = bool();
        break;
      case 'counter_latencies':
        config.counterLatencies = bool();
        break;
      case 'summary_latencies':
        config.summaryLatencies = bool();
        break;
      case 'summary_quantiles':
        config.summaryQuantiles = parseQuantiles(value);
        break;
      default:
        throw new Error(`--metrics-config: '${key}' is not a metrics setting (${METRICS_SETTINGS.join(', ')})`);
    }
  }
  return config;
}

export const USAGE = `Usage: serval --model-repository PATH [options]

  --model-repository PATH    model repository folder (repeatable)
  --config-file FILE         YAML settings file using these option names as keys
  --http-port N              HTTP/REST port (default 8000; 0 picks a free port)
  --grpc-port N              gRPC port (default 8001)
  --metrics-port N           Prometheus metrics port (default 8002)
  --http-address ADDR        (default 0.0.0.0)   --grpc-address ADDR   --metrics-address ADDR
  --allow-http BOOL          serve HTTP (default true)
  --allow-grpc BOOL          serve gRPC (default true)
  --allow-metrics BOOL       serve metrics (default true)
  --allow-dashboard BOOL     serve the live dashboard at /dashboard on the HTTP port (default true)
  --allow-cpu-metrics BOOL   serve nv_cpu_utilization / nv_cpu_memory_* (default true)
  --allow-gpu-metrics BOOL   accepted; Serval reports no GPU metrics
  --metrics-interval-ms N    how often the per-interval (CPU) metrics are sampled (default 2000)
  --http-max-input-size N    largest accepted HTTP request body in bytes (default 67108864)
  --http-body-idle-timeout-secs N   an HTTP request body that sends nothing for N s is refused
                             with 408 and its connection closed (default 60; 0 = no limit)
  --http-body-timeout-secs N an HTTP request body not complete after N s is refused the same
                             way (default 900; 0 = no limit)
  --grpc-message-receive-timeout-secs N   a gRPC request message not complete N s after its
                             first byte ends its stream with DEADLINE_EXCEEDED (default 900;
                             0 = no limit)
  --grpc-message-idle-timeout-secs N   the same for a message that sends nothing for N s
                             (default 60; 0 = no limit; a stream idle between messages stays open)
  --max-inflight-bytes N     request payload bytes admitted at once over HTTP and gRPC; more is
                             refused with 503 / UNAVAILABLE "Server busy" (default a quarter of
                             the machine's or cgroup's memory; 0 = no budget)
  --model-instance-limit N   a model whose load would start more than N instances (all its
                             versions together) is refused with 400 before any starts (default
                             4 per core, at least 16; 0 = no limit)
  --server-instance-limit N  a load that would bring the loaded models' instances above N is
                             refused the same way (default 1024; 0 = no limit)
  --log-verbose N            verbose (debug) lines from 1 (default 0)
  --log-info BOOL            info lines (default true)   --log-warning BOOL   --log-error BOOL
  --log-format FORMAT        default (tritonserver's "I1125 07:31:46.123456 PID file:line] msg"),
                             ISO8601 ("2025-11-25T07:31:46Z I PID file:line] msg") or logfmt
                             (Serval's "time=... level=info msg=... key=value" lines)
  --log-file FILE            append log lines to FILE instead of stderr
  --trace-config SETTING=VALUE       trace every rate-th request: level=OFF|TIMESTAMPS|TENSORS,
                             rate=N (default 1000), count=N (traces to collect, -1 = no limit),
                             mode=triton (repeatable; see docs/protocol.md)
  --trace-config triton,SETTING=VALUE   file=PATH (JSON trace file), log-frequency=N (write
                             every N traces to PATH.0, PATH.1, ...; 0 = at shutdown)
  --trace-file, --trace-level, --trace-rate, --trace-count, --trace-log-frequency
                             tritonserver's deprecated spellings of the above
  --exit-on-error BOOL       exit if any model fails to load (default true); false keeps the
                             server answering even when a repository cannot be read (then
                             neither live nor ready, as tritonserver)
  --strict-readiness BOOL    ready only when every model is ready (default true)
  --exit-timeout-secs N      on shutdown, wait this long for in-flight requests (default 30)
  --id NAME                  server name reported by server metadata (default serval)
  --model-control-mode MODE  none (load all at start), poll (follow repository changes),
                             explicit (load/unload through the repository API)
  --repository-poll-secs N   poll period in poll mode (default 15)
  --load-model NAME          explicit mode: load this model at start-up (repeatable, * = all)
  --model-config-name NAME   a model folder's configs/NAME.pbtxt instead of its config.pbtxt
                             (config.pbtxt where it has none)
  --model-namespacing BOOL   the same model name may be in several repositories (a request
                             naming it is then ambiguous; ensembles use their own repository's)
  --model-load-thread-count N   models loading at once (default 4)
  --model-load-retry-count N    tries again a version that fails to load, N times (default 0)
  --disable-auto-complete-config   use config.pbtxt as written (no filling from model.onnx)
  --backend-config python,interpreter=PATH
                             the Python that runs Python models (default: the project's .venv,
                             else python3; a model's EXECUTION_ENV_PATH parameter wins)
  --backend-config python,stub-malloc=keep|system
                             keep (default): a stub keeps memory its model frees for the next
                             execution, giving it back after a second idle; system: glibc's
                             own thresholds (see docs/python_backend.md)
  --backend-config onnxruntime,shared-workers=N
                             worker threads small CPU ONNX models share (default: one per
                             core; 0: every instance a worker of its own)
  --backend-config onnxruntime,shared-model-max-bytes=BYTES
                             a model shares when its version directory holds at most this
                             (default 262144)
  --strict-model-config BOOL same as --disable-auto-complete-config (tritonserver's older name)
  --cache-config local,size=BYTES
                             the response cache, for models whose config has
                             response_cache { enable: true } (see docs/response_cache.md)
  --response-cache-byte-size BYTES   tritonserver's deprecated spelling of the above
  --metrics-config histogram_latencies=true
                             also export latency histograms (nv_inference_first_response_histogram_ms)
  --metrics-config summary_latencies=true   also export latency summaries (nv_inference_*_summary_us;
                             summary_quantiles=0.5:0.05,0.9:0.01,... sets their quantiles)
  --metrics-config counter_latencies=false  leave out the nv_inference_*_duration_us counters
  --http-restricted-api API[,API...]:KEY=VALUE
                             HTTP requests to these API groups need header KEY: VALUE (repeatable,
                             one group per API); groups: health, metadata, inference,
                             shared-memory, model-config, model-repository, statistics, trace,
                             logging
  --grpc-restricted-protocol API[,API...]:KEY=VALUE
                             the same for gRPC, with metadata triton-grpc-protocol-KEY: VALUE

Every other tritonserver 2.73 option is accepted, and an unambiguous prefix of any option names
it (--log-warn = --log-warning); options with no meaning for Serval (--backend-directory, GPU
memory pools, thread counts) are reported at start-up as ignored. See docs/command_line.md.
`;
