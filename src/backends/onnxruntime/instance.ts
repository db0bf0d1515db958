// The main-thread side of one ONNX Runtime instance: owns the worker and the shared-memory
// channel to it (channel.ts), and turns a reply into outputs the caller owns.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from 'node:worker_threads';
import type { InstancePlacement } from '../../config/resolved.js';
import type { ModelSignature } from '../../config/signature.js';
import { ServalError } from '../../kernel/errors.js';
import { projectRoot } from '../../kernel/paths.js';
import type { ExecLayout, ExecResult, Execution, ModelInstance, Reservation } from '../backend.js';
import {
  arenaSize,
  Control,
  DONE,
  DOORBELL,
  FLAG_NEW_ARENA,
  FLAGS,
  INITIAL_ARENA,
  OP,
  OP_CLOSE,
  OP_EXEC,
  OP_WITHDRAWN,
  REP_SEQ,
  REQ_SEQ,
  SLOTS,
  STATUS,
  STATUS_OK,
  STATUS_WITHDRAWN,
  whenChanged,
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

  add(inst: OrtInstance): void {
    this.watched.add(inst);
    this.timer ??= setInterval(() => this.check(), 10);
  }

  private check(): void {
    for (const inst of this.watched) {
      inst.rescue();
      if (!inst.waiting) this.watched.delete(inst);
    }
    if (!this.watched.size) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}

const watchdog = new Watchdog();

interface Pending {
  resolve: (r: ExecResult) => void;
  reject: (e: Error) => void;
}

export class OrtInstance implements ModelInstance {
  /** Executions it accepts at once: one running, the next waiting in the worker. */
  readonly capacity = SLOTS;
  /** By sequence number. */
  private readonly pending = new Map<number, Pending>();
  /** Last sequence number submitted, and the last whose reply has been taken. */
  private submitted = 0;
  private consumed = 0;
  private dead: string | undefined;
  private readonly arenaSent: boolean[] = new Array<boolean>(SLOTS).fill(false);
  private unnoticed = 0;
  private listening = false;
  private reserved = false;
  private readonly inputIndex: Map<string, number>;
  private readonly outputIndex: Map<string, number>;

  private constructor(
    readonly placement: InstancePlacement,
    private readonly worker: Worker,
    readonly signature: ModelSignature,
    private readonly controls: Control[],
    private readonly arenas: SharedArrayBuffer[],
    private readonly port: MessagePort,
  ) {
    this.inputIndex = new Map(signature.inputs.map((s, i) => [s.name, i]));
    this.outputIndex = new Map(signature.outputs.map((s, i) => [s.name, i]));
    worker.on('error', (e) => this.fail(`instance ${placement.name} failed: ${e.message}`));
    worker.on('exit', (code) => this.fail(`instance ${placement.name} exited (code ${code})`));
  }

  static start(placement: InstancePlacement, settings: SessionSettings): Promise<OrtInstance> {
    return new Promise((resolve, reject) => {
      const controls = Array.from({ length: SLOTS }, () => Control.create());
      const arenas = Array.from({ length: SLOTS }, () => new SharedArrayBuffer(INITIAL_ARENA));
      const { port1, port2 } = new MessageChannel();
      const data: WorkerData = { settings, controls: controls.map((c) => c.sab), arenas, port: port2 };
      const worker = new Worker(workerFile(), { workerData: data, transferList: [port2] });
      const onEarly = (msg: FromWorker): void => {
        cleanup();
        if (msg.type === 'ready') resolve(new OrtInstance(placement, worker, msg.signature, controls, arenas, port1));
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

  /**
   * Room for the next execution: its slot's arena, grown when the inputs do not fit. One
   * reservation at a time: the next one takes the slot after it.
   */
  reserve(byteLength: number): Reservation {
    if (this.dead) throw ServalError.internal(this.dead);
    if (this.reserved) throw ServalError.internal(`instance ${this.placement.name} already has a reservation`);
    if (this.submitted - this.consumed >= SLOTS) {
      throw ServalError.internal(`instance ${this.placement.name} already has ${SLOTS} executions`);
    }
    const seq = this.submitted + 1;
    const slot = seq % SLOTS;
    if (byteLength > this.arenas[slot]!.byteLength) {
      this.arenas[slot] = new SharedArrayBuffer(arenaSize(byteLength));
      this.port.postMessage({ slot, arena: this.arenas[slot] } satisfies ArenaMessage);
      this.arenaSent[slot] = true;
    }
    this.reserved = true;
    let open = true;
    const close = (): void => {
      if (!open) throw ServalError.internal(`a reservation of instance ${this.placement.name} was used twice`);
      open = false;
      this.reserved = false;
    };
    return {
      buffer: new Uint8Array(this.arenas[slot]!, 0, byteLength),
      execute: (layout) => {
        close();
        return this.submit(seq, layout);
      },
      release: () => {
        if (open) close();
      },
    };
  }

  private submit(seq: number, layout: ExecLayout): Execution {
    const slot = seq % SLOTS;
    const control = this.controls[slot]!;
    const refused = (e: unknown): Execution => ({ result: Promise.reject(e), held: false, withdraw: () => false });
    if (this.dead) return refused(ServalError.internal(this.dead));
    try {
      const inputs = layout.inputs.map((t) => ({
        index: this.index(this.inputIndex, t.name, 'input'),
        datatype: t.datatype,
        dims: t.dims,
        offset: t.offset,
        byteLength: t.byteLength,
      }));
      const outputs = layout.outputs.map((n) => this.index(this.outputIndex, n, 'output'));
      control.writeCommand({ inputs, outputs });
    } catch (e) {
      return refused(e);
    }
    this.submitted = seq;
    const words = control.words;
    Atomics.store(words, FLAGS, this.arenaSent[slot] ? FLAG_NEW_ARENA : 0);
    this.arenaSent[slot] = false;
    Atomics.store(words, OP, OP_EXEC);
    Atomics.store(words, REQ_SEQ, seq);
    const held = this.pending.size > 0;
    const result = new Promise<ExecResult>((resolve, reject) => this.pending.set(seq, { resolve, reject }));
    this.ring(seq);
    this.listen();
    watchdog.add(this);
    return {
      result,
      held,
      withdraw: () => held && this.pending.has(seq) && Atomics.compareExchange(words, OP, OP_EXEC, OP_WITHDRAWN) === OP_EXEC,
    };
  }

  /**
   * Waits (one waitAsync at a time) for the worker to finish anything newer than what has been
   * taken, then takes every finished reply.
   */
  private listen(): void {
    const door = this.controls[0]!.words;
    while (!this.listening && this.pending.size) {
      // DONE is written just after a slot's reply word, so it can lag behind what was taken:
      // wait for a change of the value read before taking, never of `consumed`.
      const done = Atomics.load(door, DONE);
      this.takeReplies();
      if (!this.pending.size) return;
      const wait = whenChanged(door, DONE, done);
      if (!wait) continue;
      this.listening = true;
      void wait.then(() => {
        this.listening = false;
        this.takeReplies();
        this.listen();
      });
    }
  }

  async close(): Promise<void> {
    if (this.dead) return;
    this.dead = `instance ${this.placement.name} is closed`;
    const exited = new Promise<void>((r) => this.worker.once('exit', () => r()));
    const seq = ++this.submitted;
    Atomics.store(this.controls[seq % SLOTS]!.words, OP, OP_CLOSE);
    Atomics.store(this.controls[seq % SLOTS]!.words, REQ_SEQ, seq);
    this.ring(seq);
    const timer = setTimeout(() => void this.worker.terminate(), 5000);
    await exited;
    clearTimeout(timer);
    this.port.close();
  }

  /** The watchdog's check: takes a finished execution that has waited unnoticed for a whole tick. */
  rescue(): void {
    const seq = this.consumed + 1;
    if (!this.pending.has(seq) || Atomics.load(this.controls[seq % SLOTS]!.words, REP_SEQ) !== seq) return;
    if (this.unnoticed !== seq) {
      this.unnoticed = seq; // its wake-up may simply not have run yet
      return;
    }
    this.takeReplies();
  }

  get waiting(): boolean {
    return this.pending.size > 0;
  }

  private ring(seq: number): void {
    const door = this.controls[0]!.words;
    Atomics.store(door, DOORBELL, seq);
    Atomics.notify(door, DOORBELL);
  }

  private index(map: Map<string, number>, name: string, what: string): number {
    const i = map.get(name);
    if (i === undefined) throw ServalError.internal(`model has no ${what} '${name}'`);
    return i;
  }

  /** Settles every finished execution, oldest first (the worker runs them in order). */
  private takeReplies(): void {
    for (;;) {
      const seq = this.consumed + 1;
      const p = this.pending.get(seq);
      const words = this.controls[seq % SLOTS]!.words;
      if (!p || Atomics.load(words, REP_SEQ) !== seq) return;
      this.consumed = seq;
      this.pending.delete(seq);
      this.settle(seq % SLOTS, p);
    }
  }

  private settle(slot: number, p: Pending): void {
    const control = this.controls[slot]!;
    const words = control.words;
    if (Atomics.load(words, FLAGS) & FLAG_NEW_ARENA) {
      for (let m = receiveMessageOnPort(this.port); m; m = receiveMessageOnPort(this.port)) {
        const { slot: s, arena } = m.message as ArenaMessage;
        this.arenas[s] = arena;
      }
    }
    const status = Atomics.load(words, STATUS);
    if (status === STATUS_WITHDRAWN) {
      p.reject(ServalError.cancelled('execution withdrawn before it started'));
      return;
    }
    if (status !== STATUS_OK) {
      p.reject(ServalError.internal(`onnxruntime execution failed: ${control.readError()}`));
      return;
    }
    const reply = control.readReply();
    const bytes = new Uint8Array(this.arenas[slot]!);
    p.resolve({
      // One bulk copy per output out of the arena, which a later execution reuses.
      outputs: reply.outputs.map((o) => ({
        name: this.signature.outputs[o.index]!.name,
        datatype: o.datatype,
        dims: o.dims,
        data: bytes.slice(o.offset, o.offset + o.byteLength),
      })),
      computeStartNs: BigInt(reply.startNs),
      computeInputNs: reply.computeInputNs,
      computeInferNs: reply.computeInferNs,
      computeOutputNs: reply.computeOutputNs,
    });
  }

  private fail(reason: string): void {
    if (!this.dead) this.dead = reason;
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(ServalError.internal(reason));
  }
}
