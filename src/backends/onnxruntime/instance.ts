// The main-thread side of one ONNX Runtime instance: owns the worker and the shared-memory
// channel to it (channel.ts), and turns a reply into outputs the caller owns.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { ServalError } from '../../core/errors.js';
import { projectRoot } from '../../paths.js';
import type { ExecRequest, ExecResult, InstancePlacement, ModelInstance, ModelSignature } from '../backend.js';
import {
  arenaSize, Control, FLAG_NEW_ARENA, FLAGS, INITIAL_ARENA, OP, OP_CLOSE, OP_EXEC, REP_SEQ, REQ_SEQ, STATUS, STATUS_OK, whenChanged,
} from './channel.js';
import type { ArenaMessage, FromWorker, SessionSettings, WorkerData } from './protocol.js';

function workerFile(): string {
  const here = fileURLToPath(import.meta.url);
  const sibling = path.join(path.dirname(here), 'worker.js');
  if (existsSync(sibling)) return sibling;
  // Running from TypeScript sources (tests): use the compiled worker.
  return path.join(projectRoot(), 'dist', 'src', 'backends', 'onnxruntime', 'worker.js');
}

/**
 * Node has had bugs where an Atomics.waitAsync wake-up is not delivered until something else
 * wakes the event loop (nodejs/node#44729, #61941). While executions are pending, a slow timer
 * re-checks them, so a lost wake-up costs milliseconds instead of hanging a request.
 */
class Watchdog {
  private readonly watched = new Set<OrtInstance>();
  private timer: NodeJS.Timeout | undefined;
  /** Replies found by the timer after their wake-up failed to arrive within a tick. */
  rescued = 0;

  add(inst: OrtInstance): void {
    this.watched.add(inst);
    this.timer ??= setInterval(() => this.check(), 10);
  }

  private check(): void {
    for (const inst of this.watched) {
      if (inst.rescue()) this.rescued++;
      if (!inst.waiting) this.watched.delete(inst);
    }
    if (!this.watched.size) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}

export const watchdog = new Watchdog();

interface Pending {
  resolve: (r: ExecResult) => void;
  reject: (e: Error) => void;
}

export class OrtInstance implements ModelInstance {
  private pending: Pending | undefined;
  private seq = 0;
  private dead: string | undefined;
  private arenaSent = false;
  private unnoticed = 0;
  private readonly inputIndex: Map<string, number>;
  private readonly outputIndex: Map<string, number>;

  private constructor(
    readonly placement: InstancePlacement,
    private readonly worker: Worker,
    readonly signature: ModelSignature,
    private readonly control: Control,
    private arena: SharedArrayBuffer,
    private readonly port: MessagePort,
  ) {
    this.inputIndex = new Map(signature.inputs.map((s, i) => [s.name, i]));
    this.outputIndex = new Map(signature.outputs.map((s, i) => [s.name, i]));
    worker.on('error', (e) => this.fail(`instance ${placement.name} failed: ${e.message}`));
    worker.on('exit', (code) => this.fail(`instance ${placement.name} exited (code ${code})`));
  }

  static start(placement: InstancePlacement, settings: SessionSettings): Promise<OrtInstance> {
    return new Promise((resolve, reject) => {
      const control = Control.create();
      const arena = new SharedArrayBuffer(INITIAL_ARENA);
      const { port1, port2 } = new MessageChannel();
      const data: WorkerData = { settings, control: control.sab, arena, port: port2 };
      const worker = new Worker(workerFile(), { workerData: data, transferList: [port2] });
      const onEarly = (msg: FromWorker): void => {
        cleanup();
        if (msg.type === 'ready') resolve(new OrtInstance(placement, worker, msg.signature, control, arena, port1));
        else {
          port1.close();
          void worker.terminate();
          reject(ServalError.invalidArg(msg.message));
        }
      };
      const onError = (e: Error): void => {
        cleanup();
        port1.close();
        reject(ServalError.internal(`instance ${placement.name} failed to start: ${e.message}`));
      };
      const onExit = (code: number): void => {
        cleanup();
        port1.close();
        reject(ServalError.internal(`instance ${placement.name} exited during start (code ${code})`));
      };
      const cleanup = (): void => {
        worker.off('message', onEarly);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      worker.on('message', onEarly);
      worker.on('error', onError);
      worker.on('exit', onExit);
    });
  }

  inputBuffer(byteLength: number): Uint8Array {
    if (byteLength > this.arena.byteLength) {
      this.arena = new SharedArrayBuffer(arenaSize(byteLength));
      this.port.postMessage({ arena: this.arena } satisfies ArenaMessage);
      this.arenaSent = true;
    }
    return new Uint8Array(this.arena, 0, byteLength);
  }

  execute(req: ExecRequest): Promise<ExecResult> {
    if (this.dead) return Promise.reject(ServalError.internal(this.dead));
    if (this.pending) return Promise.reject(ServalError.internal(`instance ${this.placement.name} is already executing`));
    let inputs;
    let outputs;
    try {
      // Inputs assembled elsewhere (warm-up samples) are copied in.
      if (req.data.buffer !== this.arena || req.data.byteOffset !== 0) this.inputBuffer(req.data.byteLength).set(req.data);
      inputs = req.inputs.map((t) => ({ index: this.index(this.inputIndex, t.name, 'input'), datatype: t.datatype, dims: t.dims, offset: t.offset, byteLength: t.byteLength }));
      outputs = req.outputs.map((n) => this.index(this.outputIndex, n, 'output'));
      this.control.writeCommand({ inputs, outputs });
    } catch (e) {
      return Promise.reject(e);
    }
    const words = this.control.words;
    Atomics.store(words, FLAGS, this.arenaSent ? FLAG_NEW_ARENA : 0);
    this.arenaSent = false;
    Atomics.store(words, OP, OP_EXEC);
    const seq = ++this.seq;
    const result = new Promise<ExecResult>((resolve, reject) => (this.pending = { resolve, reject }));
    Atomics.store(words, REQ_SEQ, seq);
    Atomics.notify(words, REQ_SEQ);
    const wait = whenChanged(words, REP_SEQ, seq - 1);
    if (wait) {
      void wait.then(() => this.onReply(seq));
      watchdog.add(this);
    } else this.onReply(seq);
    return result;
  }

  async close(): Promise<void> {
    if (this.dead) return;
    this.dead = `instance ${this.placement.name} is closed`;
    const exited = new Promise<void>((r) => this.worker.once('exit', () => r()));
    const words = this.control.words;
    Atomics.store(words, OP, OP_CLOSE);
    Atomics.store(words, REQ_SEQ, ++this.seq);
    Atomics.notify(words, REQ_SEQ);
    const timer = setTimeout(() => void this.worker.terminate(), 5000);
    await exited;
    clearTimeout(timer);
    this.port.close();
  }

  private index(map: Map<string, number>, name: string, what: string): number {
    const i = map.get(name);
    if (i === undefined) throw ServalError.internal(`model has no ${what} '${name}'`);
    return i;
  }

  /** The watchdog's check: true when an execution finished a whole tick ago and is still unnoticed. */
  rescue(): boolean {
    if (!this.pending || Atomics.load(this.control.words, REP_SEQ) !== this.seq) return false;
    if (this.unnoticed !== this.seq) {
      this.unnoticed = this.seq; // its wake-up may simply not have run yet
      return false;
    }
    this.onReply(this.seq);
    return true;
  }

  get waiting(): boolean {
    return this.pending !== undefined;
  }

  private onReply(seq: number): void {
    const p = this.pending;
    if (!p || seq !== this.seq || Atomics.load(this.control.words, REP_SEQ) !== seq) return;
    this.pending = undefined;
    const words = this.control.words;
    if (Atomics.load(words, FLAGS) & FLAG_NEW_ARENA) {
      this.arena = (receiveMessageOnPort(this.port)!.message as ArenaMessage).arena;
    }
    if (Atomics.load(words, STATUS) !== STATUS_OK) {
      p.reject(ServalError.internal(`onnxruntime execution failed: ${this.control.readError()}`));
      return;
    }
    const reply = this.control.readReply();
    const bytes = new Uint8Array(this.arena);
    p.resolve({
      // One bulk copy per output out of the arena, which the next execution reuses.
      outputs: reply.outputs.map((o) => ({
        name: this.signature.outputs[o.index]!.name,
        datatype: o.datatype,
        dims: o.dims,
        data: bytes.slice(o.offset, o.offset + o.byteLength),
      })),
      computeInputNs: reply.computeInputNs,
      computeInferNs: reply.computeInferNs,
      computeOutputNs: reply.computeOutputNs,
    });
  }

  private fail(reason: string): void {
    if (!this.dead) this.dead = reason;
    const p = this.pending;
    this.pending = undefined;
    p?.reject(ServalError.internal(reason));
  }
}
