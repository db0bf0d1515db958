// The main-thread side of ONNX Runtime worker threads, and which instance runs on which.
//
// A worker thread costs a V8 isolate and onnxruntime-node's bindings (~10 MB and ~100 ms to
// start), more than a small model's session. So small CPU instances share a few workers (the
// pool, `shared-workers` of them): each worker hosts many sessions, each with its own channel
// (channel.ts), and one bell they all ring. Large models, GPU instances, and every instance when
// sharing is off (`shared-workers=0`) get a worker of their own, as before.
//
// A worker runs one session at a time: two instances of one model never share a worker (they
// would take turns, giving none of the parallelism a second instance is for), and a busy small
// model delays the others on its worker by at most one execution per pass (worker.ts main()).
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import type { InstancePlacement } from '../../config/resolved.js';
import type { ModelSignature } from '../../config/signature.js';
import { ServalError } from '../../kernel/errors.js';
import { projectRoot } from '../../kernel/paths.js';
import { Control, INITIAL_ARENA, SLOTS } from './channel.js';
import { chooseSharedWorker, type SharingSettings } from './placement.js';
import type { FromWorker, SessionSettings, ToWorker, WorkerData } from './protocol.js';

function workerFile(): string {
  const here = fileURLToPath(import.meta.url);
  const sibling = path.join(path.dirname(here), 'worker.js');
  if (existsSync(sibling)) return sibling;
  // Running from TypeScript sources (tests): use the compiled worker.
  return path.join(projectRoot(), 'dist', 'src', 'backends', 'onnxruntime', 'worker.js');
}

/** A session's channel as the main thread holds it. */
export interface Link {
  host: WorkerHost;
  id: number;
  controls: Control[];
  arenas: SharedArrayBuffer[];
  port: MessagePort;
}

interface Session {
  /** The model file: two sessions of one model never share a worker. */
  model: string;
  /** Called once if the worker dies while the session is on it, with why. */
  onDeath: (why: string) => void;
  /** Until the worker answers the open. */
  opened?: { resolve: (signature: ModelSignature) => void; reject: (e: Error) => void };
  closed?: () => void;
}

/** One worker thread and the sessions it hosts. */
export class WorkerHost {
  private readonly worker: Worker;
  private readonly bell: Int32Array;
  private readonly port: MessagePort;
  private readonly sessions = new Map<number, Session>();
  private readonly models = new Set<string>();
  private nextId = 1;
  private lastError: string | undefined;
  /** Set once the worker was asked to exit (no sessions left) or has exited. */
  private ending = false;
  private readonly exited: Promise<void>;

  constructor(
    readonly label: string,
    /** Called once the host takes no more sessions: it is ending, or its worker died. */
    private readonly onGone: (h: WorkerHost) => void = () => undefined,
  ) {
    const bell = new SharedArrayBuffer(4);
    this.bell = new Int32Array(bell);
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const data: WorkerData = { bell, port: port2 };
    this.worker = new Worker(workerFile(), { workerData: data, transferList: [port2] });
    this.worker.on('message', (m: FromWorker) => this.fromWorker(m));
    this.worker.on('error', (e) => {
      this.lastError = e.message;
    });
    this.exited = new Promise((resolve) => {
      this.worker.once('exit', (code) => {
        this.workerExited(code);
        resolve();
      });
    });
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  get hostedModels(): ReadonlySet<string> {
    return this.models;
  }

  /** The worker's thread id (-1 once it has exited). */
  get threadId(): number {
    return this.worker.threadId;
  }

  /** Wakes the worker: a command in some session's channel, or a message on its port. */
  ring(): void {
    Atomics.add(this.bell, 0, 1);
    Atomics.notify(this.bell, 0);
  }

  /** Opens a session of `settings.modelPath` on this worker; `onDeath` hears of the worker dying under it. */
  open(
    placement: InstancePlacement,
    settings: SessionSettings,
    onDeath: (why: string) => void,
  ): Promise<{ link: Link; signature: ModelSignature }> {
    if (this.ending) return Promise.reject(ServalError.internal(`instance ${placement.name}: its worker is ending`));
    const id = this.nextId++;
    const controls = Control.slots(SLOTS);
    const arenas = Array.from({ length: SLOTS }, () => new SharedArrayBuffer(INITIAL_ARENA));
    const { port1, port2 } = new MessageChannel();
    return new Promise<ModelSignature>((resolve, reject) => {
      this.sessions.set(id, {
        model: settings.modelPath,
        onDeath,
        opened: {
          resolve,
          reject: (e) => {
            port1.close();
            reject(e);
          },
        },
      });
      this.models.add(settings.modelPath);
      const msg: ToWorker = { type: 'open', id, settings, controls: controls[0]!.sab, arenas, port: port2 };
      this.port.postMessage(msg, [port2]);
      this.ring();
    }).then((signature) => ({ link: { host: this, id, controls, arenas, port: port1 }, signature }));
  }

  /**
   * Waits until the worker has closed session `id` (its OP_CLOSE was rung) or died; the last
   * session to go makes the worker exit, and this waits for that too.
   */
  async closed(id: number): Promise<void> {
    const s = this.sessions.get(id);
    if (s) {
      // A worker stuck in a run never gets to the close: one hosting nothing else is stopped
      // after 5 s (which fails what it was running); a shared one is left to finish its run.
      const timer = setTimeout(() => {
        if (this.sessions.size === 1) void this.worker.terminate();
      }, 5000);
      await new Promise<void>((resolve) => (s.closed = resolve));
      clearTimeout(timer);
    }
    if (!this.sessions.size) await this.end();
  }

  private async end(): Promise<void> {
    if (!this.ending) {
      this.ending = true;
      this.onGone(this);
      this.port.postMessage({ type: 'exit' } satisfies ToWorker);
      this.ring();
    }
    if (this.worker.threadId === -1) return;
    const timer = setTimeout(() => void this.worker.terminate(), 5000);
    await this.exited;
    clearTimeout(timer);
  }

  private fromWorker(m: FromWorker): void {
    const s = this.sessions.get(m.id);
    if (!s) return;
    if (m.type === 'ready') {
      s.opened?.resolve(m.signature);
      s.opened = undefined;
      return;
    }
    this.forget(m.id, s);
    if (m.type === 'init-error') s.opened?.reject(ServalError.invalidArg(m.message));
    else s.closed?.();
    // A session that failed to open may have been the only one.
    if (m.type === 'init-error' && !this.sessions.size) void this.end();
  }

  private forget(id: number, s: Session): void {
    this.sessions.delete(id);
    this.models.delete(s.model);
  }

  /** Every session on a worker that ended shares its fate: opening fails, open ones hear of it. */
  private workerExited(code: number): void {
    this.port.close();
    const wasEnding = this.ending;
    this.ending = true;
    if (!wasEnding) this.onGone(this);
    const why = this.lastError ?? `exit code ${code}`;
    const all = [...this.sessions.values()];
    this.sessions.clear();
    this.models.clear();
    for (const s of all) {
      if (s.opened) s.opened.reject(new WorkerGone(`its worker stopped (${why}) while the session opened`));
      else s.onDeath(why);
      s.closed?.();
    }
  }
}

/**
 * The total size of the files in a model's version directory (the model file, external weights,
 * or a `model.onnx/` directory): what "small" measures.
 */
export function modelBytes(modelPath: string): number {
  const walk = (dir: string): number => {
    let total = 0;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      total += e.isDirectory() ? walk(p) : statSync(p).size;
    }
    return total;
  };
  try {
    return walk(path.dirname(modelPath));
  } catch {
    return Number.POSITIVE_INFINITY; // unreadable: not known to be small
  }
}

/** A session that could not open because its worker died meanwhile (not because of its model). */
class WorkerGone extends Error {}

/** A WorkerGone as the error of the instance's start; other errors as they are. */
function gone(placement: InstancePlacement, e: unknown): unknown {
  return e instanceof WorkerGone ? ServalError.internal(`instance ${placement.name} failed to start: ${e.message}`) : e;
}

/** Chooses a worker for each instance: a shared one for small CPU instances, else one of its own. */
export class WorkerPool {
  private readonly shared: (WorkerHost | undefined)[];

  constructor(readonly sharing: SharingSettings) {
    this.shared = new Array<WorkerHost | undefined>(sharing.sharedWorkers).fill(undefined);
  }

  /** Whether an instance goes to a shared worker (when one without its model is free). */
  shares(placement: InstancePlacement, settings: SessionSettings): boolean {
    return (
      this.shared.length > 0 &&
      placement.kind === 'KIND_CPU' &&
      settings.cudaDeviceId < 0 &&
      modelBytes(settings.modelPath) <= this.sharing.sharedModelMaxBytes
    );
  }

  /** Opens a session for the instance on the worker chosen for it. */
  open(
    placement: InstancePlacement,
    settings: SessionSettings,
    onDeath: (why: string) => void,
    retried = false,
  ): Promise<{ link: Link; signature: ModelSignature }> {
    if (this.shares(placement, settings)) {
      const slots = this.shared.map((h) => (h ? { sessions: h.sessionCount, models: h.hostedModels } : undefined));
      const i = chooseSharedWorker(slots, settings.modelPath);
      if (i !== undefined) {
        let host = this.shared[i];
        if (!host) {
          host = new WorkerHost(`shared-${i}`, (h) => {
            if (this.shared[i] === h) this.shared[i] = undefined;
          });
          this.shared[i] = host;
        }
        const shared = { ...settings, intraOpThreads: settings.sharedIntraOpThreads ?? 1 };
        // A shared worker can die of another model while this session opens: that says nothing
        // about this model, so it tries once more (on a new worker).
        return host.open(placement, shared, onDeath).catch((e: unknown) => {
          if (!(e instanceof WorkerGone) || retried) throw gone(placement, e);
          return this.open(placement, settings, onDeath, true);
        });
      }
    }
    return new WorkerHost(placement.name).open(placement, settings, onDeath).catch((e: unknown) => {
      throw gone(placement, e);
    });
  }

  /** The shared workers running now (tests and the density benchmark look at them). */
  sharedHosts(): WorkerHost[] {
    return this.shared.filter((h): h is WorkerHost => h !== undefined);
  }
}

/** Every instance on a worker of its own: what an OrtInstance started without a pool uses. */
export const DEDICATED = new WorkerPool({ sharedWorkers: 0, sharedModelMaxBytes: 0 });
