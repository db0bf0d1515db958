// The main-thread side of one Python model instance: a stub process (stub_process.ts), two
// shared-memory files (shm.ts) and the control channel (channel.ts).
//
// An execution: the scheduler assembles the batch into `staging` (the reservation's buffer); one
// positioned write puts it into the "to stub" file; an `exec` message gives each request's share
// of every input (offsets, shapes, id, parameters, requested outputs); the stub calls the model's
// execute() with numpy views over the file, writes every response's outputs into the "from stub"
// file and answers `done` with their offsets; one positioned read takes them back. A batch of up
// to INLINE_BYTES travels attached to `exec` instead, and outputs that small come attached to
// `done` (the offsets are then into the attached bytes).
//
// Executions overlap at the stub where the model allows it (not decoupled, not an iterative
// sequence): one is sent while another runs, so the stub starts it the moment the other returns.
// Small ones travel attached both ways. One with larger inputs (only one at a time) gets an area
// of the "to stub" file beside the running one's (ToStubArea); in the "from stub" file the stub
// keeps what an execution stored until Serval's next `exec` says (`rd`) it has read its `done`.
//
// BLS: the stub sends `bls` with its inputs in the "from stub" file; the request runs through the
// server (InstanceHost.infer, the target model's checks and scheduler) and its outputs go into the
// "to stub" file after the execution's inputs, the answer to `bls_done`. A BLS request made outside
// a non-decoupled execute() (a decoupled model's, or a stream: exec(decoupled=True)) carries its
// tensors attached to the messages both ways instead, and a stream is answered by one `bls_done`
// per response. A sampled request's `exec` entry has a key (`tk`); a BLS call that names it
// (InferenceRequest(trace=request.trace())) runs under a child of that request's trace.
//
// A decoupled model: each request of `exec` has a key; the model's responses come as `resp`
// messages with that key and their tensors attached, any time until the final one (after `done`,
// which then says only that execute() returned). A client's cancel goes to the stub as `cancel`.
import type { InstancePlacement } from '../../config/resolved.js';
import { awaitAnswer } from '../../kernel/awake.js';
import type { Cancellation } from '../../kernel/cancel.js';
import { IdTable } from '../../kernel/churn.js';
import { scrubPaths } from '../../kernel/confine.js';
import { type MetricKind, pythonCustomMetrics } from '../../kernel/custom_metrics.js';
import { isDataType } from '../../kernel/datatypes.js';
import { asServalError, type ErrorCode, ServalError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/log.js';
import { freeNow, freeSent, soleResponseMemory, wholeBuffer } from '../../kernel/memory.js';
import type { RequestTrace } from '../../kernel/trace.js';
import type { InferRequest, InferResponse, Params } from '../../kernel/types.js';
import type {
  ExecLayout,
  ExecOutput,
  ExecResult,
  Execution,
  ExecutionFailure,
  InstanceHost,
  ModelInstance,
  Reservation,
  ResponseChannel,
} from '../backend.js';
import { Cadence } from './cadence.js';
import type { StubMessage } from './channel.js';
import { interpreterProblem } from './interpreter.js';
import { ShmFile } from './shm.js';
import { type StubExit, type StubMalloc, StubProcess } from './stub_process.js';

/** [name, datatype, shape, offset, byte length] of a tensor in a shared-memory file. */
type TensorSpec = [string, string, number[], number, number];

/** One request of an `exec` message; `rk` keys a decoupled model's request. */
interface RequestSpec {
  id: string;
  params: Params;
  outs: string[];
  ins: TensorSpec[];
  rk?: number;
  /** Keys a non-decoupled request whose client can cancel it (its is_cancelled()). */
  ck?: number;
  /** Keys a sampled request's trace: its request.trace(), which BLS calls name to be traced. */
  tk?: number;
}

interface Running {
  seq: number;
  resolve: (r: ExecResult) => void;
  reject: (e: Error) => void;
  /** The keys of its decoupled requests. */
  keys: number[];
  /** A decoupled request's key → its index in the execution's requests. */
  rows: Map<number, number>;
  /** Sends its `exec` again, to a restarted stub, when it was sent behind one that died (`behind`: behind another again). */
  send?: (stub: StubProcess, behind: boolean) => void;
  /** One untraced request: outputs read for it are its response's alone (memory.ts soleResponseMemory). */
  sole: boolean;
  /** Sent behind another: when that one's `done` came, which is when the stub started this one (its wait is queue time). */
  startNs?: bigint;
  /** Its part of the "to stub" file. */
  area: ToStubArea;
}

/**
 * An execution's part of the "to stub" file: its inputs from `base`, then the outputs of its BLS
 * calls up to `top`; those may not reach `limit`, where the inputs of one sent behind it lie
 * (past it they go attached to the answer).
 */
interface ToStubArea {
  base: number;
  top: number;
  limit: number;
}

/** A decoupled model's request that the stub may still answer. */
interface OpenRequest {
  channel: ResponseChannel;
  cancellation: Cancellation | undefined;
  /** Its trace's key in PythonInstance.traces. */
  tk?: number;
}

export interface PythonInstanceOptions {
  interpreter: string;
  /** initialize(args): every value a string, as in Triton. */
  args: Record<string, string>;
  modelPath: string;
  host: InstanceHost;
  log: Logger;
  /** The model is decoupled: its responses come through the requests' senders. */
  decoupled?: boolean;
  /** sequence_batching.iterative_sequence: a request the model releases with RESCHEDULE runs again. */
  iterative?: boolean;
  /** What the stub's allocator does with freed memory (StubMalloc; the backend's default is keep). */
  malloc: StubMalloc;
}

const INITIAL_SHM = 1 << 20;
/**
 * Inputs (and, in the stub, outputs) of up to this many bytes travel attached to the `exec`
 * (`done`) message: one socket write each way instead of a positioned write and read as well.
 */
const INLINE_BYTES = 16 << 10;
/** Executions an instance takes at once (see PythonInstance.capacity). */
const CAPACITY = 4;
/**
 * How long the event loop stays awake for a lone execution's answer (kernel/awake.ts): for
 * models whose executions have lately been answered within it.
 */
const AWAKE_NS = 300_000n;
/** How long the stub polls for its next message after a lone execution (its SPIN_SECONDS), asked of an instance whose next execution has lately come within it. */
const SPIN_NS = 400_000n;
const ALIGN = 64;
const ZEROS = new Uint8Array(ALIGN);
const align = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;
const ERROR_CODES: readonly ErrorCode[] = [
  'UNKNOWN',
  'INTERNAL',
  'NOT_FOUND',
  'INVALID_ARG',
  'UNAVAILABLE',
  'UNSUPPORTED',
  'ALREADY_EXISTS',
  'CANCELLED',
];

/** A Python traceback ("Type: message\n\nAt:\n  file(line): fn\n...") on one line, for load errors. */
export function oneLine(text: string): string {
  return text
    .trim()
    .replace(/\n\nAt:$/, '') // no frames of the model's (a SyntaxError on import): Triton prints none either
    .replace(/\n\nAt:\n\s*/, ' (at ')
    .replace(/\n\s*/g, ' < ')
    .replace(/ \(at (.*)$/s, ' (at $1)');
}

function describeExit(e: StubExit): string {
  return e.signal ? `killed by ${e.signal}` : `exit code ${e.code}`;
}

export class PythonInstance implements ModelInstance {
  /**
   * The stub runs one execute() at a time. Without dynamic batching (the scheduler gives such
   * models one execution per instance at a time) more are accepted behind it: small ones go to
   * the stub at once, which starts each as soon as the one before returns (no idle stub waiting
   * for the main thread in between, and several sent with one write); a larger one (or a
   * decoupled model's) waits here and goes the moment the running one is done.
   */
  readonly capacity = CAPACITY;
  onRestart?: () => void;
  private stub: StubProcess | undefined;
  private restarting: Promise<StubProcess> | undefined;
  private running: Running | undefined;
  /** The executions sent to the stub behind the running one, in order (see capacity). */
  private behind: Running[] = [];
  /** How soon its executions are answered, and how soon the next follows (cadence.ts). */
  private readonly cadence = new Cadence(AWAKE_NS, SPIN_NS);
  /** Executions at the stub (or on their way there). */
  private atStub = 0;
  /** Executions waiting here for the stub (see capacity), in order; see `startHeld` for which go behind a running one. */
  private held: { small: boolean; overlaps: boolean; start: (behind: boolean) => void; fail: (e: Error) => void }[] = [];
  private closed = false;
  private seq = 0;
  /** The last execution whose `done` has been read: the stub may reuse what it stored for it and those before. */
  private lastRead = 0;
  /** The most bytes one BLS answer has put into the "to stub" file: room left for them beside a running execution. */
  private blsPeak = 0;
  /** Input buffers of the executions at the stub or held (the first made at once, others on first use). */
  private readonly staging = [Buffer.allocUnsafe(INITIAL_SHM)];
  private readonly stagingUsed = [false];
  /** A decoupled model's requests not yet ended, by key. */
  private readonly open = new IdTable<OpenRequest>();
  private lastKey = 0;
  /** Traces of the sampled requests the model holds, by key (RequestSpec.tk), for its traced BLS calls. */
  private readonly traces = new IdTable<RequestTrace>();

  private constructor(
    readonly placement: InstancePlacement,
    private readonly toStub: ShmFile,
    private readonly fromStub: ShmFile,
    private readonly opts: PythonInstanceOptions,
  ) {}

  static async start(placement: InstancePlacement, opts: PythonInstanceOptions): Promise<PythonInstance> {
    const to = ShmFile.create(`${placement.name}_to`, INITIAL_SHM);
    const from = ShmFile.create(`${placement.name}_from`, INITIAL_SHM);
    const inst = new PythonInstance(placement, to, from, opts);
    try {
      inst.stub = await inst.launch();
    } catch (e) {
      to.close();
      from.close();
      throw e;
    }
    return inst;
  }

  /** The pid of the running stub (tests kill it to see the instance recover). */
  get stubPid(): number | undefined {
    return this.stub?.pid;
  }

  private get name(): string {
    return this.placement.name;
  }

  private unhealthy(): string {
    return `Stub process '${this.name}' is not healthy.`;
  }

  /**
   * A failure of the requests this instance runs. Triton words it in two ways: its stub, for an
   * exception the model raised (or a decoupled execute's wrong return), "for model '<instance>'";
   * the backend, for what it finds itself (a stub that died), "for model instance '<instance>'".
   */
  private failure(message: string, byStub = false): ServalError {
    // A traceback names model.py by its absolute path: clients see it repository-relative.
    const dir = this.opts.args.model_repository;
    const text = dir ? scrubPaths(message, dir) : message;
    const what = byStub ? 'model' : 'model instance';
    return ServalError.internal(`Failed to process the request(s) for ${what} '${this.name}', message: ${text}`);
  }

  /** Starts a stub and runs the model's initialize(); rejects with what went wrong. */
  private launch(): Promise<StubProcess> {
    const { interpreter } = this.opts;
    const stub = StubProcess.spawn(interpreter, 'instance', [this.toStub.fd, this.fromStub.fd], {
      SERVAL_STUB_MALLOC: this.opts.malloc,
    });
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (reason: string, code: ErrorCode = 'UNAVAILABLE'): void => {
        if (settled) return;
        settled = true;
        stub.kill();
        reject(new ServalError(code, reason));
      };
      stub.onMessage = (m) => {
        if (m.t === 'ready') {
          settled = true;
          stub.onMessage = (x) => this.onMessage(stub, x);
          resolve(stub);
        } else if (m.t === 'init_error' || m.t === 'fatal') {
          // The model's own error, as Triton's Python backend reports it (an INTERNAL status, no prefix).
          const code = m.t === 'init_error' ? 'INTERNAL' : 'UNAVAILABLE';
          fail(interpreterProblem(interpreter, { message: oneLine(String(m.msg)), missing: m.missing as string | null }), code);
        } else if (m.t === 'log') this.logLine(m);
        else if (m.t === 'metric') this.metric(stub, m);
      };
      void stub.exited.then((e) => {
        pythonCustomMetrics.release(stub);
        if (!settled) {
          fail(
            e.spawnError
              ? interpreterProblem(interpreter, { spawnError: e.spawnError })
              : `${this.unhealthy()} It exited during initialization (${describeExit(e)}).`,
          );
        } else this.onExit(stub, e);
      });
      stub.send({
        t: 'init',
        args: this.opts.args,
        model_path: this.opts.modelPath,
        decoupled: this.opts.decoupled ?? false,
        to_size: this.toStub.size,
        from_size: this.fromStub.size,
      });
    });
  }

  private onMessage(stub: StubProcess, m: StubMessage): void {
    if (stub !== this.stub) return;
    if (m.t === 'resp') this.respond(m);
    else if (m.t === 'done') this.finish(m);
    else if (m.t === 'bls') void this.bls(stub, m);
    else if (m.t === 'log') this.logLine(m);
    else if (m.t === 'metric') this.metric(stub, m);
  }

  /** A custom metric operation of the model (pb_utils.MetricFamily / Metric); answered when it has an id. */
  private metric(stub: StubProcess, m: StubMessage): void {
    const metrics = pythonCustomMetrics;
    let reply: Record<string, unknown> | undefined;
    if (m.op === 'family') {
      const err = metrics.family(stub, String(m.name), String(m.help ?? ''), m.kind as MetricKind);
      reply = err ? { err } : {};
    } else if (m.op === 'metric') {
      reply = metrics.metric(stub, String(m.family), (m.labels ?? {}) as Record<string, string>, (m.buckets ?? null) as number[] | null);
    } else if (m.op === 'value') {
      reply = { value: metrics.value(String(m.key)) ?? 0 };
    } else metrics.update(String(m.key), String(m.op), Number(m.value));
    if (reply && m.id !== undefined) stub.send({ t: 'metric_done', id: m.id, ...reply });
  }

  private logLine(m: StubMessage): void {
    const fields = { model: this.opts.args.model_name, instance: this.name };
    const text = String(m.msg);
    // A pb_utils.Logger line names its place in the model's code; the stub's own lines have none.
    const at = typeof m.at === 'string' && m.at ? m.at : undefined;
    if (m.level === 'ERROR') this.opts.log.error(text, fields, at);
    else if (m.level === 'WARNING') this.opts.log.warn(text, fields, at);
    else if (m.level === 'VERBOSE') this.opts.log.debug(text, fields, at);
    else this.opts.log.info(text, fields, at);
  }

  /** The stub died: fail what it was running, and start another one right away. */
  private onExit(stub: StubProcess, e: StubExit): void {
    if (stub !== this.stub) return;
    this.stub = undefined;
    const running = this.running;
    const behind = this.behind;
    this.running = undefined;
    this.behind = [];
    // Triton's text for it, bare (no "Failed to process ..." around it).
    running?.reject(ServalError.internal(this.unhealthy()));
    this.endOpen(ServalError.internal(this.unhealthy()));
    if (this.closed) {
      // Closing: no stub will run what was behind the one that died (close() has let go of them).
      for (const r of behind) r.reject(ServalError.unavailable(`instance ${this.name} is closed`));
      return;
    }
    this.opts.log.error('Stub process is unhealthy and it will be restarted.', {
      model: this.opts.args.model_name,
      instance: this.name,
      exit: describeExit(e),
    });
    // Executions sent behind the one that died had not started: they run on the new stub.
    void this.restart().then(
      (s) => {
        const [first, ...rest] = behind;
        if (!first) return;
        this.running = first;
        this.behind = rest;
        first.send?.(s, false);
        for (const r of rest) r.send?.(s, true);
      },
      (err: unknown) => {
        for (const r of behind) r.reject(this.failure(`${this.unhealthy()} Restarting it failed: ${(err as Error).message}`));
      },
    );
  }

  private restart(): Promise<StubProcess> {
    this.restarting ??= this.launch().then(
      (s) => {
        this.restarting = undefined;
        if (this.closed) {
          s.send({ t: 'fin' });
          void s.stop(5000);
          throw ServalError.unavailable(`instance ${this.name} is closed`);
        }
        this.stub = s;
        this.onRestart?.();
        this.opts.log.info('Python stub restarted', { model: this.opts.args.model_name, instance: this.name, pid: s.pid });
        return s;
      },
      (e: unknown) => {
        this.restarting = undefined;
        this.opts.log.error('Python stub restart failed', {
          model: this.opts.args.model_name,
          instance: this.name,
          reason: (e as Error).message,
        });
        throw e;
      },
    );
    return this.restarting;
  }

  /** The live stub, restarting one that died (a request waits for the restart). */
  private async liveStub(): Promise<StubProcess> {
    if (this.stub?.alive) return this.stub;
    try {
      return await this.restart();
    } catch (e) {
      throw this.failure(`${this.unhealthy()} Restarting it failed: ${(e as Error).message}`);
    }
  }

  reserve(byteLength: number): Reservation {
    return this.reservation(byteLength);
  }

  /**
   * A large request's own memory (the received body or message) is written to the stub from where
   * it lies and freed at once: no copy into the staging buffer, and no 1 MiB-sized garbage per
   * request, which would have V8 run a full collection every few dozen requests.
   */
  adopt(memory: ArrayBuffer): Reservation | undefined {
    if (memory.byteLength <= INLINE_BYTES) return undefined;
    return this.reservation(memory.byteLength, memory);
  }

  /** Room for one execution: a staging buffer, or the adopted memory the inputs already lie in. */
  private reservation(byteLength: number, adopted?: ArrayBuffer): Reservation {
    if (this.closed) throw ServalError.internal(`instance ${this.name} is closed`);
    let slot = this.stagingUsed.indexOf(false);
    if (slot < 0) {
      if (this.staging.length >= CAPACITY) throw ServalError.internal(`instance ${this.name} already has ${CAPACITY} executions`);
      slot = this.staging.push(Buffer.alloc(0)) - 1;
      this.stagingUsed.push(false);
    }
    if (!adopted && this.staging[slot]!.byteLength < byteLength) this.staging[slot] = Buffer.allocUnsafe(align(byteLength));
    const buffer = adopted ? Buffer.from(adopted) : this.staging[slot]!;
    this.stagingUsed[slot] = true;
    let open = true;
    const close = (): void => {
      if (!open) throw ServalError.internal(`a reservation of instance ${this.name} was used twice`);
      open = false;
    };
    const free = (): void => {
      this.stagingUsed[slot] = false;
      if (adopted) freeNow(adopted);
    };
    return {
      buffer: buffer.subarray(0, byteLength),
      execute: (layout) => {
        close();
        const go = (behind: boolean): Promise<ExecResult> => {
          this.atStub++;
          return this.run(layout, byteLength, buffer, behind, adopted !== undefined).finally(() => {
            free();
            if (--this.atStub <= 1) this.startHeld();
          });
        };
        // Behind a running one (see startHeld): a small one needs no shared memory of its own
        // (inputs attached to the message, outputs and BLS traffic attached too); a larger one
        // takes an area of the "to stub" file beside the running one's.
        const overlaps = !this.opts.decoupled && !this.opts.iterative;
        const small = overlaps && byteLength <= INLINE_BYTES;
        if (!this.held.length && (this.atStub === 0 || small || (overlaps && this.atStub === 1))) {
          return { result: go(this.atStub > 0), held: false, withdraw: () => false } satisfies Execution;
        }
        let waiting: (typeof this.held)[number] | undefined;
        const result = new Promise<ExecResult>((resolve, reject) => {
          waiting = {
            small,
            overlaps,
            start: (behind) => void go(behind).then(resolve, reject),
            fail: (e) => {
              free();
              reject(e);
            },
          };
        });
        this.held.push(waiting!);
        const withdraw = (): boolean => {
          const at = this.held.indexOf(waiting!);
          if (at < 0) return false;
          this.held.splice(at, 1);
          waiting!.fail(ServalError.cancelled('execution withdrawn before it started'));
          return true;
        };
        return { result, held: true, withdraw } satisfies Execution;
      },
      release: () => {
        if (!open) return;
        close();
        free();
      },
    };
  }

  /**
   * The stub is idle, or runs one execution: held ones go, the first at once if it is idle; behind
   * the running one go small ones, and one with larger inputs while nothing else is behind it.
   */
  private startHeld(): void {
    if (this.atStub === 0) {
      const first = this.held.shift();
      if (!first) return;
      first.start(false);
    }
    for (let next = this.held[0]; next && (next.small || (next.overlaps && this.atStub === 1)); next = this.held[0]) {
      this.held.shift();
      next.start(true);
    }
  }

  /**
   * Where inputs of `bytes` go when sent behind the running execution: below its area if they
   * fit there with room for a BLS answer, else past its area and that room (which then limits it).
   */
  private placeBehind(bytes: number): number {
    const running = this.running!.area;
    const room = align(this.blsPeak);
    if (running.base >= align(bytes) + room) return 0;
    const base = align(running.top) + room;
    running.limit = Math.min(running.limit, base);
    return base;
  }

  /** `behind`: sent while another execution runs (small inputs, outputs and BLS attached; larger inputs in an area of their own: placeBehind). */
  private async run(layout: ExecLayout, inputBytes: number, staging: Buffer, sentBehind: boolean, adopted: boolean): Promise<ExecResult> {
    const stub = this.stub?.alive ? this.stub : await this.liveStub();
    // Behind one still running: a stub restart in between may have ended that one.
    const behind = sentBehind && this.running !== undefined;
    // Small inputs go attached to the message; their staging buffer is not reused before the stub
    // has read it (it is free again at this execution's `done`).
    const inline = inputBytes <= INLINE_BYTES;
    const base = !inline && behind ? this.placeBehind(inputBytes) : 0;
    if (!inline) {
      this.toStub.write(staging.subarray(0, inputBytes), base);
      // Adopted memory is nobody's once the stub has it.
      if (adopted) freeNow(staging.buffer);
    }
    const area: ToStubArea = { base, top: inline ? base : base + inputBytes, limit: Number.POSITIVE_INFINITY };
    const seq = ++this.seq;
    const reqs = this.describe(layout, inline ? 0 : base);
    const keys: number[] = [];
    const rows = new Map<number, number>();
    // A non-decoupled request hears of its client's cancel while it runs, as in Triton.
    const watched: Cancellation[] = [];
    // A sampled request's trace is known until it is answered (a decoupled one's final response).
    const traced: number[] = [];
    layout.requests?.forEach((r, i) => {
      let tk: number | undefined;
      if (r.trace) {
        tk = ++this.lastKey;
        reqs[i]!.tk = tk;
        this.traces.set(tk, r.trace);
        if (!r.responses) traced.push(tk);
      }
      if (!r.responses) {
        const c = r.cancellation;
        if (!c) return;
        const ck = ++this.lastKey;
        reqs[i]!.ck = ck;
        watched.push(c);
        const cancel = (): void => this.stub?.send({ t: 'cancel', rk: ck });
        if (c.cancelled) queueMicrotask(cancel);
        else c.onCancel(cancel);
        return;
      }
      const rk = ++this.lastKey;
      reqs[i]!.rk = rk;
      keys.push(rk);
      rows.set(rk, i);
      this.open.set(rk, { channel: r.responses, cancellation: r.cancellation, ...(tk !== undefined && { tk }) });
    });
    const sentNs = process.hrtime.bigint();
    const spin = this.cadence.sending(sentNs, !!layout.lone);
    const result = new Promise<ExecResult>((resolve, reject) => {
      const send = (to: StubProcess, q: boolean): void => {
        const msg: StubMessage = { t: 'exec', seq, size: this.toStub.size, reqs, rd: this.lastRead };
        // Behind another with its inputs attached: its outputs and BLS traffic go attached too.
        if (q && inline) msg.q = true;
        if (spin) msg.sp = true;
        to.send(msg, inline && inputBytes > 0 ? [staging.subarray(0, inputBytes)] : undefined, q);
      };
      const sole = layout.requests?.length === 1 && !layout.requests[0]!.trace;
      // A lone execution of a model that answers quickly: the event loop stays awake for it.
      const answered = awaitAnswer(this.cadence.awake(!!layout.lone), AWAKE_NS);
      const settled = (): void => {
        answered();
        this.cadence.answered(sentNs, process.hrtime.bigint());
        // The requests' cancel listeners and trace keys go with the answer (here, not in a .finally: one promise less per execution).
        for (const c of watched) c.onCancel(undefined);
        for (const tk of traced) this.traces.delete(tk);
      };
      const r: Running = {
        seq,
        resolve: (x) => {
          settled();
          resolve(x);
        },
        reject: (e) => {
          settled();
          reject(e);
        },
        keys,
        rows,
        send,
        sole,
        area,
      };
      if (behind) this.behind.push(r);
      else this.running = r;
      try {
        send(stub, behind);
      } catch (e) {
        // Not sent: its listeners and its wait for an answer end here.
        r.reject(e as Error);
        return;
      }
      // A running decoupled request hears of its client's cancel (the model's is_cancelled()).
      for (const rk of keys) {
        const c = this.open.get(rk)!.cancellation;
        const cancel = (): void => this.stub?.send({ t: 'cancel', rk });
        if (c?.cancelled) cancel();
        else c?.onCancel(cancel);
      }
    });
    return result;
  }

  /** A decoupled model's response: to its request's channel; the final one ends the request. */
  private respond(m: StubMessage): void {
    const rk = m.rk as number;
    const open = this.open.get(rk);
    if (!open) return;
    const final = m.final === true;
    if (final) this.forget(rk);
    let response: ExecOutput[] | Error | undefined;
    const err = m.err as { msg: string; code: string; raised?: boolean } | undefined;
    // An exception the model raised (an async execute's) is worded as one raised in execute().
    if (err) response = err.raised ? this.failure(err.msg, true) : stubError(err);
    else if (m.outs) response = this.attachedOutputs(m.outs as TensorSpec[], m.bin);
    const params = m.params && typeof m.params === 'object' ? (m.params as Params) : undefined;
    open.channel.send(response, final, params);
  }

  /** Tensors attached to a message: views of its bytes. */
  private attachedOutputs(specs: readonly TensorSpec[], bin: Buffer | undefined): ExecOutput[] | Error {
    const bytes = bin ?? Buffer.alloc(0);
    const outs: ExecOutput[] = [];
    for (const [name, datatype, shape, offset, length] of specs) {
      if (!isDataType(datatype)) return this.failure(`output '${name}' has datatype ${datatype}, which Serval does not support`);
      outs.push({ name, datatype, dims: shape, data: bytes.subarray(offset, offset + length) });
    }
    return outs;
  }

  private forget(rk: number): void {
    const open = this.open.get(rk);
    open?.cancellation?.onCancel(undefined);
    if (open?.tk !== undefined) this.traces.delete(open.tk);
    this.open.delete(rk);
  }

  /** Ends every open decoupled request with `err` (the stub died, or the instance closed). */
  private endOpen(err: Error): void {
    const open = this.open.values();
    for (const rk of this.open.keys()) this.forget(rk);
    for (const o of open) o.channel.send(err, true);
  }

  /** Each request's share of every input, in the order the scheduler assembled them (from `base` in the file). */
  private describe(layout: ExecLayout, base: number): RequestSpec[] {
    const requests = layout.requests ?? [
      { id: '', parameters: {}, batchSize: 0, inputBytes: layout.inputs.map((t) => t.byteLength), outputs: layout.outputs },
    ];
    const cursor = layout.inputs.map((t) => base + t.offset);
    return requests.map((r) => ({
      id: r.id,
      params: r.parameters,
      outs: r.outputs,
      ins: layout.inputs.map((slot, j): TensorSpec => {
        const n = r.inputBytes[j] ?? 0;
        const at = cursor[j]!;
        cursor[j] = at + n;
        const shape = r.batchSize > 0 ? [r.batchSize, ...slot.dims.slice(1)] : [...slot.dims];
        return [slot.name, slot.datatype, shape, at, n];
      }),
    }));
  }

  private finish(m: StubMessage): void {
    const running = this.running;
    if (!running || m.seq !== running.seq) return;
    // What the stub stored for it is read below (copied), before any later `exec` goes out.
    this.lastRead = running.seq;
    this.running = this.behind.shift();
    if (this.running) this.running.startNs = process.hrtime.bigint();
    if (typeof m.fail === 'string') {
      // Its decoupled requests end with this error (the scheduler's), not with the model's later sends.
      for (const rk of running.keys) this.forget(rk);
      const err: ServalError & ExecutionFailure = this.failure(m.fail, m.stub === true);
      // execute() ran (and raised, or answered wrongly): an execution all the same.
      if (m.tinfer !== undefined) err.executed = { computeInputNs: Number(m.tin), computeInferNs: Number(m.tinfer), computeOutputNs: 0 };
      running.reject(err);
      return;
    }
    if (running.keys.length) {
      // A decoupled model's execute() returned: its responses come (or came) as `resp`.
      const rescheduled: number[] = [];
      for (const rk of (m.resched ?? []) as number[]) {
        const open = this.open.get(rk);
        if (!open) continue;
        // Its next execution gives it a new key; the channel stays the request's.
        this.forget(rk);
        if (this.opts.iterative) rescheduled.push(running.rows.get(rk)!);
        else open.channel.send(notRescheduling(), true);
      }
      running.resolve({
        outputs: [],
        ...(rescheduled.length > 0 && { rescheduled }),
        ...(running.startNs !== undefined && { computeStartNs: running.startNs }),
        computeInputNs: Number(m.tin),
        computeInferNs: Number(m.tinfer),
        computeOutputNs: Number(m.tout),
      });
      return;
    }
    try {
      const lo = m.lo as number;
      const hi = m.hi as number;
      // Small outputs come attached to the message, larger ones through the "from stub" file.
      const bytes = m.bin ?? (hi > lo ? this.fromStub.read(lo, hi - lo) : Buffer.alloc(0));
      // Read for one response alone: its sender may free it once sent.
      const own = !m.bin && running.sole && wholeBuffer(bytes);
      if (own) soleResponseMemory(own);
      const rescheduled: number[] = [];
      type Resp = { err?: { msg: string; code: string }; outs?: TensorSpec[]; resched?: boolean };
      const responses = (m.resps as Resp[]).map((r, i): ExecOutput[] | Error => {
        if (r.resched) {
          if (!this.opts.iterative) return notRescheduling();
          rescheduled.push(i);
          return [];
        }
        if (r.err) return stubError(r.err);
        const outs: ExecOutput[] = [];
        for (const [name, datatype, shape, offset, length] of r.outs ?? []) {
          if (!isDataType(datatype)) return this.failure(`output '${name}' has datatype ${datatype}, which Serval does not support`);
          outs.push({ name, datatype, dims: shape, data: bytes.subarray(offset - lo, offset - lo + length) });
        }
        return outs;
      });
      running.resolve({
        outputs: [],
        responses,
        ...(rescheduled.length > 0 && { rescheduled }),
        ...(running.startNs !== undefined && { computeStartNs: running.startNs }),
        computeInputNs: Number(m.tin),
        computeInferNs: Number(m.tinfer),
        computeOutputNs: Number(m.tout),
      });
    } catch (e) {
      running.reject(asServalError(e));
    }
  }

  /** A BLS request of the model: run it through the server, hand the response(s) back. */
  private async bls(stub: StubProcess, m: StubMessage): Promise<void> {
    const inline = m.inline === true;
    const reply = (body: Record<string, unknown>, attached?: readonly Uint8Array[]): void => {
      if (stub === this.stub) stub.send({ t: 'bls_done', id: m.id, ...body }, attached);
    };
    const failed = (e: unknown): void => {
      const err = asServalError(e);
      reply({ err: { msg: err.message, code: err.code }, final: true });
    };
    let req: InferRequest;
    try {
      req = this.blsRequest(m, inline ? (m.bin ?? Buffer.alloc(0)) : undefined);
    } catch (e) {
      failed(e);
      return;
    }
    // InferenceRequest(trace=request.trace()) of a sampled request: a child of its trace, as in Triton.
    const parent = typeof m.tr === 'number' ? this.traces.get(m.tr) : undefined;
    if (m.stream === true) {
      this.opts.host.stream(
        req,
        {
          response: (res, final) => {
            const [outs, attached] = attach(res?.outputs ?? []);
            reply({ outs, final, ...(res?.parameters && { params: res.parameters }) }, attached);
          },
          error: (e, final) => reply({ err: { msg: e.message, code: e.code }, final }),
        },
        parent,
      );
      return;
    }
    try {
      const resp = await this.opts.host.infer(req, parent);
      if (stub !== this.stub) return;
      const written = inline ? undefined : this.writeBlsOutputs(resp);
      if (written) {
        reply({ outs: written, size: this.toStub.size });
        // Copied into the "to stub" file: a response's own memory goes at once.
        freeSent(resp.outputs.map((o) => o.data));
      } else {
        const [outs, attached] = attach(resp.outputs);
        reply({ outs }, attached);
      }
    } catch (e) {
      failed(e);
    }
  }

  /** The InferRequest of a `bls` message; its inputs in `attached` bytes, else in the "from stub" file. */
  private blsRequest(m: StubMessage, attached: Buffer | undefined): InferRequest {
    const specs = m.ins as TensorSpec[];
    let bytes = attached;
    let lo = 0;
    if (!bytes) {
      lo = Math.min(...specs.map((s) => s[3]));
      const hi = Math.max(...specs.map((s) => s[3] + s[4]));
      bytes = specs.length && hi > lo ? this.fromStub.read(lo, hi - lo) : Buffer.alloc(0);
    }
    const outs = m.outs as string[];
    // Read from the file for this request alone: the target's instance may take it over (adopt).
    const own = !attached && wholeBuffer(bytes);
    return {
      ...(own && { ownMemory: own }),
      modelName: String(m.model),
      modelVersion: String(m.version ?? ''),
      id: String(m.rid ?? ''),
      inputs: specs.map(([name, datatype, shape, offset, length]) => ({
        name,
        datatype,
        shape,
        data: bytes.subarray(offset - lo, offset - lo + length),
      })),
      outputs: outs.length ? outs.map((name) => ({ name })) : undefined,
      parameters: blsParameters(m),
    };
  }

  /** A BLS response's outputs into the "to stub" file, after the execution's inputs (none: no room, they go attached). */
  private writeBlsOutputs(resp: InferResponse): TensorSpec[] | undefined {
    const area = this.running?.area;
    if (!area) return undefined;
    const parts: Uint8Array[] = [];
    const out: TensorSpec[] = [];
    const start = align(area.top);
    let at = start;
    for (const o of resp.outputs) {
      const pad = align(at) - at;
      if (pad) parts.push(ZEROS.subarray(0, pad));
      at += pad;
      out.push([o.name, o.datatype, o.shape, at, o.data.byteLength]);
      parts.push(o.data);
      at += o.data.byteLength;
    }
    this.blsPeak = Math.max(this.blsPeak, at - start);
    if (at > area.limit) return undefined;
    if (at > start) this.toStub.writev(parts, start, at - start);
    area.top = at;
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const stub = this.stub ?? (await this.restarting?.catch(() => undefined));
    if (stub?.alive) {
      stub.send({ t: 'fin' });
      await stub.stop(5000);
    }
    this.running?.reject(ServalError.unavailable(`instance ${this.name} is closed`));
    for (const r of this.behind) r.reject(ServalError.unavailable(`instance ${this.name} is closed`));
    this.running = undefined;
    this.behind = [];
    const held = this.held;
    this.held = [];
    for (const h of held) h.fail(ServalError.unavailable(`instance ${this.name} is closed`));
    this.endOpen(ServalError.unavailable(`instance ${this.name} is closed`));
    this.toStub.close();
    this.fromStub.close();
  }
}

/**
 * A request released with RESCHEDULE by a model that is not an iterative sequence: Triton core's
 * refusal (2.51 aborts on it; Serval answers the request with it instead).
 */
function notRescheduling(): ServalError {
  return ServalError.invalidArg(
    'Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to handle such a flag.',
  );
}

/** An error a model answered with (InferenceResponse(error=...)), with the code it chose. */
function stubError(err: { msg: string; code: string }): ServalError {
  return new ServalError(ERROR_CODES.includes(err.code as ErrorCode) ? (err.code as ErrorCode) : 'INTERNAL', err.msg);
}

/** Tensors as specs with offsets into the bytes attached after them, and those bytes. */
function attach(outputs: readonly { name: string; datatype: string; shape: number[]; data: Uint8Array }[]): [TensorSpec[], Uint8Array[]] {
  const specs: TensorSpec[] = [];
  const parts: Uint8Array[] = [];
  let at = 0;
  for (const o of outputs) {
    specs.push([o.name, o.datatype, o.shape, at, o.data.byteLength]);
    parts.push(o.data);
    at += o.data.byteLength;
  }
  return [specs, parts];
}

/** A BLS request's parameters: the model's own, and Triton's request fields as Serval's parameters. */
function blsParameters(m: StubMessage): Params {
  const out: Params = {};
  const given = m.params;
  if (given && typeof given === 'object') {
    for (const [k, v] of Object.entries(given)) {
      if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out[k] = v;
    }
  }
  const corr = m.corr;
  if ((typeof corr === 'number' && corr !== 0) || (typeof corr === 'string' && corr !== '')) out.sequence_id = corr;
  const flags = Number(m.flags ?? 0);
  if (flags & 1) out.sequence_start = true;
  if (flags & 2) out.sequence_end = true;
  const timeout = Number(m.timeout ?? 0);
  if (timeout > 0) out.timeout = timeout;
  return out;
}
