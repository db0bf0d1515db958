// One running Python stub process (stub/serval_python_stub.py) and its control channel.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { projectRoot } from '../../kernel/paths.js';
import { encodeFrame, encodeFrameBuffer, FrameReader, type StubMessage } from './channel.js';

/** Frames with up to this many attached bytes are joined into one buffer before the write. */
const JOIN_BYTES = 64 << 10;

/** The folder of the stub script and of the `triton_python_backend_utils` module models import. */
export function stubDirectory(): string {
  return path.join(projectRoot(), 'src', 'backends', 'python', 'stub');
}

export interface StubExit {
  /** Set when the interpreter could not be started at all (ENOENT, EACCES). */
  spawnError?: string;
  code: number | null;
  signal: NodeJS.Signals | null;
}

// Stubs still running when the server process ends (a fatal error, process.exit) go with it.
const live = new Set<ChildProcess>();
let exitHook = false;

/**
 * How a stub's C allocator treats memory the model frees: `keep` it for the next execution (fixed
 * glibc thresholds, everything given back after a second idle; serval_python_stub.py,
 * MemoryKeeper), or leave glibc's `system` behaviour, which hands the top of the heap back after
 * every execution that freed more than twice its largest block.
 */
export type StubMalloc = 'keep' | 'system';

export class StubProcess {
  readonly exited: Promise<StubExit>;
  private readonly reader = new FrameReader();
  private readonly control: Duplex;
  private done: StubExit | undefined;
  /** Frames sent `later`, written together at the end of the event loop's turn. */
  private later: Buffer[] = [];
  private readonly sendLater = (): void => {
    const frames = this.later;
    if (!frames.length) return;
    this.later = [];
    if (!this.done) this.control.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames));
  };
  /** Receives every message, in order. */
  onMessage: (msg: StubMessage) => void = () => undefined;

  private constructor(private readonly child: ChildProcess) {
    this.control = child.stdio[3] as Duplex;
    this.exited = new Promise((resolve) => {
      const finish = (e: StubExit): void => {
        if (this.done) return;
        this.done = e;
        live.delete(child);
        this.control.destroy();
        resolve(e);
      };
      child.once('error', (e: NodeJS.ErrnoException) => finish({ spawnError: e.code ?? e.message, code: null, signal: null }));
      child.once('exit', (code, signal) => finish({ code, signal }));
    });
    this.control.on('data', (chunk: Buffer) => {
      let msgs: StubMessage[];
      try {
        msgs = this.reader.push(chunk);
      } catch {
        this.kill();
        return;
      }
      for (const m of msgs) this.onMessage(m);
    });
    // A stub that dies mid-write leaves the socket broken; the exit event reports it.
    this.control.on('error', () => undefined);
  }

  /**
   * Starts `interpreter stub.py mode`. `fds` become the stub's descriptors 4, 5, ... (the
   * shared-memory files); the model's own prints go to the server's stdout and stderr. `env`: set
   * for the stub besides the server's own environment.
   */
  static spawn(interpreter: string, mode: 'instance' | 'autocomplete', fds: number[] = [], env: Record<string, string> = {}): StubProcess {
    const dir = stubDirectory();
    const child = spawn(interpreter, ['-u', path.join(dir, 'serval_python_stub.py'), mode], {
      stdio: ['ignore', 'inherit', 'inherit', 'pipe', ...fds],
      env: {
        ...process.env,
        PYTHONPATH: [dir, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter),
        PYTHONUNBUFFERED: '1',
        // No __pycache__ folders written into the model repository (or into Serval's own tree).
        PYTHONDONTWRITEBYTECODE: '1',
        ...env,
      },
    });
    live.add(child);
    if (!exitHook) {
      exitHook = true;
      process.once('exit', () => {
        for (const c of live) c.kill('SIGKILL');
      });
    }
    return new StubProcess(child);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return this.done === undefined;
  }

  /**
   * Sends `msg`, with `attached` bytes after it (tensor data its offsets point into). `later`: the
   * stub is busy and will not read it before its running execution ends, so a small frame may wait
   * for the end of this turn of the event loop and go with the others sent meanwhile: one write
   * (and at most one wake-up of the stub) for several executions instead of one each.
   */
  send(msg: StubMessage, attached?: readonly Uint8Array[], later = false): void {
    if (this.done) return;
    let binLength = 0;
    for (const a of attached ?? []) binLength += a.byteLength;
    if (binLength <= JOIN_BYTES && later) {
      this.later.push(encodeFrameBuffer(msg, attached));
      if (this.later.length === 1) setImmediate(this.sendLater);
      return;
    }
    // In order: what waits goes first.
    if (this.later.length) this.sendLater();
    if (binLength <= JOIN_BYTES) {
      this.control.write(encodeFrameBuffer(msg, attached));
      return;
    }
    // One writev for the frame and its large attachments, without joining them first.
    this.control.cork();
    for (const p of encodeFrame(msg, attached)) this.control.write(p);
    this.control.uncork();
  }

  kill(): void {
    if (!this.done) this.child.kill('SIGKILL');
  }

  /** Waits up to `ms` for the stub to exit by itself, then kills it. */
  async stop(ms: number): Promise<StubExit> {
    const timer = setTimeout(() => this.kill(), ms);
    const e = await this.exited;
    clearTimeout(timer);
    return e;
  }
}
