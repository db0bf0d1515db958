// Server options: tritonserver's flag names, optionally from a YAML settings file that uses the
// same names (flags on the command line win).
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

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
  allowCpuMetrics: boolean;
  /** Accepted for tritonserver compatibility; Serval has no GPU metrics (no NVML/DCGM). */
  allowGpuMetrics: boolean;
  logVerbose: number;
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
  allowCpuMetrics: true,
  allowGpuMetrics: true,
  logVerbose: 0,
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
  'allow-cpu-metrics': ['allowCpuMetrics', 'bool'],
  'allow-gpu-metrics': ['allowGpuMetrics', 'bool'],
  'log-verbose': ['logVerbose', 'int'],
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
};

export class UsageError extends Error {}

function convert(flag: string, kind: Kind, raw: unknown): unknown {
  const s = String(raw);
  switch (kind) {
    case 'int': {
      const n = /^\d+$/.test(s.trim()) ? Number(s) : NaN;
      if (!Number.isSafeInteger(n)) throw new UsageError(`--${flag} expects a non-negative integer, got '${s}'`);
      return n;
    }
    case 'bool': {
      const v = s.toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off'].includes(v)) return false;
      throw new UsageError(`--${flag} expects true or false, got '${s}'`);
    }
    case 'mode':
      if (s === 'none' || s === 'poll' || s === 'explicit') return s;
      throw new UsageError(`--${flag} expects none, poll or explicit, got '${s}'`);
    default:
      return s;
  }
}

function apply(opts: ServerOptions, flag: string, raw: unknown): void {
  const spec = FLAGS[flag];
  if (!spec) throw new UsageError(`unknown option --${flag} (see --help)`);
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
    if (a === '--help' || a === '-h') {
      help = true;
      continue;
    }
    if (!a.startsWith('--')) throw new UsageError(`unexpected argument '${a}'`);
    let [flag, value] = a.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (value === undefined) {
      const kind = FLAGS[flag]?.[1];
      const next = argv[i + 1];
      // A bare boolean flag means true (`--strict-readiness`); otherwise the value follows.
      if (kind === 'bool' && (next === undefined || next.startsWith('--'))) value = 'true';
      else {
        if (next === undefined) throw new UsageError(`--${flag} needs a value`);
        value = next;
        i++;
      }
    }
    if (flag === 'config-file') settingsFile = value;
    else cli.push([flag, value]);
  }
  const opts: ServerOptions = { ...DEFAULTS, modelRepositories: [], loadModels: [] };
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
    for (const [k, v] of Object.entries((doc ?? {}) as Record<string, unknown>)) apply(opts, k, v);
  }
  // Repositories named on the command line replace those of the settings file.
  if (cli.some(([f]) => f === 'model-repository' || f === 'model-store')) opts.modelRepositories = [];
  if (cli.some(([f]) => f === 'load-model')) opts.loadModels = [];
  for (const [f, v] of cli) apply(opts, f, v);
  return { ...opts, help };
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
  --allow-cpu-metrics BOOL   serve nv_cpu_utilization / nv_cpu_memory_* (default true)
  --allow-gpu-metrics BOOL   accepted; Serval reports no GPU metrics
  --metrics-interval-ms N    how often the per-interval (CPU) metrics are sampled (default 2000)
  --http-max-input-size N    largest accepted HTTP request body in bytes (default 67108864)
  --log-verbose N            0 quiet (errors, warnings), 1 info, 2 debug
  --exit-on-error BOOL       exit if any model fails to load (default true)
  --strict-readiness BOOL    ready only when every model is ready (default true)
  --exit-timeout-secs N      on shutdown, wait this long for in-flight requests (default 30)
  --id NAME                  server name reported by server metadata (default serval)
  --model-control-mode MODE  none (load all at start), poll (follow repository changes),
                             explicit (load/unload through the repository API)
  --repository-poll-secs N   poll period in poll mode (default 15)
  --load-model NAME          explicit mode: load this model at start-up (repeatable, * = all)
  --disable-auto-complete-config   use config.pbtxt as written (no filling from model.onnx)
  --strict-model-config BOOL same as --disable-auto-complete-config (tritonserver's older name)
`;
