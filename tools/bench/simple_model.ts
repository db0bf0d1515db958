/**
 * The `simple` model (INT32 INPUT0/INPUT1 [16] → OUTPUT0 = sum, OUTPUT1 = difference,
 * max_batch_size 8) as the bare protocol servers (bare_http.ts, bare_grpc.ts) answer it:
 * metadata, config and statistics in the KServe v2 / Triton shapes perf_analyzer reads, the
 * computation itself, and cumulative counters for the statistics endpoint (perf_analyzer
 * exits at its first window if that endpoint fails).
 *
 * Deliberately independent of src/: these servers are the protocol ceiling that Serval is
 * compared with, so they must contain nothing but the wire handling and the sums.
 */

export const MODEL = 'simple';
export const VERSION = '1';

export function metadata(): Record<string, unknown> {
  const t = (name: string) => ({ name, datatype: 'INT32', shape: [-1, 16] });
  return {
    name: MODEL,
    versions: [VERSION],
    platform: 'onnxruntime_onnx',
    inputs: [t('INPUT0'), t('INPUT1')],
    outputs: [t('OUTPUT0'), t('OUTPUT1')],
  };
}

/** The model config (field names as in model_config.proto / Triton's config JSON). */
export function config(): Record<string, unknown> {
  const t = (name: string) => ({ name, data_type: 'TYPE_INT32', dims: [16] });
  return {
    name: MODEL,
    platform: 'onnxruntime_onnx',
    backend: 'onnxruntime',
    max_batch_size: 8,
    input: [t('INPUT0'), t('INPUT1')],
    output: [t('OUTPUT0'), t('OUTPUT1')],
    instance_group: [{ name: 'simple', kind: 'KIND_CPU', count: 1 }],
  };
}

export class Counters {
  lastInferenceMs = 0;
  count = 0;
  items = 0;
  /** Whole handler time (decode + sums + encode), reported as `success` and `compute_infer` is the sums only. */
  successNs = 0;
  computeNs = 0;

  record(items: number, handlerNs: number, computeNs: number): void {
    this.lastInferenceMs = Date.now();
    this.count += 1;
    this.items += items;
    this.successNs += handlerNs;
    this.computeNs += computeNs;
  }

  /** One ModelStatistics entry; `num` renders 64-bit fields (numbers for JSON, strings for gRPC). */
  stats<T>(num: (n: number) => T): Record<string, unknown> {
    const d = (count: number, ns: number) => ({ count: num(count), ns: num(Math.round(ns)) });
    return {
      name: MODEL,
      version: VERSION,
      last_inference: num(this.lastInferenceMs),
      inference_count: num(this.items),
      execution_count: num(this.count),
      inference_stats: {
        success: d(this.count, this.successNs),
        fail: d(0, 0),
        queue: d(this.count, 0),
        compute_input: d(this.count, 0),
        compute_infer: d(this.count, this.computeNs),
        compute_output: d(this.count, 0),
        cache_hit: d(0, 0),
        cache_miss: d(0, 0),
      },
      batch_stats: [],
    };
  }
}

/** Element-wise sum and difference of two little-endian INT32 tensors (any byte alignment). */
export function sumAndDiff(a: Uint8Array, b: Uint8Array): { sum: Buffer; diff: Buffer } {
  if (a.byteLength !== b.byteLength || a.byteLength % 4 !== 0) {
    throw new Error(`INPUT0 and INPUT1 must be INT32 tensors of the same size (got ${a.byteLength} and ${b.byteLength} bytes)`);
  }
  const x = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const y = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  const sum = Buffer.allocUnsafe(a.byteLength);
  const diff = Buffer.allocUnsafe(a.byteLength);
  for (let o = 0; o < a.byteLength; o += 4) {
    const p = x.readInt32LE(o);
    const q = y.readInt32LE(o);
    sum.writeInt32LE((p + q) | 0, o);
    diff.writeInt32LE((p - q) | 0, o);
  }
  return { sum, diff };
}

export function parsePort(argv: readonly string[]): number {
  const i = argv.indexOf('--port');
  return i >= 0 ? Number(argv[i + 1]) : 0;
}
