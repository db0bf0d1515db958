// serval/client: a typed Node client for Serval and any KServe v2 / Triton server, over HTTP
// (binary tensor extension) or gRPC.
//
//   import { ServalClient } from 'serval/client';
//   const client = new ServalClient({ url: 'localhost:8001', protocol: 'grpc' });
//   const r = await client.infer('simple', [
//     { name: 'INPUT0', shape: [1, 16], data: new Int32Array(16) },
//     { name: 'INPUT1', shape: [1, 16], data: new Int32Array(16).fill(1) },
//   ]);
//   r.output('OUTPUT0', 'INT32').data;   // Int32Array
import { ServalClientError } from './errors.js';
import { GrpcClient, type GrpcClientOptions, type InferStream } from './grpc.js';
import { HttpClient, type HttpClientOptions } from './http.js';
import type { InferInput } from './tensor.js';
import type {
  InferenceClient,
  InferOptions,
  LoadOptions,
  ModelMetadata,
  ModelStatistics,
  RepositoryModel,
  Result,
  ServerMetadata,
} from './types.js';

export { type ErrorStatus, ServalClientError } from './errors.js';
export { GrpcClient, type GrpcClientOptions, InferStream, type StreamInferOptions } from './grpc.js';
export { HttpClient, type HttpClientOptions } from './http.js';
export {
  type BytesElement,
  bytesToStrings,
  DATATYPES,
  type DataType,
  datatypeOf,
  type InferInput,
  type OutputTensor,
  type Parameters,
  type TensorData,
  type TypedArray,
  type TypedArrayOf,
} from './tensor.js';
export type {
  BatchStatistics,
  Duration,
  InferenceClient,
  InferOptions,
  InferResult,
  LoadOptions,
  ModelMetadata,
  ModelStatistics,
  RepositoryModel,
  RequestedOutput,
  ServerMetadata,
  TensorMetadata,
} from './types.js';
export { Result } from './types.js';

export interface ServalClientOptions {
  /** `host:port`, or a URL: `http(s)://` picks HTTP, `grpc://` picks gRPC. */
  url: string;
  /** Default: from the URL's scheme, else 'http'. */
  protocol?: 'http' | 'grpc';
  /** Sent with every request: HTTP headers, or gRPC metadata (e.g. a restricted API's key). */
  headers?: Record<string, string>;
  /** gRPC only: the folder with grpc_service.proto (default: the package's proto/). */
  protoDir?: string;
}

/** One client for either protocol; the same calls and the same result shapes over both. */
export class ServalClient {
  readonly protocol: 'http' | 'grpc';
  private readonly impl: InferenceClient;

  constructor(options: ServalClientOptions) {
    const scheme = /^([a-z]+):\/\//.exec(options.url)?.[1];
    this.protocol = options.protocol ?? (scheme === 'grpc' ? 'grpc' : 'http');
    if (this.protocol === 'grpc') {
      const grpcOptions: GrpcClientOptions = { headers: options.headers };
      if (options.protoDir) grpcOptions.protoDir = options.protoDir;
      this.impl = new GrpcClient(options.url, grpcOptions);
    } else {
      const httpOptions: HttpClientOptions = { headers: options.headers };
      this.impl = new HttpClient(options.url, httpOptions);
    }
  }

  isServerLive(): Promise<boolean> {
    return this.impl.isServerLive();
  }
  isServerReady(): Promise<boolean> {
    return this.impl.isServerReady();
  }
  isModelReady(model: string, version?: string): Promise<boolean> {
    return this.impl.isModelReady(model, version);
  }
  serverMetadata(): Promise<ServerMetadata> {
    return this.impl.serverMetadata();
  }
  modelMetadata(model: string, version?: string): Promise<ModelMetadata> {
    return this.impl.modelMetadata(model, version);
  }
  modelConfig(model: string, version?: string): Promise<Record<string, unknown>> {
    return this.impl.modelConfig(model, version);
  }
  infer(model: string, inputs: readonly InferInput[], options?: InferOptions): Promise<Result> {
    return this.impl.infer(model, inputs, options);
  }
  modelStatistics(model?: string, version?: string): Promise<ModelStatistics[]> {
    return this.impl.modelStatistics(model, version);
  }
  repositoryIndex(readyOnly?: boolean): Promise<RepositoryModel[]> {
    return this.impl.repositoryIndex(readyOnly);
  }
  loadModel(model: string, options?: LoadOptions): Promise<void> {
    return this.impl.loadModel(model, options);
  }
  unloadModel(model: string, options?: { unloadDependents?: boolean }): Promise<void> {
    return this.impl.unloadModel(model, options);
  }

  /** A ModelStreamInfer stream (gRPC; the KServe HTTP protocol has no request stream). */
  stream(): InferStream {
    if (!(this.impl instanceof GrpcClient)) {
      throw new ServalClientError('streaming needs the gRPC protocol (ServalClient({ protocol: "grpc" }))');
    }
    return this.impl.stream();
  }

  close(): void {
    this.impl.close();
  }
}
