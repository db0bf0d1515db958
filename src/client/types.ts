// What the client's calls return: the KServe v2 JSON shapes, the same over HTTP and gRPC (gRPC's
// 64-bit counters arrive as strings and are turned into numbers).
import { ServalClientError } from './errors.js';
import { bytesToStrings, type DataType, type InferInput, type OutputTensor, type Parameters, type TypedArrayOf } from './tensor.js';

export interface ServerMetadata {
  name: string;
  version: string;
  extensions: string[];
}

export interface TensorMetadata {
  name: string;
  datatype: DataType;
  /** -1 for a variable dimension. */
  shape: number[];
}

export interface ModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

export interface Duration {
  count: number;
  ns: number;
}

export interface BatchStatistics {
  batch_size: number;
  compute_input: Duration;
  compute_infer: Duration;
  compute_output: Duration;
}

export interface ModelStatistics {
  name: string;
  version: string;
  /** Milliseconds since the epoch of the last inference, 0 if none. */
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: Record<
    'success' | 'fail' | 'queue' | 'compute_input' | 'compute_infer' | 'compute_output' | 'cache_hit' | 'cache_miss',
    Duration
  >;
  batch_stats: BatchStatistics[];
}

export interface RepositoryModel {
  name: string;
  version?: string;
  state?: string;
  reason?: string;
}

export interface RequestedOutput {
  name: string;
  /** Classification extension: the top `classCount` classes as "score:index:label" BYTES. */
  classCount?: number;
}

export interface InferOptions {
  /** Model version; '' or absent = the server's choice (the latest ready one). */
  version?: string;
  /** Request id, echoed in the response. */
  id?: string;
  /** Outputs to return (all when absent). */
  outputs?: readonly (string | RequestedOutput)[];
  /** Scheduler priority (1 = highest), for models with priority levels. */
  priority?: number;
  /** Queue timeout in microseconds, where the model allows overriding it. */
  timeoutUs?: number;
  /** Sequence batching: the correlation id and the start/end flags of this request. */
  sequenceId?: number | bigint | string;
  sequenceStart?: boolean;
  sequenceEnd?: boolean;
  /** Other request parameters, sent as given. */
  parameters?: Parameters;
  /** Cancels the request (HTTP: closes the connection; gRPC: cancels the call). */
  signal?: AbortSignal;
}

export interface InferResult {
  modelName: string;
  modelVersion: string;
  id: string;
  parameters: Parameters;
  outputs: OutputTensor[];
}

export interface LoadOptions {
  /** A model config in Triton's JSON form, used instead of the repository's config.pbtxt. */
  config?: string | Record<string, unknown>;
  /** Files for the load (`file:<path>` → content), as the repository extension takes them. */
  files?: Record<string, Uint8Array>;
}

/** What both protocols' clients do. */
export interface InferenceClient {
  isServerLive(): Promise<boolean>;
  isServerReady(): Promise<boolean>;
  isModelReady(model: string, version?: string): Promise<boolean>;
  serverMetadata(): Promise<ServerMetadata>;
  modelMetadata(model: string, version?: string): Promise<ModelMetadata>;
  /** HTTP: Triton's config JSON. gRPC: the ModelConfig message as an object (enums as names, int64 as strings). */
  modelConfig(model: string, version?: string): Promise<Record<string, unknown>>;
  infer(model: string, inputs: readonly InferInput[], options?: InferOptions): Promise<Result>;
  /** '' model = every model; '' version = every ready version. */
  modelStatistics(model?: string, version?: string): Promise<ModelStatistics[]>;
  repositoryIndex(readyOnly?: boolean): Promise<RepositoryModel[]>;
  loadModel(model: string, options?: LoadOptions): Promise<void>;
  unloadModel(model: string, options?: { unloadDependents?: boolean }): Promise<void>;
  close(): void;
}

/** An output's data typed by its datatype, found by name. */
export function outputOf<D extends DataType>(result: InferResult, name: string, datatype?: D): OutputTensor<D> & { data: TypedArrayOf[D] } {
  const out = result.outputs.find((o) => o.name === name);
  if (!out)
    throw new ServalClientError(`no output '${name}' in the response (got ${result.outputs.map((o) => o.name).join(', ') || 'none'})`);
  if (datatype !== undefined && out.datatype !== datatype)
    throw new ServalClientError(`output '${name}' is ${out.datatype}, not ${datatype}`);
  return out as OutputTensor<D>;
}

/** The request parameters an InferOptions stands for (Triton's names). */
export function requestParameters(options: InferOptions): Parameters {
  const p: Parameters = { ...options.parameters };
  if (options.priority !== undefined) p.priority = options.priority;
  if (options.timeoutUs !== undefined) p.timeout = options.timeoutUs;
  if (options.sequenceId !== undefined) p.sequence_id = options.sequenceId;
  if (options.sequenceStart !== undefined) p.sequence_start = options.sequenceStart;
  if (options.sequenceEnd !== undefined) p.sequence_end = options.sequenceEnd;
  return p;
}

/** An inference result with typed access to its outputs. */
export class Result implements InferResult {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id: string;
  readonly parameters: Parameters;
  readonly outputs: OutputTensor[];

  constructor(r: InferResult) {
    this.modelName = r.modelName;
    this.modelVersion = r.modelVersion;
    this.id = r.id;
    this.parameters = r.parameters;
    this.outputs = r.outputs;
  }

  /** The output called `name`; with `datatype`, its data is typed (and checked) accordingly. */
  output<D extends DataType>(name: string, datatype?: D): OutputTensor<D> & { data: TypedArrayOf[D] } {
    return outputOf(this, name, datatype);
  }

  /** A BYTES output's elements as strings. */
  strings(name: string): string[] {
    return bytesToStrings(this.output(name, 'BYTES').data);
  }
}
