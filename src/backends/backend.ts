// The contract between the scheduler and a backend. A backend turns a model version's
// config and files into instances; an instance executes one assembled batch at a time.
import type { DataType } from '../core/datatypes.js';

/** One tensor inside a batch buffer: `byteLength` bytes at `offset`. */
export interface TensorSlot {
  name: string;
  datatype: DataType;
  dims: number[];
  offset: number;
  byteLength: number;
}

/** A batch ready to run: every input lives in `data`, at its slot's offset. */
export interface ExecRequest {
  data: Uint8Array;
  inputs: TensorSlot[];
  outputs: string[];
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
   * process.hrtime (ns) when the instance started the execution, where it can tell: a request
   * held inside a busy instance is still queued until then, as Triton counts it.
   */
  computeStartNs?: bigint;
  /** Durations measured inside the instance, in nanoseconds. */
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

export interface InstancePlacement {
  /** Triton's instance name: `<group name>_<index within group>`. */
  name: string;
  kind: 'KIND_CPU' | 'KIND_GPU';
  /** CUDA device id for KIND_GPU, -1 for CPU. */
  deviceId: number;
}

export interface ModelInstance {
  readonly placement: InstancePlacement;
  /**
   * Memory for the inputs of the next execution (the batch is assembled straight into it), valid
   * until that execution settles. Called right before that execute(), when the instance has room
   * for it. Instances without it take any buffer.
   */
  inputBuffer?(byteLength: number): Uint8Array;
  /**
   * Executions it accepts at once (default 1). Above 1, the next batch waits inside the instance
   * while one runs; it still runs them one at a time, in order.
   */
  readonly capacity?: number;
  /**
   * Runs one batch. When the batch has to wait inside the instance behind another execution,
   * `onHeld` receives a function that withdraws it if it has not started (true when withdrawn);
   * a withdrawn execution rejects with a CANCELLED error.
   */
  execute(req: ExecRequest, onHeld?: (withdraw: () => boolean) => void): Promise<ExecResult>;
  close(): Promise<void>;
}

/** Input/output signature read from the model file, for config validation. */
export interface IoSignature {
  name: string;
  datatype: DataType | undefined;
  /** Raw element type as the runtime names it (for error messages about unsupported types). */
  rawType: string;
  /** -1 for symbolic/unknown dimensions; undefined when the rank is unknown. */
  dims: number[] | undefined;
}

export interface ModelSignature {
  inputs: IoSignature[];
  outputs: IoSignature[];
}
