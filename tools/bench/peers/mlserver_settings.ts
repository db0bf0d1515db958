/**
 * MLServer's settings for the peer benchmark, derived from the same config.pbtxt Serval loads:
 * one model-settings.json per model (tools/bench/peers/onnx_runtime.py serves it) and the
 * server's settings.json.
 */
import type { DataType, ModelConfig } from '../../../src/config/types.js';

export interface PeerModelOptions {
  /** Absolute path of the model.onnx both servers run. */
  onnxPath: string;
  /** onnxruntime intra-op threads: what Serval gives one CPU instance (the cores). */
  intraOpThreads: number;
  /** MLServer's max_batch_time (seconds) for models whose config.pbtxt has dynamic_batching. */
  maxBatchTimeS: number;
}

export interface MetadataTensor {
  name: string;
  datatype: string;
  shape: number[];
}

/** KServe v2 wire datatype of a config.pbtxt data_type (TYPE_STRING is BYTES on the wire). */
export function wireDatatype(t: DataType | undefined): string {
  if (t === undefined || t === 'TYPE_INVALID') throw new Error('tensor without data_type');
  return t === 'TYPE_STRING' ? 'BYTES' : t.slice('TYPE_'.length);
}

function tensors(list: { name?: string; data_type?: DataType; dims?: number[] }[] | undefined, maxBatch: number): MetadataTensor[] {
  return (list ?? []).map((t) => {
    if (!t.name) throw new Error('tensor without a name');
    const dims = (t.dims ?? []).map(Number);
    return { name: t.name, datatype: wireDatatype(t.data_type), shape: maxBatch > 0 ? [-1, ...dims] : dims };
  });
}

/**
 * model-settings.json for one model. MLServer's adaptive batching (max_batch_size /
 * max_batch_time) is on exactly where the config.pbtxt asks Serval for dynamic batching, with
 * the same maximum batch.
 */
export function mlserverModelSettings(config: ModelConfig, opts: PeerModelOptions): Record<string, unknown> {
  if (!config.name) throw new Error('config.pbtxt without a name');
  const maxBatch = Number(config.max_batch_size ?? 0);
  const settings: Record<string, unknown> = {
    name: config.name,
    implementation: 'onnx_runtime.OnnxRuntimeModel',
    parameters: {
      uri: opts.onnxPath,
      // The session options Serval's onnxruntime backend uses for one CPU instance.
      extra: { intra_op_threads: opts.intraOpThreads, inter_op_threads: 1, allow_spinning: '0' },
    },
    inputs: tensors(config.input, maxBatch),
    outputs: tensors(config.output, maxBatch),
  };
  if (config.dynamic_batching && maxBatch > 1) {
    settings.max_batch_size = maxBatch;
    settings.max_batch_time = opts.maxBatchTimeS;
  }
  return settings;
}

export interface MlserverPorts {
  http: number;
  grpc: number;
  metrics: number;
}

/**
 * settings.json: MLServer's defaults (parallel_workers 1: inference in one worker process,
 * metrics on) except `debug: false`, which turns off its per-request access logs (Serval logs
 * no request by default either).
 */
export function mlserverServerSettings(ports: MlserverPorts): Record<string, unknown> {
  return { debug: false, host: '127.0.0.1', http_port: ports.http, grpc_port: ports.grpc, metrics_port: ports.metrics };
}
