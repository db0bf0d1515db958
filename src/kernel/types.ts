// The request/response types shared by every front-end and the core. Tensor data is always
// raw little-endian bytes (BYTES: 4-byte length-prefixed elements), never JS number arrays.

import type { Cancellation } from './cancel.js';
import type { DataType } from './datatypes.js';
import type { ServalError } from './errors.js';
import type { RequestTrace } from './trace.js';

export type ParamValue = string | number | boolean | bigint;
export type Params = Record<string, ParamValue>;

export interface InferInputTensor {
  name: string;
  /** As received; validated against the model config by the core. */
  datatype: string;
  shape: number[];
  data: Uint8Array;
  parameters?: Params;
}

export interface RequestedOutput {
  name: string;
  /** As received: `classification` (top-k classes instead of the tensor), `binary_data`, ... */
  parameters?: Params;
}

export interface InferRequest {
  modelName: string;
  /** '' means the model's version policy picks (highest ready version). */
  modelVersion: string;
  id: string;
  inputs: InferInputTensor[];
  /** Absent or empty: every output of the model. */
  outputs?: RequestedOutput[];
  parameters: Params;
  /** Cancelled when the client goes away; a queued request is then dropped. */
  cancellation?: Cancellation;
  /** Set when the trace extension sampled this request: every stage stamps its timestamps on it. */
  trace?: RequestTrace;
  /**
   * HTTP raw binary request: one input holding only data, whose name, datatype and shape the
   * core takes from the model config (model/raw_input.ts).
   */
  rawInput?: boolean;
  /**
   * Memory that is the request's alone (the received body or message), holding its tensors as
   * views, that nothing reads once the request is handed to the core. A backend may take it over
   * (transfer it to where the model runs) instead of copying the tensors; those views are then
   * empty. A front-end sets it only when no one else keeps a reference to that memory.
   */
  ownMemory?: ArrayBuffer;
  /**
   * Called once the core has taken the request in (queued for its model): an error after it is
   * the request's outcome; one before is a refusal of the request as issued (unknown model,
   * invalid inputs, a full queue), which Triton's gRPC stream answers in-band even in its
   * `triton_grpc_error` mode.
   */
  admitted?: () => void;
}

export interface InferOutputTensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: Uint8Array;
  /** Written into the shared-memory region the request named: `data` is empty, none goes on the wire. */
  sharedMemory?: boolean;
}

export interface InferResponse {
  modelName: string;
  modelVersion: string;
  id: string;
  outputs: InferOutputTensor[];
  parameters?: Params;
}

/**
 * Where the responses of one request go, as the model produces them. A model that is not
 * decoupled answers exactly once: `response(res, true)` or `error(e, true)`. A decoupled model
 * (Triton's `model_transaction_policy { decoupled: true }`) answers zero, one or many times, each
 * response or error in turn; the last call has `final`, and may be `response(undefined, true)`: the
 * final flag sent alone (Triton's TRITONSERVER_RESPONSE_COMPLETE_FINAL on no response). Nothing is
 * called after a final call.
 */
export interface ResponseSink {
  response(res: InferResponse | undefined, final: boolean): void;
  error(e: ServalError, final: boolean): void;
}

export interface TensorMetadata {
  name: string;
  datatype: string;
  shape: number[];
}

export interface ModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

export interface ServerMetadata {
  name: string;
  version: string;
  extensions: string[];
}

export type ModelState = 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';

/** One row of the repository index. */
export interface IndexRow {
  name: string;
  version: string;
  state: ModelState | '';
  reason: string;
}
