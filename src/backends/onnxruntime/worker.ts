// A worker thread hosting ONNX Runtime sessions: one (an instance of its own) or many (small
// models sharing the worker, host.ts). session.run blocks the thread that calls it, so it must
// never run on the main thread. Commands and tensors arrive through each session's shared memory
// (channel.ts); between commands the thread sleeps in Atomics.wait on the worker's bell.
import { readFileSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { bytesToStrings, type DataType, elementCount, elementSize, fromOrtType, joinBytes, typedView } from '../../kernel/datatypes.js';
import { freeNow } from '../../kernel/memory.js';
import {
  alignUp,
  arenaSize,
  Control,
  DONE,
  DOORBELL,
  type ExecCommand,
  FLAG_NEW_ARENA,
  FLAG_OUTPUTS_TRANSFERRED,
  FLAGS,
  LARGE_ARENA,
  OP,
  OP_CLOSE,
  OP_EXEC,
  OP_TAKEN,
  REP_SEQ,
  SLOTS,
  STATUS,
  STATUS_ERROR,
  STATUS_INVALID,
  STATUS_OK,
  STATUS_WITHDRAWN,
  type TensorDesc,
} from './channel.js';
import { stringFaultText } from './client_faults.js';
import { type DeclaredDim, knownDims } from './output_shapes.js';
import type { ArenaMessage, FromWorker, ToWorker, WorkerData } from './protocol.js';
import { sessionSignature } from './session_signature.js';

const data = workerData as WorkerData;
const bell = new Int32Array(data.bell);

/** One session hosted here, with its channel (channel.ts). */
interface Hosted {
  id: number;
  /** The model's name (its directory), for error texts and the kill hook. */
  model: string;
  session: ort.InferenceSession;
  controls: Control[];
  arenas: SharedArrayBuffer[];
  port: MessagePort;
  /** A large execution's own input memory, by slot, transferred by the main thread instead of an arena. */
  ownInputs: (ArrayBuffer | undefined)[];
  /** The sequence number of its next command (slot next % SLOTS). */
  next: number;
  /** Each input's shape as the model declares it (undefined: not a tensor). */
  inputShapes: (readonly DeclaredDim[] | undefined)[];
  /** Each output's type and declared shape (undefined: not a tensor). */
  outputTypes: ({ type: string; shape: readonly DeclaredDim[] } | undefined)[];
  /** Run options: quiet for a model with string inputs (QUIET_RUN), else none. */
  runOptions: ort.InferenceSession.RunOptions | undefined;
}

/**
 * ONNX Runtime prints an error line of its own for every failed run. A model with string inputs
 * fails on the client's data (a Cast of a non-number), which is answered 400 and is no fault to
 * log; every other failure is logged by the server itself, with the request id.
 */
const QUIET_RUN: ort.InferenceSession.RunOptions = { logSeverityLevel: 4 };

/** A failed run that the request's data caused (client_faults.ts): answered INVALID_ARGUMENT. */
class ClientFault extends Error {}

/** By id, in the order opened: the scan order of the loop in main(). */
const hosted = new Map<number, Hosted>();
/** The arena of the command being run. */
let arena = new SharedArrayBuffer(0);

/** Takes every replacement arena (and large execution's inputs) the main thread has posted. */
function takeArenas(h: Hosted): void {
  for (let m = receiveMessageOnPort(h.port); m; m = receiveMessageOnPort(h.port)) {
    const msg = m.message as ArenaMessage;
    if ('arena' in msg) h.arenas[msg.slot] = msg.arena;
    else if ('input' in msg) h.ownInputs[msg.slot] = msg.input;
  }
}

/**
 * Test hook for crash recovery (tests and tools/soak only; no request can reach it): with
 * SERVAL_TEST_KILL_WORKER_FILE set in the server's environment, a worker about to run an execution
 * checks that file; when it holds the execution's model name, the worker removes the file and
 * exits at once, as a worker that died would (with every session it hosts).
 */
const killFile = process.env.SERVAL_TEST_KILL_WORKER_FILE;

function killRequested(model: string): boolean {
  if (!killFile) return false;
  try {
    if (readFileSync(killFile, 'utf8').trim() !== model) return false;
    unlinkSync(killFile); // only one worker takes it
    return true;
  } catch {
    return false;
  }
}

function post(msg: FromWorker): void {
  parentPort!.postMessage(msg);
}

/**
 * onnxruntime-node refuses tensors over a SharedArrayBuffer ("Invalid argument"), so inputs are
 * copied (one bulk copy per batch) into this thread's own memory, reused from run to run.
 */
let scratch = new ArrayBuffer(0);

function toTensors(session: ort.InferenceSession, inputs: TensorDesc[], own: ArrayBuffer | undefined): Record<string, ort.Tensor> {
  // Inputs of their own are read where they are; else the slots keep their arena offsets and one
  // copy of the used range serves every input.
  let source = own;
  if (!source) {
    let used = 0;
    for (const t of inputs) used = Math.max(used, t.offset + t.byteLength);
    if (used > scratch.byteLength) scratch = new ArrayBuffer(arenaSize(used));
    new Uint8Array(scratch, 0, used).set(new Uint8Array(arena, 0, used));
    source = scratch;
  }
  const feeds: Record<string, ort.Tensor> = {};
  for (const t of inputs) {
    const name = session.inputNames[t.index]!;
    const bytes = new Uint8Array(source, t.offset, t.byteLength);
    if (t.datatype === 'BYTES') {
      const strings = bytesToStrings(bytes, name);
      feeds[name] = new ort.Tensor('string', strings, t.dims);
    } else {
      feeds[name] = new ort.Tensor(ortType(t.datatype), typedView(t.datatype, bytes) as never, t.dims);
    }
  }
  return feeds;
}

function ortType(dt: Exclude<DataType, 'BYTES'>): Exclude<ort.Tensor.Type, 'string' | 'int4' | 'uint4'> {
  switch (dt) {
    case 'BOOL':
      return 'bool';
    case 'FP16':
      return 'float16';
    case 'FP32':
      return 'float32';
    case 'FP64':
      return 'float64';
    default:
      return dt.toLowerCase() as 'int32';
  }
}

function bytesOf(name: string, t: ort.Tensor): { datatype: DataType; bytes: Uint8Array } {
  const datatype = fromOrtType(t.type);
  if (!datatype) throw new Error(`output '${name}' has ONNX type '${t.type}', which Serval cannot return`);
  if (datatype === 'BYTES') return { datatype, bytes: joinBytes(t.data as string[]) };
  const v = t.data as ArrayBufferView;
  return { datatype, bytes: new Uint8Array(v.buffer, v.byteOffset, v.byteLength) };
}

/** Copies the outputs into the arena (from offset 0: the inputs are no longer needed), growing it if they do not fit. */
function placeOutputs(h: Hosted, slot: number, names: string[], fetched: ort.InferenceSession.ReturnType, indexes: number[]): TensorDesc[] {
  const parts = names.map((n) => ({ name: n, ...bytesOf(n, fetched[n]!), dims: [...fetched[n]!.dims] }));
  let need = 0;
  for (const p of parts) need = alignUp(need) + p.bytes.byteLength;
  if (need > LARGE_ARENA) {
    const moved = transferOutputs(h, slot, parts, indexes);
    if (moved) return moved;
  }
  if (need > arena.byteLength) {
    arena = h.arenas[slot] = new SharedArrayBuffer(arenaSize(need));
    h.port.postMessage({ slot, arena } satisfies ArenaMessage);
    Atomics.or(h.controls[slot]!.words, FLAGS, FLAG_NEW_ARENA);
  }
  const out = new Uint8Array(arena);
  let off = 0;
  return parts.map((p, i) => {
    off = alignUp(off);
    out.set(p.bytes, off);
    const desc: TensorDesc = { index: indexes[i]!, datatype: p.datatype, dims: p.dims, offset: off, byteLength: p.bytes.byteLength };
    off += p.bytes.byteLength;
    return desc;
  });
}

/**
 * Hands large outputs to the main thread as they are (transferred, no copy into the arena), when
 * each owns its memory alone; undefined when they cannot go that way.
 */
function transferOutputs(
  h: Hosted,
  slot: number,
  parts: { datatype: DataType; bytes: Uint8Array; dims: number[] }[],
  indexes: number[],
): TensorDesc[] | undefined {
  const buffers = parts.map((p) => p.bytes.buffer);
  const alone = parts.every((p) => p.bytes.buffer instanceof ArrayBuffer && p.bytes.byteLength === p.bytes.buffer.byteLength);
  if (!alone || new Set(buffers).size !== buffers.length) return undefined;
  // Described before the transfer, which leaves these views empty.
  const descs = parts.map((p, i) => ({
    index: indexes[i]!,
    datatype: p.datatype,
    dims: p.dims,
    offset: 0,
    byteLength: p.bytes.byteLength,
  }));
  try {
    h.port.postMessage({ slot, outputs: buffers as ArrayBuffer[] } satisfies ArenaMessage, buffers as ArrayBuffer[]);
  } catch {
    return undefined; // not transferable (memory onnxruntime keeps): copied into the arena instead
  }
  Atomics.or(h.controls[slot]!.words, FLAGS, FLAG_NEW_ARENA | FLAG_OUTPUTS_TRANSFERRED);
  return descs;
}

/**
 * Memory of its own for every output of a large execution, when each output's shape is known
 * before the run (output_shapes.ts): ONNX Runtime then writes the outputs there instead of into
 * a block of its allocator, which would stay as large as the largest output for good.
 */
function preallocate(h: Hosted, cmd: ExecCommand, names: string[]): Record<string, ort.Tensor> | undefined {
  const inputs = cmd.inputs.map((t) => ({ declared: h.inputShapes[t.index] ?? [], dims: t.dims }));
  const planned: { name: string; datatype: Exclude<DataType, 'BYTES'>; dims: number[] }[] = [];
  let total = 0;
  for (const [k, name] of names.entries()) {
    const meta = h.outputTypes[cmd.outputs[k]!];
    const datatype = meta && fromOrtType(meta.type as ort.Tensor.Type);
    const dims = meta && knownDims(inputs, meta.shape);
    if (!datatype || datatype === 'BYTES' || !dims) return undefined;
    planned.push({ name, datatype, dims });
    total += elementCount(dims) * elementSize(datatype);
  }
  if (total <= LARGE_ARENA) return undefined;
  const out: Record<string, ort.Tensor> = {};
  for (const p of planned) {
    const bytes = new Uint8Array(elementCount(p.dims) * elementSize(p.datatype));
    out[p.name] = new ort.Tensor(ortType(p.datatype), typedView(p.datatype, bytes) as never, p.dims);
  }
  return out;
}

/** Runs the session; into preallocated outputs when there are some and the model's shapes hold. */
async function run(
  h: Hosted,
  feeds: Record<string, ort.Tensor>,
  names: string[],
  given: Record<string, ort.Tensor> | undefined,
): Promise<ort.InferenceSession.ReturnType> {
  if (given) {
    try {
      const got = await h.session.run(feeds, given, h.runOptions);
      // onnxruntime-node (1.30) also returns a copy of each output it wrote into our memory:
      // ours is the output, the copy goes at once.
      for (const n of names) {
        const copy = (got[n]?.data as ArrayBufferView | undefined)?.buffer;
        if (copy && copy !== (given[n]!.data as ArrayBufferView).buffer) freeNow(copy);
      }
      return given;
    } catch (e) {
      // The shapes the model declares did not hold for this run: ONNX Runtime allocates instead.
      if (!/OrtValue provided for output/.test(String((e as Error).message))) throw e;
    }
  }
  return h.session.run(feeds, names, h.runOptions);
}

/** A run's failure as the client's fault when its BYTES data caused it (client_faults.ts). */
function explain(e: unknown, h: Hosted, feeds: Record<string, ort.Tensor>): unknown {
  if (!(e instanceof Error)) return e;
  const strings = Object.entries(feeds)
    .filter(([, t]) => t.type === 'string')
    .map(([name, t]) => ({ name, strings: t.data as string[] }));
  const text = stringFaultText(e.message, strings, h.model);
  return text ? new ClientFault(text) : e;
}

async function exec(h: Hosted, slot: number, cmd: ExecCommand): Promise<void> {
  const session = h.session;
  const t0 = process.hrtime.bigint();
  const own = h.ownInputs[slot];
  h.ownInputs[slot] = undefined;
  try {
    const feeds = toTensors(session, cmd.inputs, own);
    const names = cmd.outputs.map((i) => session.outputNames[i]!);
    const given = own ? preallocate(h, cmd, names) : undefined;
    const t1 = process.hrtime.bigint();
    let fetched: ort.InferenceSession.ReturnType;
    try {
      fetched = await run(h, feeds, names, given);
    } catch (e) {
      throw explain(e, h, feeds);
    }
    const t2 = process.hrtime.bigint();
    const outputs = placeOutputs(h, slot, names, fetched, cmd.outputs);
    const t3 = process.hrtime.bigint();
    h.controls[slot]!.writeReply({
      outputs,
      startNs: Number(t0),
      computeInputNs: Number(t1 - t0),
      computeInferNs: Number(t2 - t1),
      computeOutputNs: Number(t3 - t2),
    });
  } finally {
    // A large execution's own input memory: nothing reads it after the run.
    if (own) freeNow(own);
  }
}

async function open(msg: Extract<ToWorker, { type: 'open' }>): Promise<void> {
  const settings = msg.settings;
  const options: ort.InferenceSession.SessionOptions = {
    intraOpNumThreads: settings.intraOpThreads,
    interOpNumThreads: settings.interOpThreads,
    graphOptimizationLevel: settings.graphOptimizationLevel,
    extra: { session: { intra_op: { allow_spinning: settings.allowSpinning ? '1' : '0' } } },
    executionProviders: settings.cudaDeviceId >= 0 ? [{ name: 'cuda', deviceId: settings.cudaDeviceId }] : ['cpu'],
  };
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(settings.modelPath, options);
  } catch (e) {
    msg.port.close();
    post({ type: 'init-error', id: msg.id, message: e instanceof Error ? e.message : String(e) });
    return;
  }
  hosted.set(msg.id, {
    id: msg.id,
    model: settings.modelName ?? path.basename(path.dirname(path.dirname(settings.modelPath))),
    session,
    controls: Control.slots(SLOTS, msg.controls),
    arenas: [...msg.arenas],
    port: msg.port,
    ownInputs: [],
    next: 1,
    inputShapes: session.inputMetadata.map((m) => (m.isTensor ? m.shape : undefined)),
    outputTypes: session.outputMetadata.map((m) => (m.isTensor ? { type: m.type, shape: m.shape } : undefined)),
    runOptions: session.inputMetadata.some((m) => m.isTensor && m.type === 'string') ? QUIET_RUN : undefined,
  });
  post({
    type: 'ready',
    id: msg.id,
    signature: { inputs: sessionSignature(session.inputMetadata), outputs: sessionSignature(session.outputMetadata) },
  });
}

/** Runs `h`'s next command (its doorbell says it was submitted), or closes it. */
async function step(h: Hosted): Promise<void> {
  const slot = h.next % SLOTS;
  const control = h.controls[slot]!;
  const words = control.words;
  if (Atomics.load(words, OP) === OP_CLOSE) {
    hosted.delete(h.id);
    await h.session.release().catch(() => undefined);
    h.port.close();
    post({ type: 'closed', id: h.id });
    return;
  }
  if (Atomics.load(words, FLAGS) & FLAG_NEW_ARENA) takeArenas(h);
  Atomics.store(words, FLAGS, 0);
  arena = h.arenas[slot]!;
  if (Atomics.compareExchange(words, OP, OP_EXEC, OP_TAKEN) !== OP_EXEC) {
    // Withdrawn by the main thread before it started (its request was cancelled).
    Atomics.store(words, STATUS, STATUS_WITHDRAWN);
  } else {
    if (killRequested(h.model)) process.exit(70); // ends this thread only
    try {
      await exec(h, slot, control.readCommand());
      Atomics.store(words, STATUS, STATUS_OK);
    } catch (e) {
      control.writeError(e instanceof Error ? e.message : String(e));
      Atomics.store(words, STATUS, e instanceof ClientFault ? STATUS_INVALID : STATUS_ERROR);
    }
  }
  // The main thread keeps a large arena as the outputs and sends a small one for the slot's
  // next command; dropping ours (and a large input copy) lets the memory go once they are answered.
  if (arena.byteLength > LARGE_ARENA) arena = h.arenas[slot] = new SharedArrayBuffer(0);
  const left = h.ownInputs[slot]; // a withdrawn command's
  h.ownInputs[slot] = undefined;
  if (left) freeNow(left);
  if (scratch.byteLength > LARGE_ARENA) scratch = new ArrayBuffer(0);
  const door = h.controls[0]!.words;
  Atomics.store(words, REP_SEQ, h.next);
  Atomics.store(door, DONE, h.next);
  Atomics.notify(door, DONE);
  h.next++;
}

/**
 * The worker's loop: whenever the bell rang, take the main thread's messages, then run at most one
 * command of each session that has one (in the order opened, so a busy session cannot starve the
 * others), until a pass finds nothing; then sleep on the bell. Commands of one session run in
 * submission order: sequence number `next` is in slot next % SLOTS.
 */
async function main(): Promise<void> {
  for (;;) {
    const rung = Atomics.load(bell, 0);
    let exit = false;
    for (let m = receiveMessageOnPort(data.port); m; m = receiveMessageOnPort(data.port)) {
      const msg = m.message as ToWorker;
      if (msg.type === 'open') await open(msg);
      else exit = true;
    }
    if (exit && !hosted.size) break;
    let worked = false;
    for (const h of hosted.values()) {
      if (Atomics.load(h.controls[0]!.words, DOORBELL) < h.next) continue;
      worked = true;
      await step(h);
    }
    // Atomics.wait can return before the value changes (V8 wakes waiters to run interrupts): the
    // next pass then finds nothing and waits again.
    if (!worked) Atomics.wait(bell, 0, rung);
  }
  data.port.close();
}

void main();
