// The backend seam. A backend says which model configs it takes, reads a model file's signature,
// auto-completes a config from it, places instances, and starts them. An instance runs one
// assembled batch at a time. The load pipeline (model/model_version.ts) and the scheduler see only
// these types; a new backend is one folder under backends/ plus its line in builtin_backends.ts.
import type { InstancePlacement, PlacedInstances } from '../config/resolved.js';
import type { ModelSignature } from '../config/signature.js';
import type { ModelConfig } from '../config/types.js';
import type { Cancellation } from '../kernel/cancel.js';
import type { DataType } from '../kernel/datatypes.js';
import type { RequestTrace } from '../kernel/trace.js';
import type { InferRequest, InferResponse, Params, ResponseSink } from '../kernel/types.js';

/** One tensor inside a reservation's buffer: `byteLength` bytes at `offset`. */
export interface TensorSlot {
  name: string;
  datatype: DataType;
  dims: number[];
  offset: number;
  byteLength: number;
}

/**
 * One request of a batch, for backends that answer each request on its own (Python): its share
 * of every input follows the previous request's share in the same slot.
 */
export interface BatchRequest {
  id: string;
  parameters: Params;
  /** 0 when the model does not batch. */
  batchSize: number;
  /** Bytes of each input (in `ExecLayout.inputs` order) that are this request's. */
  inputBytes: number[];
  outputs: string[];
  /**
   * A decoupled model's request: where its responses go, any number, as the model sends them;
   * the execution's result then carries none of them. The instance ends every request it was
   * given with a final send, also when the model cannot (its process died).
   */
  responses?: ResponseChannel;
  /** The request's cancellation: a running request hears of it here (a Python model's is_cancelled()). */
  cancellation?: Cancellation;
  /** A sampled request's trace: a Python model's BLS calls made with `trace=request.trace()` are its children. */
  trace?: RequestTrace;
}

/**
 * One request's responses from a decoupled model's instance: outputs (in the request's own batch
 * size), an error, or undefined for the final flag sent alone; `final` on the last one.
 */
export interface ResponseChannel {
  send(response: ExecOutput[] | Error | undefined, final: boolean, parameters?: Params): void;
}

/** Where the inputs of a batch lie in its reservation's buffer, and which outputs to compute. */
export interface ExecLayout {
  inputs: TensorSlot[];
  outputs: string[];
  /** The batch's requests in order (the scheduler always gives them; absent: one request). */
  requests?: BatchRequest[];
  /**
   * The model has no other request in the server: its client most likely sends the next one as
   * soon as this one is answered (concurrency 1). A Python instance then lets its stub poll for
   * the next message for a moment instead of sleeping, which spares it a wake-up (tens of µs on
   * a virtual machine); under load the stub sleeps, so polling never takes a core others need.
   */
  lone?: boolean;
}

/** One output of an execution; its bytes belong to the caller from then on. */
export interface ExecOutput {
  name: string;
  datatype: DataType;
  dims: number[];
  data: Uint8Array;
}

export interface ExecResult {
  outputs: ExecOutput[];
  /**
   * Set by a backend that answers each request of the batch on its own (Python): per request in
   * `ExecLayout.requests` order, its outputs (its own batch size) or its error. `outputs` is then
   * unused.
   */
  responses?: (ExecOutput[] | Error)[];
  /**
   * Indices (in `ExecLayout.requests`) of requests the model released with RESCHEDULE (a Python
   * model of an iterative sequence): not answered, the scheduler runs them again.
   */
  rescheduled?: readonly number[];
  /**
   * process.hrtime (ns) when the instance started the execution, where it can tell: a request
   * held inside a busy instance is still queued until then, as Triton counts it.
   */
  computeStartNs?: bigint;
  /** Durations measured inside the instance, in nanoseconds. */
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

/**
 * What an execution's failure may carry: the model ran and failed (it raised), with these
 * durations, which count as an execution in the statistics as Triton counts it.
 */
export interface ExecutionFailure {
  executed?: { computeInputNs: number; computeInferNs: number; computeOutputNs: number };
}

/** A submitted execution. */
export interface Execution {
  readonly result: Promise<ExecResult>;
  /**
   * True when it waits inside the instance behind another execution. Such an execution can be
   * withdrawn: withdraw() is true when it had not started, and `result` then rejects CANCELLED.
   */
  readonly held: boolean;
  withdraw(): boolean;
}

/**
 * Room for one execution in an instance: `buffer` is memory for its inputs (the batch is
 * assembled straight into it). Exactly one of execute() or release() ends it; the instance
 * holds the room until then, so an input buffer can never be handed to the wrong execution.
 */
export interface Reservation {
  readonly buffer: Uint8Array;
  execute(layout: ExecLayout): Execution;
  release(): void;
}

export interface ModelInstance {
  readonly placement: InstancePlacement;
  /**
   * Executions it accepts at once. Above 1, the next batch waits inside the instance while one
   * runs; it still runs them one at a time, in order.
   */
  readonly capacity: number;
  /** Room for the next execution with `byteLength` bytes of inputs; throws when it has none. */
  reserve(byteLength: number): Reservation;
  /**
   * Room for an execution whose inputs already lie in `memory`, which the caller gives up (the
   * request's own memory, InferRequest.ownMemory): the reservation's buffer is that memory, and
   * the instance may move it to where the model runs instead of copying it. Undefined when it
   * would rather have the inputs copied (small executions); throws as reserve() does.
   */
  adopt?(memory: ArrayBuffer): Reservation | undefined;
  close(): Promise<void>;
  /** Set by the model version: called each time the instance replaced its dead worker or process. */
  onRestart?: () => void;
}

/**
 * What the server offers a running instance: inference on any model it serves (Python BLS), each
 * request through that model's own checks and scheduler, as a client's would go.
 */
export interface InstanceHost {
  /** `parent`: the request is traced as a child of this trace (Triton's BLS `trace=request.trace()`). */
  infer(request: InferRequest, parent?: RequestTrace): Promise<InferResponse>;
  /** Any model, decoupled ones too: each response to `sink` as it comes (BLS exec(decoupled=True)). */
  stream(request: InferRequest, sink: ResponseSink, parent?: RequestTrace): void;
}

/** What a load needs to know about one model version. */
export interface ModelFiles {
  /** The model's folder in the repository (config.pbtxt, labels, warmup/). */
  modelDir: string;
  /** The version's model file: `<modelDir>/<version>/<default_model_filename>`. */
  modelPath: string;
}

export interface Backend<Settings = unknown> {
  /** The `backend` name a config gives, e.g. "onnxruntime". */
  readonly name: string;
  /** `platform` names that mean this backend, e.g. "onnxruntime_onnx". */
  readonly platforms: readonly string[];
  /** How error messages name the models it runs ("ONNX"). */
  readonly displayName: string;
  /** default_model_filename when the config gives none. */
  readonly defaultModelFilename: string;
  /**
   * Inputs and outputs of a model file, read once per load before anything starts. Undefined when
   * the model has no file that declares them (Python): the config is then all there is.
   */
  readSignature(files: ModelFiles): Promise<ModelSignature | undefined>;
  /** A completed copy of `config` (never modifies it), as the backend's auto-complete does. */
  autoComplete(config: ModelConfig, signature: ModelSignature | undefined, files: ModelFiles): ModelConfig | Promise<ModelConfig>;
  /**
   * True when BYTES elements can only pass as UTF-8 text (ONNX Runtime's string tensors are JS
   * strings): requests with other bytes are refused rather than answered with altered data.
   */
  readonly utf8BytesOnly?: boolean;
  /**
   * True when a response lists outputs in the order the model made them (a Python model's
   * output_tensors), as Triton's backend adds them; else in the config's (or request's) order.
   */
  readonly outputsInModelOrder?: boolean;
  /**
   * The instance groups as the config endpoints report them, one placement per instance, and the
   * settings every instance starts with. Throws, naming what is missing, when a placement cannot
   * be had here (a GPU, a runtime library).
   */
  placeInstances(config: ModelConfig): PlacedInstances<Settings>;
  startInstance(placement: InstancePlacement, settings: Settings, files: ModelFiles, host: InstanceHost): Promise<ModelInstance>;
}
