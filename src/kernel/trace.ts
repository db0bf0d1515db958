// What a traced inference request carries through the server (Triton's trace extension). The
// front-end that samples a request gets one of these from the core, stamps its own receive/send
// times, and hands it on with the request; the core and the scheduler stamp theirs. Timestamps
// are steady-clock nanoseconds (process.hrtime.bigint(), CLOCK_MONOTONIC: Triton's
// steady_clock). An untraced request carries none, and nothing is recorded or read for it.

/** Triton's timestamp names (TRITONSERVER_InferenceTraceActivity and the front-ends' own). */
export type TraceActivity =
  | 'HTTP_RECV_START'
  | 'HTTP_RECV_END'
  | 'GRPC_WAITREAD_START'
  | 'GRPC_WAITREAD_END'
  | 'REQUEST_START'
  | 'QUEUE_START'
  | 'COMPUTE_START'
  | 'COMPUTE_INPUT_END'
  | 'COMPUTE_OUTPUT_START'
  | 'COMPUTE_END'
  | 'REQUEST_END'
  | 'INFER_RESPONSE_COMPLETE'
  | 'HTTP_SEND_START'
  | 'HTTP_SEND_END'
  | 'GRPC_SEND_START'
  | 'GRPC_SEND_END';

/** Tensor activities of the TENSORS trace level. */
export type TensorActivity = 'TENSOR_QUEUE_INPUT' | 'TENSOR_BACKEND_OUTPUT';

export interface RequestTrace {
  /** Triton's trace id: unique in the server, from 1. */
  readonly id: number;
  /** The TENSORS level is on: the scheduler records the request's input and output tensors. */
  readonly tensors: boolean;
  /** The model version the request runs on, and its request id: the trace's model record. */
  model(name: string, version: number, requestId: string): void;
  /** Records one timestamp (steady-clock ns). */
  stamp(activity: TraceActivity, ns: bigint): void;
  /** Records a tensor (TENSORS level): raw bytes as the request or the model has them. */
  tensor(activity: TensorActivity, name: string, datatype: string, shape: readonly number[], data: Uint8Array): void;
  /**
   * A trace for a request this one makes to another model (an ensemble step): Triton's child
   * trace, with the next id, this trace's id as its parent, this level, written with this trace.
   */
  child(): RequestTrace;
  /** The request is done (answered, failed or abandoned): the trace is written. Idempotent. */
  end(): void;
  /**
   * Keeps the request unreleased until the returned function is called: a decoupled request whose
   * final response came before its execute() returned. Until then, REQUEST_END waits (it is
   * stamped at the release, as Triton stamps it) and end() too, so the compute times stamped when
   * the execution returns are kept.
   */
  hold?(): () => void;
}
