// The gRPC client: inference.GRPCInferenceService over @grpc/grpc-js, tensors in
// raw_input_contents / raw_output_contents (bytes as they are), and ModelStreamInfer streams.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ServalClientError } from './errors.js';
import { decodeOutput, encodeInput, type InferInput, isDataType, type OutputTensor, type Parameters } from './tensor.js';
import {
  type InferenceClient,
  type InferOptions,
  type LoadOptions,
  type ModelMetadata,
  type ModelStatistics,
  type RepositoryModel,
  Result,
  requestParameters,
  type ServerMetadata,
} from './types.js';

export interface GrpcClientOptions {
  /** Metadata on every call, e.g. a restricted API's key (`{ 'triton-grpc-protocol-admin-key': '...' }`). */
  headers?: Record<string, string>;
  /** Folder holding grpc_service.proto and model_config.proto (default: this package's proto/). */
  protoDir?: string;
  /** Channel credentials (default: insecure). */
  credentials?: grpc.ChannelCredentials;
}

// The protobuf messages as @grpc/proto-loader gives them (keepCase, longs and enums as strings).
type WireParam = { parameter_choice?: string } & Partial<
  Record<'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param', unknown>
>;
interface WireTensor {
  name: string;
  datatype: string;
  shape: string[];
  parameters?: Record<string, WireParam>;
}
interface WireInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: Record<string, WireParam>;
  outputs: WireTensor[];
  raw_output_contents: Buffer[];
}
type Unary = (
  req: unknown,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res: unknown) => void,
) => grpc.ClientUnaryCall;
type Service = grpc.Client & Record<string, Unary> & { ModelStreamInfer(md: grpc.Metadata): grpc.ClientDuplexStream<unknown, unknown> };

// Triton accepts messages up to 2 GiB; grpc-js's default receive limit is 4 MiB.
const MAX_MESSAGE = 2 ** 31 - 1;

/** proto/ of this package: found from this file upwards (src/client/ and dist/src/client/ alike). */
function packageProtoDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, 'proto');
    if (existsSync(path.join(candidate, 'grpc_service.proto'))) return candidate;
    const up = path.dirname(dir);
    if (up === dir) throw new ServalClientError('cannot find proto/grpc_service.proto; pass protoDir');
    dir = up;
  }
}

const definitions = new Map<string, grpc.GrpcObject>();
function loadService(protoDir: string): grpc.ServiceClientConstructor {
  let pkg = definitions.get(protoDir);
  if (!pkg) {
    const def = protoLoader.loadSync('grpc_service.proto', {
      includeDirs: [protoDir],
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    pkg = grpc.loadPackageDefinition(def);
    definitions.set(protoDir, pkg);
  }
  return (pkg.inference as grpc.GrpcObject).GRPCInferenceService as grpc.ServiceClientConstructor;
}

function toWireParams(p: Parameters): Record<string, WireParam> {
  const out: Record<string, WireParam> = {};
  for (const [k, v] of Object.entries(p)) {
    if (typeof v === 'boolean') out[k] = { bool_param: v };
    else if (typeof v === 'string') out[k] = { string_param: v };
    else if (typeof v === 'bigint') out[k] = v < 0n ? { int64_param: v.toString() } : { uint64_param: v.toString() };
    else if (Number.isInteger(v)) out[k] = { int64_param: String(v) };
    else out[k] = { double_param: v };
  }
  return out;
}

function fromWireParams(p: Record<string, WireParam> | undefined): Parameters {
  const out: Parameters = {};
  for (const [k, v] of Object.entries(p ?? {})) {
    const choice = v.parameter_choice as keyof WireParam | undefined;
    if (!choice) continue;
    const value = v[choice];
    if (choice === 'int64_param' || choice === 'uint64_param') {
      const n = Number(value);
      out[k] = Number.isSafeInteger(n) ? n : BigInt(String(value));
    } else out[k] = value as string | number | boolean;
  }
  return out;
}

const num = (v: unknown): number => Number(v);
const dur = (d: { count: unknown; ns: unknown } | undefined) => ({ count: num(d?.count ?? 0), ns: num(d?.ns ?? 0) });

/** ModelStatistics as the HTTP JSON has it: the uint64 counters as numbers. */
function statisticsOf(s: Record<string, unknown>): ModelStatistics {
  const is = (s.inference_stats ?? {}) as Record<string, { count: unknown; ns: unknown }>;
  const keys = ['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output', 'cache_hit', 'cache_miss'] as const;
  return {
    name: String(s.name),
    version: String(s.version),
    last_inference: num(s.last_inference),
    inference_count: num(s.inference_count),
    execution_count: num(s.execution_count),
    inference_stats: Object.fromEntries(keys.map((k) => [k, dur(is[k])])) as ModelStatistics['inference_stats'],
    batch_stats: ((s.batch_stats ?? []) as Record<string, { count: unknown; ns: unknown }>[]).map((b) => ({
      batch_size: num(b.batch_size),
      compute_input: dur(b.compute_input),
      compute_infer: dur(b.compute_infer),
      compute_output: dur(b.compute_output),
    })),
  };
}

function inferRequest(model: string, inputs: readonly InferInput[], options: InferOptions) {
  const raw = inputs.map((i) => ({ input: i, ...encodeInput(i) }));
  return {
    model_name: model,
    model_version: options.version ?? '',
    id: options.id ?? '',
    parameters: toWireParams(requestParameters(options)),
    inputs: raw.map(({ input, datatype }) => ({
      name: input.name,
      datatype,
      shape: input.shape.map(String),
      parameters: toWireParams(input.parameters ?? {}),
    })),
    outputs: (options.outputs ?? []).map((o) => {
      const spec = typeof o === 'string' ? { name: o } : o;
      return { name: spec.name, parameters: spec.classCount ? toWireParams({ classification: spec.classCount }) : {} };
    }),
    // Views over the caller's TypedArrays: protobufjs writes them into the message once.
    raw_input_contents: raw.map(({ bytes }) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)),
  };
}

function inferResult(res: WireInferResponse): Result {
  const outputs: OutputTensor[] = res.outputs.map((o, i) => {
    if (!isDataType(o.datatype)) throw new ServalClientError(`output '${o.name}': unknown datatype '${o.datatype}'`, { protocol: 'grpc' });
    const shape = o.shape.map(Number);
    const bytes = res.raw_output_contents[i] ?? Buffer.alloc(0);
    return {
      name: o.name,
      datatype: o.datatype,
      shape,
      data: decodeOutput(o.name, o.datatype, shape, bytes),
      parameters: fromWireParams(o.parameters),
    };
  });
  return new Result({
    modelName: res.model_name,
    modelVersion: res.model_version,
    id: res.id,
    parameters: fromWireParams(res.parameters),
    outputs,
  });
}

const errorOf = (e: grpc.ServiceError): ServalClientError =>
  new ServalClientError(e.details || e.message, { protocol: 'grpc', code: e.code }, { cause: e });

export class GrpcClient implements InferenceClient {
  private readonly client: Service;
  private readonly headers: Record<string, string>;

  /** `url`: `host:port` (a `grpc://` prefix is allowed). */
  constructor(url: string, options: GrpcClientOptions = {}) {
    const Ctor = loadService(options.protoDir ?? packageProtoDir());
    this.client = new Ctor(url.replace(/^grpc:\/\//, ''), options.credentials ?? grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': MAX_MESSAGE,
      'grpc.max_send_message_length': MAX_MESSAGE,
    }) as Service;
    this.headers = { ...options.headers };
  }

  close(): void {
    this.client.close();
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(this.headers)) md.set(k, v);
    return md;
  }

  private call<T>(method: string, request: unknown, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const fn = this.client[method]!.bind(this.client);
      const call = fn(request, this.metadata(), {}, (err, res) => (err ? reject(errorOf(err)) : resolve(res as T)));
      signal?.addEventListener('abort', () => call.cancel(), { once: true });
    });
  }

  async isServerLive(): Promise<boolean> {
    return (await this.call<{ live: boolean }>('ServerLive', {})).live;
  }
  async isServerReady(): Promise<boolean> {
    return (await this.call<{ ready: boolean }>('ServerReady', {})).ready;
  }
  async isModelReady(model: string, version = ''): Promise<boolean> {
    return (await this.call<{ ready: boolean }>('ModelReady', { name: model, version })).ready;
  }
  async serverMetadata(): Promise<ServerMetadata> {
    const r = await this.call<ServerMetadata>('ServerMetadata', {});
    return { name: r.name, version: r.version, extensions: r.extensions };
  }
  async modelMetadata(model: string, version = ''): Promise<ModelMetadata> {
    const r = await this.call<Omit<ModelMetadata, 'inputs' | 'outputs'> & { inputs: WireTensor[]; outputs: WireTensor[] }>(
      'ModelMetadata',
      {
        name: model,
        version,
      },
    );
    const tensor = (t: WireTensor) => {
      if (!isDataType(t.datatype))
        throw new ServalClientError(`tensor '${t.name}': unknown datatype '${t.datatype}'`, { protocol: 'grpc' });
      return { name: t.name, datatype: t.datatype, shape: t.shape.map(Number) };
    };
    return { name: r.name, versions: r.versions, platform: r.platform, inputs: r.inputs.map(tensor), outputs: r.outputs.map(tensor) };
  }
  async modelConfig(model: string, version = ''): Promise<Record<string, unknown>> {
    return (await this.call<{ config: Record<string, unknown> }>('ModelConfig', { name: model, version })).config;
  }
  async modelStatistics(model = '', version = ''): Promise<ModelStatistics[]> {
    const r = await this.call<{ model_stats: Record<string, unknown>[] }>('ModelStatistics', { name: model, version });
    return r.model_stats.map(statisticsOf);
  }
  async repositoryIndex(readyOnly = false): Promise<RepositoryModel[]> {
    const r = await this.call<{ models: Required<RepositoryModel>[] }>('RepositoryIndex', { repository_name: '', ready: readyOnly });
    // As the HTTP answer: no empty fields.
    return r.models.map((m) => ({
      name: m.name,
      ...(m.version && { version: m.version }),
      ...(m.state && { state: m.state }),
      ...(m.reason && { reason: m.reason }),
    }));
  }
  async loadModel(model: string, options: LoadOptions = {}): Promise<void> {
    const parameters: Record<string, { string_param: string } | { bytes_param: Buffer }> = {};
    if (options.config !== undefined) {
      parameters.config = { string_param: typeof options.config === 'string' ? options.config : JSON.stringify(options.config) };
    }
    for (const [name, content] of Object.entries(options.files ?? {})) parameters[name] = { bytes_param: Buffer.from(content) };
    await this.call('RepositoryModelLoad', { repository_name: '', model_name: model, parameters });
  }
  async unloadModel(model: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    await this.call('RepositoryModelUnload', {
      repository_name: '',
      model_name: model,
      parameters: { unload_dependents: { bool_param: options.unloadDependents ?? false } },
    });
  }

  async infer(model: string, inputs: readonly InferInput[], options: InferOptions = {}): Promise<Result> {
    return inferResult(await this.call<WireInferResponse>('ModelInfer', inferRequest(model, inputs, options), options.signal));
  }

  /** Opens a ModelStreamInfer stream: requests go out in order; each answer settles its request's promise. */
  stream(): InferStream {
    return new InferStream(this.client.ModelStreamInfer(this.metadata()));
  }
}

/** A request on a stream: infer()'s options but the signal (a stream's requests end with the stream). */
export type StreamInferOptions = Omit<InferOptions, 'signal'> & {
  /**
   * Asks a decoupled model's request for an empty response when the model ends it without one
   * (Triton's `triton_enable_empty_final_response`), so the final flag always arrives.
   */
  enableEmptyFinalResponse?: boolean;
};

/** Where the answers of one request in flight go. */
interface Waiting {
  answer(r: Result | ServalClientError, final: boolean): void;
  fail(e: Error): void;
}

/**
 * Whether a streamed response is its request's last: Triton flags each with
 * `triton_final_response`; one without the flag (an error refused before the model ran) is final,
 * as Triton's own clients take it.
 */
function isFinal(res: WireInferResponse | undefined): boolean {
  const p = res?.parameters?.triton_final_response;
  return p?.parameter_choice !== 'bool_param' || p.bool_param === true;
}

/**
 * One ModelStreamInfer stream. `infer()` sends a request and resolves with its response,
 * matched by request id (the stream gives one an id when the caller does not). A request the
 * server fails rejects alone; the stream goes on. A decoupled model answers a request any number
 * of times: `inferEach()` hands over every response and resolves after the final one.
 * `onResponse` sees every response of every request as it comes.
 */
export class InferStream {
  /** Requests sent and not finally answered, by id: an id is free again after its final response. */
  private readonly waiting = new Map<string, Waiting>();
  private next = 0;
  private ended: Error | undefined;
  onResponse: ((r: Result | ServalClientError, id: string, final: boolean) => void) | undefined;

  constructor(private readonly call: grpc.ClientDuplexStream<unknown, unknown>) {
    call.on('data', (msg: { error_message: string; infer_response?: WireInferResponse }) => {
      const id = msg.infer_response?.id ?? '';
      const final = isFinal(msg.infer_response);
      let answer: Result | ServalClientError;
      try {
        answer = msg.error_message
          ? new ServalClientError(msg.error_message, { protocol: 'grpc' })
          : inferResult(msg.infer_response as WireInferResponse);
      } catch (e) {
        answer = e instanceof ServalClientError ? e : new ServalClientError(String(e), { protocol: 'grpc' });
      }
      this.onResponse?.(answer, id, final);
      const w = this.waiting.get(id);
      if (!w) return;
      if (final) this.waiting.delete(id);
      w.answer(answer, final);
    });
    const finish = (err: Error): void => {
      this.ended ??= err;
      for (const w of this.waiting.values()) w.fail(err);
      this.waiting.clear();
    };
    call.on('error', (e: grpc.ServiceError) => finish(errorOf(e)));
    call.on('end', () => finish(new ServalClientError('the stream ended', { protocol: 'grpc' })));
  }

  /**
   * One request, settled by its first response (a decoupled model's further responses go to
   * `onResponse` only).
   */
  infer(model: string, inputs: readonly InferInput[], options: StreamInferOptions = {}): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      let settled = false;
      const sent = this.send(model, inputs, options, {
        answer: (r) => {
          if (settled) return;
          settled = true;
          if (r instanceof ServalClientError) reject(r);
          else resolve(r);
        },
        fail: (e) => {
          if (!settled) reject(e);
          settled = true;
        },
      });
      if (sent) reject(sent);
    });
  }

  /**
   * One request to a model that may answer many times (decoupled): `each` gets every response or
   * in-band error as it comes, with whether it is the last; resolves once the last has come,
   * rejects if the stream ends before.
   */
  inferEach(
    model: string,
    inputs: readonly InferInput[],
    options: StreamInferOptions,
    each: (r: Result | ServalClientError, final: boolean) => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const sent = this.send(model, inputs, options, {
        answer: (r, final) => {
          each(r, final);
          if (final) resolve();
        },
        fail: reject,
      });
      if (sent) reject(sent);
    });
  }

  /** Writes one request; the error instead when it cannot be sent. */
  private send(model: string, inputs: readonly InferInput[], options: StreamInferOptions, w: Waiting): Error | undefined {
    if (this.ended) return this.ended;
    const id = options.id || `stream-${++this.next}`;
    if (this.waiting.has(id)) return new ServalClientError(`request id '${id}' is already in flight on this stream`);
    const { enableEmptyFinalResponse, ...rest } = options;
    let request: ReturnType<typeof inferRequest>;
    try {
      request = inferRequest(model, inputs, { ...rest, id });
    } catch (e) {
      return e instanceof Error ? e : new ServalClientError(String(e));
    }
    if (enableEmptyFinalResponse !== undefined) {
      request.parameters.triton_enable_empty_final_response = { bool_param: enableEmptyFinalResponse };
    }
    this.waiting.set(id, w);
    this.call.write(request);
    return undefined;
  }

  /** Ends the sending side; the requests still waiting settle as their answers arrive. */
  end(): void {
    this.call.end();
  }

  /** Cancels the stream: waiting requests reject. */
  cancel(): void {
    this.call.cancel();
  }
}
