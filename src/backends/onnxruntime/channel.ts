// The shared memory between the main thread and one instance worker. A postMessage round trip
// costs the main thread ~50 µs plus a MessagePort dispatch per execution; request/reply slots in
// SharedArrayBuffers and futex wakes (Atomics.notify / waitAsync) do the same for a fraction.
//
// An instance has SLOTS slots, so later requests can wait in the worker while one runs: the
// worker starts each without waiting for the (busy) main thread to notice the previous reply.
// Under load the main thread reacts to replies in bursts; with 2 slots the worker idled between
// them (simple@16: 1.6 ms of 2 ms in the queue), with 8 it keeps running (60 µs).
// Commands carry a sequence number s and use slot s % SLOTS; the worker runs them in order.
// Per slot:
// `control` (fixed size): Int32 words, then a Float64 header describing the tensors.
// `arena` (grows): tensor bytes. The main thread assembles a batch's inputs straight into it;
// the worker writes the outputs back into it (inputs are dead once the run has finished).
// Whichever side outgrows an arena allocates a bigger one and hands it over on the instance's
// MessagePort ({ slot, arena }), raising FLAG_NEW_ARENA; the other side takes every waiting
// message with receiveMessageOnPort before it reads the slot.
import { DATATYPES, type DataType } from '../../kernel/datatypes.js';

export const SLOTS = 8;

/** Int32 word indexes in a slot's `control`. */
export const REQ_SEQ = 0; // the command's sequence number
export const REP_SEQ = 1; // set to the command's REQ_SEQ by the worker when done
export const OP = 2;
export const STATUS = 3;
export const FLAGS = 4;
/** Slot 0 only: the last sequence number submitted; the worker looks at it when its bell rings (host.ts). */
export const DOORBELL = 5;
/**
 * Slot 0 only: the last sequence number finished; the main thread waits on it with one
 * waitAsync per instance, so replies that land while it is busy cost one wake-up together.
 */
export const DONE = 6;
const CTRL_WORDS = 8;

export const OP_EXEC = 1;
export const OP_CLOSE = 2;
/** The worker claims a command by swapping OP_EXEC for OP_TAKEN ... */
export const OP_TAKEN = 3;
/** ... unless the main thread withdrew it first (swapped in OP_WITHDRAWN). */
export const OP_WITHDRAWN = 4;
export const STATUS_OK = 0;
export const STATUS_ERROR = 1;
export const STATUS_WITHDRAWN = 2;
/** The run failed because of the request's data (client_faults.ts); the error text says why. */
export const STATUS_INVALID = 3;
/** The sender posted a new arena on the port before this command / reply. */
export const FLAG_NEW_ARENA = 1;
/** The worker posted this execution's outputs on the port (each tensor's offset is into its own buffer). */
export const FLAG_OUTPUTS_TRANSFERRED = 2;

const HEADER_DOUBLES = 8192;
export const CONTROL_BYTES = CTRL_WORDS * 4 + HEADER_DOUBLES * 8;
export const ALIGN = 64;
/** Small, so an idle instance holds little (SLOTS of them); arenas grow on first use and stay grown. */
export const INITIAL_ARENA = 1 << 12;
/**
 * Executions above this size skip the arenas where they can: the inputs are assembled into memory
 * of the execution's own and transferred to the worker (ONNX Runtime cannot read a
 * SharedArrayBuffer, so an arena costs the worker one more copy), and the outputs come back
 * transferred as ONNX Runtime returned them. An arena that grew past it anyway serves one
 * execution only: both sides drop it afterwards (the main thread keeps it as that execution's
 * outputs and gives the slot a small one), so one large request does not pin its size for good.
 */
export const LARGE_ARENA = 16 << 20;

export interface TensorDesc {
  /** Index into the session's input or output names. */
  index: number;
  datatype: DataType;
  dims: number[];
  offset: number;
  byteLength: number;
}

export interface ExecCommand {
  inputs: TensorDesc[];
  /** Output indexes to fetch. */
  outputs: number[];
}

export interface ExecReply {
  outputs: TensorDesc[];
  /** process.hrtime of the moment the worker started the execution (the same clock in every thread). */
  startNs: number;
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

export const alignUp = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;

/** The arena size to allocate for `need` bytes: powers of two, so growth is rare. */
export function arenaSize(need: number): number {
  let size = INITIAL_ARENA;
  while (size < need) size *= 2;
  return size;
}

export class Control {
  readonly words: Int32Array;
  private readonly header: Float64Array;
  private readonly headerBytes: Uint8Array;

  constructor(
    readonly sab: SharedArrayBuffer,
    offset = 0,
  ) {
    this.words = new Int32Array(sab, offset, CTRL_WORDS);
    this.header = new Float64Array(sab, offset + CTRL_WORDS * 4, HEADER_DOUBLES);
    this.headerBytes = new Uint8Array(sab, offset + CTRL_WORDS * 4, HEADER_DOUBLES * 8);
  }

  static create(): Control {
    return new Control(new SharedArrayBuffer(CONTROL_BYTES));
  }

  /**
   * The controls of `n` slots, in one SharedArrayBuffer. One allocation of n × 64 KiB is mapped
   * lazily (only the pages a command or reply touches become resident), where n allocations of
   * 64 KiB each came zero-filled from the heap: 512 KiB resident per instance, most of the
   * memory of an idle small model (measured by tools/bench/density.ts).
   */
  static slots(n: number, sab = new SharedArrayBuffer(n * CONTROL_BYTES)): Control[] {
    return Array.from({ length: n }, (_, i) => new Control(sab, i * CONTROL_BYTES));
  }

  writeCommand(cmd: ExecCommand): void {
    let p = this.putTensors(0, cmd.inputs);
    this.header[p++] = cmd.outputs.length;
    for (const o of cmd.outputs) this.header[p++] = o;
  }

  readCommand(): ExecCommand {
    const [inputs, p0] = this.getTensors(0);
    let p = p0;
    const n = this.header[p++]!;
    const outputs: number[] = [];
    for (let i = 0; i < n; i++) outputs.push(this.header[p++]!);
    return { inputs, outputs };
  }

  writeReply(r: ExecReply): void {
    this.header[0] = r.computeInputNs;
    this.header[1] = r.computeInferNs;
    this.header[2] = r.computeOutputNs;
    this.header[3] = r.startNs;
    this.putTensors(4, r.outputs);
  }

  readReply(): ExecReply {
    const [outputs] = this.getTensors(4);
    return {
      outputs,
      startNs: this.header[3]!,
      computeInputNs: this.header[0]!,
      computeInferNs: this.header[1]!,
      computeOutputNs: this.header[2]!,
    };
  }

  writeError(message: string): void {
    const room = this.headerBytes.subarray(8);
    const { written } = new TextEncoder().encodeInto(message, room);
    this.header[0] = written;
  }

  readError(): string {
    return new TextDecoder().decode(this.headerBytes.slice(8, 8 + this.header[0]!));
  }

  private putTensors(start: number, ts: TensorDesc[]): number {
    let need = start + 1;
    for (const t of ts) need += 5 + t.dims.length;
    if (need + 64 > HEADER_DOUBLES) throw new Error(`too many tensors or dimensions for one execution (${ts.length} tensors)`);
    let p = start;
    this.header[p++] = ts.length;
    for (const t of ts) {
      this.header[p++] = t.index;
      this.header[p++] = DATATYPES.indexOf(t.datatype);
      this.header[p++] = t.offset;
      this.header[p++] = t.byteLength;
      this.header[p++] = t.dims.length;
      for (const d of t.dims) this.header[p++] = d;
    }
    return p;
  }

  private getTensors(start: number): [TensorDesc[], number] {
    let p = start;
    const n = this.header[p++]!;
    const out: TensorDesc[] = [];
    for (let i = 0; i < n; i++) {
      const index = this.header[p++]!;
      const datatype = DATATYPES[this.header[p++]!]!;
      const offset = this.header[p++]!;
      const byteLength = this.header[p++]!;
      const rank = this.header[p++]!;
      const dims: number[] = [];
      for (let d = 0; d < rank; d++) dims.push(this.header[p++]!);
      out.push({ index, datatype, dims, offset, byteLength });
    }
    return [out, p];
  }
}

type WaitAsync = (a: Int32Array, index: number, value: number) => { async: false; value: string } | { async: true; value: Promise<string> };

/** Resolves once `words[index]` is no longer `value` (Atomics.waitAsync: Node ≥ 16, typed in TS's ES2024 lib). */
export function whenChanged(words: Int32Array, index: number, value: number): Promise<unknown> | undefined {
  const r = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync(words, index, value);
  return r.async ? r.value : undefined;
}
