// The main-thread side of one ONNX Runtime instance: owns its session's shared-memory channel
// (channel.ts) to the worker that hosts it (host.ts), and turns a reply into outputs the caller owns.
import { type MessagePort, receiveMessageOnPort } from 'node:worker_threads';
import type { InstancePlacement } from '../../config/resolved.js';
import type { ModelSignature } from '../../config/signature.js';
import { IdTable } from '../../kernel/churn.js';
import { ServalError } from '../../kernel/errors.js';
import type { ExecLayout, ExecResult, Execution, ModelInstance, Reservation } from '../backend.js';
import {
  arenaSize,
  type Control,
  DONE,
  DOORBELL,
  FLAG_NEW_ARENA,
  FLAG_OUTPUTS_TRANSFERRED,
  FLAGS,
  INITIAL_ARENA,
  LARGE_ARENA,
  OP,
  OP_CLOSE,
  OP_EXEC,
  OP_WITHDRAWN,
  REP_SEQ,
  REQ_SEQ,
  SLOTS,
  STATUS,
  STATUS_INVALID,
  STATUS_OK,
  STATUS_WITHDRAWN,
  whenChanged,
} from './channel.js';
import { DEDICATED, type Link, type WorkerHost, type WorkerPool } from './host.js';
import type { ArenaMessage, SessionSettings } from './protocol.js';

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

/** An execution accepted while the worker restarts: its inputs wait here, then go to the new worker. */
interface Deferred {
  bytes: Uint8Array;
  layout: ExecLayout;
  resolve: (r: ExecResult) => void;
  reject: (e: Error) => void;
  /** Set once it was handed to the new worker. */
  execution?: Execution;
}

/**
 * Opens a session for the instance on the worker the pool chooses: its link and the model's
 * signature. The handler given to `onDeath` hears of that worker dying, also if it died before.
 */
async function openSession(
  pool: WorkerPool,
  placement: InstancePlacement,
  settings: SessionSettings,
): Promise<{ link: Link; signature: ModelSignature; onDeath: (handler: (why: string) => void) => void }> {
  let handler: ((why: string) => void) | undefined;
  let early: string | undefined;
  const r = await pool.open(placement, settings, (why) => {
    if (handler) handler(why);
    else early = why;
  });
  return {
    ...r,
    onDeath: (h) => {
      handler = h;
      if (early !== undefined) h(early);
    },
  };
}

/** Closes a session through its channel as command `seq`, and waits until the worker has let it go. */
async function closeSession(link: Link, seq: number): Promise<void> {
  const words = link.controls[seq % SLOTS]!.words;
  Atomics.store(words, OP, OP_CLOSE);
  Atomics.store(words, REQ_SEQ, seq);
  Atomics.store(link.controls[0]!.words, DOORBELL, seq);
  link.host.ring();
  await link.host.closed(link.id);
}

export class OrtInstance implements ModelInstance {
  /** Executions it accepts at once: one running, the next waiting in the worker. */
  readonly capacity = SLOTS;
  /** Executions sent to the worker, by seq (not a Map of them: kernel/churn.ts). */
  private readonly pending = new IdTable<Pending>();
  /** Last sequence number submitted, and the last whose reply has been taken. */
  private submitted = 0;
  private consumed = 0;
  /** Set once closed: nothing is accepted any more. */
  private dead: string | undefined;
  private arenaSent: boolean[] = new Array<boolean>(SLOTS).fill(false);
  /** Outputs the worker transferred, by slot, until that slot's reply is taken (FLAG_OUTPUTS_TRANSFERRED). */
  private readonly transferred: (ArrayBuffer[] | undefined)[] = [];
  private unnoticed = 0;
  private listening = false;
  private reserved = false;
  private readonly inputIndex: Map<string, number>;
  private readonly outputIndex: Map<string, number>;
  private link!: Link;
  private controls!: Control[];
  private arenas!: SharedArrayBuffer[];
  private port!: MessagePort;
  /** Bumped with every new worker, so a wait on a dead worker's memory does nothing. */
  private generation = 0;
  /** While a dead worker is being replaced. */
  private restarting: Promise<void> | undefined;
  /** Why the last restart failed; the next reservation tries again. */
  private broken: string | undefined;
  private deferred: Deferred[] = [];
  onRestart?: () => void;

  private constructor(
    readonly placement: InstancePlacement,
    private readonly settings: SessionSettings,
    private readonly pool: WorkerPool,
    readonly signature: ModelSignature,
  ) {
    this.inputIndex = new Map(signature.inputs.map((s, i) => [s.name, i]));
    this.outputIndex = new Map(signature.outputs.map((s, i) => [s.name, i]));
  }

  /** Starts the instance on the worker `pool` chooses (by default one of its own). */
  static async start(placement: InstancePlacement, settings: SessionSettings, pool: WorkerPool = DEDICATED): Promise<OrtInstance> {
    const opened = await openSession(pool, placement, settings);
    const inst = new OrtInstance(placement, settings, pool, opened.signature);
    inst.attach(opened.link);
    opened.onDeath((why) => inst.workerExited(opened.link, why));
    return inst;
  }

  /** The worker it runs on (tests look at sharing through it). */
  get host(): WorkerHost {
    return this.link.host;
  }

  /** Makes `link` the instance's session, with fresh sequence numbers. */
  private attach(link: Link): void {
    this.link = link;
    this.controls = link.controls;
    this.arenas = link.arenas;
    this.port = link.port;
    this.submitted = 0;
    this.consumed = 0;
    this.unnoticed = 0;
    this.listening = false;
    this.arenaSent = new Array<boolean>(SLOTS).fill(false);
    this.transferred.length = 0; // a dead worker's outputs
    this.generation++;
  }

  /**
   * The worker died under the session (an uncaught error, an out-of-memory of its JS heap, the test
   * hook; on a shared worker, whichever session caused it): what it was running fails, and the
   * instance opens a new session, on a new worker.
   */
  private workerExited(link: Link, why: string): void {
    if (link !== this.link) return;
    link.port.close();
    if (this.dead) {
      this.fail(this.dead);
      return;
    }
    this.fail(`instance ${this.placement.name} stopped unexpectedly (${why}) while running this request; it is being restarted`);
    this.restart(why);
  }

  private restart(why: string): void {
    if (this.restarting) return;
    this.broken = undefined;
    this.restarting = openSession(this.pool, this.placement, this.settings).then(
      async ({ link, onDeath }) => {
        if (this.dead) {
          await closeSession(link, 1);
          link.port.close();
          this.restarting = undefined;
          this.flushDeferred();
          return;
        }
        this.restarting = undefined;
        this.attach(link);
        onDeath((w) => this.workerExited(link, w));
        this.onRestart?.();
        this.flushDeferred();
      },
      (e: unknown) => {
        this.restarting = undefined;
        this.broken = `instance ${this.placement.name} stopped (${why}) and could not be restarted: ${(e as Error).message}`;
        this.flushDeferred();
      },
    );
  }

  /** Hands the executions accepted during a restart to the new worker, in order (or fails them). */
  private flushDeferred(): void {
    const list = this.deferred;
    this.deferred = [];
    for (const d of list) {
      const down = this.dead ?? this.broken;
      if (down) {
        d.reject(ServalError.internal(down));
        continue;
      }
      try {
        const r = this.reserve(d.bytes.byteLength);
        r.buffer.set(d.bytes);
        d.execution = r.execute(d.layout);
        d.execution.result.then(d.resolve, d.reject);
      } catch (e) {
        d.reject(e as Error);
      }
    }
  }

  /** A reservation while the worker restarts: the inputs wait in `bytes` (a buffer of their own). */
  private deferredReservation(bytes: Uint8Array): Reservation {
    if (this.deferred.length >= SLOTS) {
      throw ServalError.internal(`instance ${this.placement.name} already has ${SLOTS} executions`);
    }
    return this.reservation(bytes, (layout) => {
      let d!: Deferred;
      const result = new Promise<ExecResult>((resolve, reject) => {
        d = { bytes, layout, resolve, reject };
      });
      this.deferred.push(d);
      // The restart may have ended while the caller filled the buffer.
      if (!this.restarting) this.flushDeferred();
      return {
        result,
        held: true,
        withdraw: () => {
          if (d.execution) return d.execution.withdraw();
          const i = this.deferred.indexOf(d);
          if (i < 0) return false;
          this.deferred.splice(i, 1);
          d.reject(ServalError.cancelled('execution withdrawn before it started'));
          return true;
        },
      };
    });
  }

  /**
   * Room for the next execution: its slot's arena, grown when the inputs do not fit. One
   * reservation at a time: the next one takes the slot after it.
   */
  reserve(byteLength: number): Reservation {
    this.checkRoom();
    if (this.restarting) return this.deferredReservation(new Uint8Array(byteLength));
    const seq = this.submitted + 1;
    const slot = seq % SLOTS;
    if (byteLength > LARGE_ARENA) return this.ownReservation(seq, new Uint8Array(byteLength));
    if (byteLength > this.arenas[slot]!.byteLength) {
      this.arenas[slot] = new SharedArrayBuffer(arenaSize(byteLength));
      this.port.postMessage({ slot, arena: this.arenas[slot] } satisfies ArenaMessage);
      this.arenaSent[slot] = true;
    }
    return this.slotReservation(seq, new Uint8Array(this.arenas[slot]!, 0, byteLength), () => undefined);
  }

  /**
   * A large request's own memory (the received body or message) goes to the worker as it is,
   * transferred, like the memory of ownReservation: its inputs are not copied on this thread.
   */
  adopt(memory: ArrayBuffer): Reservation | undefined {
    if (memory.byteLength <= LARGE_ARENA) return undefined;
    this.checkRoom();
    const own = new Uint8Array(memory);
    return this.restarting ? this.deferredReservation(own) : this.ownReservation(this.submitted + 1, own);
  }

  /** Throws unless the instance can take one more reservation now (or restarts its worker for it). */
  private checkRoom(): void {
    if (this.dead) throw ServalError.internal(this.dead);
    if (this.reserved) throw ServalError.internal(`instance ${this.placement.name} already has a reservation`);
    if (this.broken) this.restart(this.broken);
    if (!this.restarting && this.submitted - this.consumed >= SLOTS) {
      throw ServalError.internal(`instance ${this.placement.name} already has ${SLOTS} executions`);
    }
  }

  /**
   * A large execution's inputs go in memory of their own, transferred to the worker with the
   * command (channel.ts LARGE_ARENA): no arena grows, and the worker reads them where they are.
   */
  private ownReservation(seq: number, own: Uint8Array<ArrayBuffer>): Reservation {
    return this.slotReservation(seq, own, () => {
      const slot = seq % SLOTS;
      this.port.postMessage({ slot, input: own.buffer } satisfies ArenaMessage, [own.buffer]);
      this.arenaSent[slot] = true;
    });
  }

  /** The one Reservation shape: used exactly once, by execute() (which runs `run`) or release(). */
  private reservation(buffer: Uint8Array, run: (layout: ExecLayout) => Execution): Reservation {
    this.reserved = true;
    let open = true;
    const close = (): void => {
      if (!open) throw ServalError.internal(`a reservation of instance ${this.placement.name} was used twice`);
      open = false;
      this.reserved = false;
    };
    return {
      buffer,
      execute: (layout) => {
        close();
        return run(layout);
      },
      release: () => {
        if (open) close();
      },
    };
  }

  /** A reservation that submits as command `seq`, after `beforeSubmit`. */
  private slotReservation(seq: number, buffer: Uint8Array, beforeSubmit: () => void): Reservation {
    return this.reservation(buffer, (layout) => {
      beforeSubmit();
      return this.submit(seq, layout);
    });
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
      const generation = this.generation;
      void wait.then(() => {
        if (generation !== this.generation) return; // a dead worker's memory
        this.listening = false;
        this.takeReplies();
        this.listen();
      });
    }
  }

  async close(): Promise<void> {
    if (this.dead) return;
    this.dead = `instance ${this.placement.name} is closed`;
    await this.restarting;
    if (this.broken) return;
    // After the commands before it, the worker releases the session (and exits if it hosts no other).
    await closeSession(this.link, ++this.submitted);
    this.takeReplies();
    this.fail(this.dead);
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
    Atomics.store(this.controls[0]!.words, DOORBELL, seq);
    this.link.host.ring();
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
        const msg = m.message as ArenaMessage;
        if ('arena' in msg) this.arenas[msg.slot] = msg.arena;
        else if ('outputs' in msg) this.transferred[msg.slot] = msg.outputs;
      }
    }
    const moved = Atomics.load(words, FLAGS) & FLAG_OUTPUTS_TRANSFERRED ? this.transferred[slot] : undefined;
    this.transferred[slot] = undefined;
    // A large arena serves one execution (whatever its outcome; the worker drops it too): its
    // outputs stay views into it (no copy) and the slot starts over with a small one, so one big
    // request leaves no big memory behind.
    const arena = this.arenas[slot]!;
    const large = arena.byteLength > LARGE_ARENA;
    if (large) {
      this.arenas[slot] = new SharedArrayBuffer(INITIAL_ARENA);
      this.port.postMessage({ slot, arena: this.arenas[slot] } satisfies ArenaMessage);
      this.arenaSent[slot] = true;
    }
    const status = Atomics.load(words, STATUS);
    if (status === STATUS_WITHDRAWN) {
      p.reject(ServalError.cancelled('execution withdrawn before it started'));
      return;
    }
    if (status === STATUS_INVALID) {
      p.reject(ServalError.invalidArg(control.readError()));
      return;
    }
    if (status !== STATUS_OK) {
      p.reject(ServalError.internal(`onnxruntime execution failed: ${control.readError()}`));
      return;
    }
    const reply = control.readReply();
    const bytes = new Uint8Array(arena);
    if (moved && moved.length !== reply.outputs.length) {
      p.reject(ServalError.internal(`the worker sent ${moved.length} output buffers for ${reply.outputs.length} outputs`));
      return;
    }
    p.resolve({
      // Transferred outputs and a one-off arena's are used where they are; others get one bulk
      // copy out of the arena, which a later execution reuses.
      outputs: reply.outputs.map((o, i) => ({
        name: this.signature.outputs[o.index]!.name,
        datatype: o.datatype,
        dims: o.dims,
        data: moved
          ? new Uint8Array(moved[i]!, o.offset, o.byteLength)
          : large
            ? bytes.subarray(o.offset, o.offset + o.byteLength)
            : bytes.slice(o.offset, o.offset + o.byteLength),
      })),
      computeStartNs: BigInt(reply.startNs),
      computeInputNs: reply.computeInputNs,
      computeInferNs: reply.computeInferNs,
      computeOutputNs: reply.computeOutputNs,
    });
  }

  private fail(reason: string): void {
    const all = this.pending.values();
    this.pending.clear();
    for (const p of all) p.reject(ServalError.internal(reason));
  }
}
