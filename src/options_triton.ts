// tritonserver 2.73's command line (src/command_line_parser.cc), so that any tritonserver command
// line starts Serval: its long options, getopt_long's prefix abbreviations, and the options that
// mean nothing here (GPU memory, thread pools, shared-library folders), accepted and reported.
import type { Logger } from './kernel/log.js';

/** What an option's value must look like, as tritonserver's parser checks it. */
export type TritonArg = 'none' | 'bool' | 'int' | 'float' | 'string';

/** Every tritonserver 2.73 long option, in its --help order (getopt lists ambiguous matches in this order). */
export const TRITON_OPTIONS: readonly (readonly [name: string, arg: TritonArg])[] = [
  ['help', 'none'],
  ['id', 'string'],
  ['exit-timeout-secs', 'int'],
  ['log-verbose', 'int'],
  ['log-info', 'bool'],
  ['log-warning', 'bool'],
  ['log-error', 'bool'],
  ['log-format', 'string'],
  ['log-file', 'string'],
  ['model-store', 'string'],
  ['model-repository', 'string'],
  ['exit-on-error', 'bool'],
  ['disable-auto-complete-config', 'none'],
  ['strict-readiness', 'bool'],
  ['model-control-mode', 'string'],
  ['repository-poll-secs', 'int'],
  ['load-model', 'string'],
  ['model-config-name', 'string'],
  ['model-load-thread-count', 'int'],
  ['model-load-retry-count', 'int'],
  ['model-namespacing', 'bool'],
  ['enable-peer-access', 'bool'],
  ['allow-http', 'bool'],
  ['http-address', 'string'],
  ['http-port', 'int'],
  ['reuse-http-port', 'bool'],
  ['http-header-forward-pattern', 'string'],
  ['http-thread-count', 'int'],
  ['http-restricted-api', 'string'],
  ['allow-grpc', 'bool'],
  ['grpc-address', 'string'],
  ['grpc-port', 'int'],
  ['reuse-grpc-port', 'bool'],
  ['grpc-header-forward-pattern', 'string'],
  ['grpc-infer-thread-count', 'int'],
  ['grpc-infer-allocation-pool-size', 'int'],
  ['grpc-max-response-pool-size', 'int'],
  ['grpc-use-ssl', 'bool'],
  ['grpc-use-ssl-mutual', 'bool'],
  ['grpc-server-cert', 'string'],
  ['grpc-server-key', 'string'],
  ['grpc-root-cert', 'string'],
  ['grpc-infer-response-compression-level', 'string'],
  ['grpc-keepalive-time', 'int'],
  ['grpc-keepalive-timeout', 'int'],
  ['grpc-keepalive-permit-without-calls', 'bool'],
  ['grpc-http2-max-pings-without-data', 'int'],
  ['grpc-http2-min-recv-ping-interval-without-data', 'int'],
  ['grpc-http2-max-ping-strikes', 'int'],
  ['grpc-max-connection-age', 'int'],
  ['grpc-max-connection-age-grace', 'int'],
  ['grpc-restricted-protocol', 'string'],
  ['allow-sagemaker', 'bool'],
  ['sagemaker-port', 'int'],
  ['sagemaker-safe-port-range', 'string'],
  ['sagemaker-thread-count', 'int'],
  ['allow-vertex-ai', 'bool'],
  ['vertex-ai-port', 'int'],
  ['vertex-ai-thread-count', 'int'],
  ['vertex-ai-default-model', 'string'],
  ['allow-metrics', 'bool'],
  ['allow-gpu-metrics', 'bool'],
  ['allow-cpu-metrics', 'bool'],
  ['metrics-address', 'string'],
  ['metrics-port', 'int'],
  ['metrics-interval-ms', 'float'],
  ['metrics-config', 'string'],
  ['trace-config', 'string'],
  ['backend-directory', 'string'],
  ['backend-config', 'string'],
  ['repoagent-directory', 'string'],
  ['cache-config', 'string'],
  ['cache-directory', 'string'],
  ['rate-limit', 'string'],
  ['rate-limit-resource', 'string'],
  ['pinned-memory-pool-byte-size', 'int'],
  ['cuda-memory-pool-byte-size', 'string'],
  ['cuda-virtual-address-size', 'string'],
  ['min-supported-compute-capability', 'float'],
  ['buffer-manager-thread-count', 'int'],
  ['host-policy', 'string'],
  ['model-load-gpu-limit', 'string'],
  ['allow-client-shm', 'bool'],
  ['strict-model-config', 'bool'],
  ['response-cache-byte-size', 'int'],
  ['trace-file', 'string'],
  ['trace-level', 'string'],
  ['trace-rate', 'int'],
  ['trace-count', 'int'],
  ['trace-log-frequency', 'int'],
];

const GPU = 'Serval runs on the CPU only (no CUDA devices)';
const THREADS = 'Node.js serves requests on its event loop; there is no thread pool to size';
const LIBRARIES = 'backends, caches and repository agents are built into Serval, not loaded as shared libraries';
const ENDPOINT = 'Serval has no SageMaker or Vertex AI endpoint (serve KServe v2 on --http-port instead)';

/** Options Serval accepts and does not act on: why, as the start-up line says it. */
export const IGNORED_OPTIONS: Readonly<Record<string, string>> = {
  'enable-peer-access': GPU,
  'reuse-http-port': 'Node.js 20 cannot share a listening port between processes (SO_REUSEPORT)',
  'reuse-grpc-port': 'Node.js 20 cannot share a listening port between processes (SO_REUSEPORT)',
  'http-thread-count': THREADS,
  'grpc-infer-thread-count': THREADS,
  'grpc-infer-allocation-pool-size': 'Serval allocates request state per request; there is no pool to size',
  'grpc-max-response-pool-size': 'Serval allocates responses per request; there is no pool to size',
  'grpc-infer-response-compression-level': 'Serval sends gRPC responses uncompressed',
  'allow-sagemaker': ENDPOINT,
  'sagemaker-port': ENDPOINT,
  'sagemaker-safe-port-range': ENDPOINT,
  'sagemaker-thread-count': ENDPOINT,
  'allow-vertex-ai': ENDPOINT,
  'vertex-ai-port': ENDPOINT,
  'vertex-ai-thread-count': ENDPOINT,
  'vertex-ai-default-model': ENDPOINT,
  'backend-directory': LIBRARIES,
  'repoagent-directory': LIBRARIES,
  'cache-directory': LIBRARIES,
  'pinned-memory-pool-byte-size': GPU,
  'cuda-memory-pool-byte-size': GPU,
  'cuda-virtual-address-size': GPU,
  'min-supported-compute-capability': GPU,
  'model-load-gpu-limit': GPU,
  'buffer-manager-thread-count': THREADS,
  'host-policy': 'Serval sets no NUMA or CPU-core affinity (the operating system places its threads)',
};

/**
 * A long option as getopt_long finds it: the exact name, else the one option the name is a prefix
 * of. Several options sharing the prefix is an error with getopt's text, unless they are the same
 * option under two names (`sameAs`), as getopt also allows.
 */
export function resolveLongOption(arg: string, key: string, names: readonly string[], sameAs: (name: string) => string): string {
  if (names.includes(key)) return key;
  const matches = names.filter((n) => n.startsWith(key));
  if (matches.length === 0) throw new Error(`unrecognized option '${arg}'`);
  if (new Set(matches.map(sameAs)).size > 1) {
    throw new Error(`option '${arg}' is ambiguous; possibilities:${matches.map((m) => ` '--${m}'`).join('')}`);
  }
  return matches[0]!;
}

/** The value check tritonserver makes for an option Serval ignores, so a typo still stops it as it stops tritonserver. */
export function checkIgnoredValue(name: string, arg: TritonArg, value: string): void {
  const bad =
    (arg === 'int' && !/^\s*[-+]?\d+/.test(value)) ||
    (arg === 'float' && !Number.isFinite(Number.parseFloat(value))) ||
    (arg === 'bool' && !['true', 'on', '1', 'false', 'off', '0'].includes(value.toLowerCase()));
  if (bad) throw new Error(`--${name}: invalid value '${value}' (${arg === 'bool' ? 'true or false' : `a number`})`);
}

/** One warning line per ignored option given, once at start-up, naming why it has no effect. */
export function reportIgnoredOptions(given: readonly (readonly [string, string])[], log: Logger): void {
  const seen = new Set<string>();
  for (const [name, value] of given) {
    if (seen.has(name)) continue;
    seen.add(name);
    log.warn(`option --${name}=${value} is ignored: ${IGNORED_OPTIONS[name] ?? 'it has no meaning for Serval'}`);
  }
}
