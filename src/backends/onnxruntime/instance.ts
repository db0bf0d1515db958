// The main-thread side of one ONNX Runtime instance: owns the worker, matches replies to calls.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ServalError } from '../../core/errors.js';
import { projectRoot } from '../../paths.js';
import type { ExecRequest, ExecResult, InstancePlacement, ModelInstance, ModelSignature } from '../backend.js';
import type { FromWorker, SessionSettings, ToWorker } from './protocol.js';

function workerFile(): string {
  const here = fileURLToPath(import.meta.url);
  const sibling = path.join(path.dirname(here), 'worker.js');
  if (existsSync(sibling)) return sibling;
  // Running from TypeScript sources (tests): use the compiled worker.
  return path.join(projectRoot(), 'dist', 'src', 'backends', 'onnxruntime', 'worker.js');
}

interface Pending {
  resolve: (r: ExecResult) => void;
  reject: (e: Error) => void;
}

export class OrtInstance implements ModelInstance {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private dead: string | undefined;

  private constructor(
    readonly placement: InstancePlacement,
    private readonly worker: Worker,
    readonly signature: ModelSignature,
  ) {
    worker.on('message', (msg: FromWorker) => this.onMessage(msg));
    worker.on('error', (e) => this.fail(`instance ${placement.name} failed: ${e.message}`));
    worker.on('exit', (code) => this.fail(`instance ${placement.name} exited (code ${code})`));
  }

  static start(placement: InstancePlacement, settings: SessionSettings): Promise<OrtInstance> {
    return new Promise((resolve, reject) => {
      const worker = new Worker(workerFile(), { workerData: settings });
      const onEarly = (msg: FromWorker): void => {
        cleanup();
        if (msg.type === 'ready') resolve(new OrtInstance(placement, worker, msg.signature));
        else {
          void worker.terminate();
          reject(ServalError.invalidArg(msg.type === 'init-error' ? msg.message : 'unexpected message from instance'));
        }
      };
      const onError = (e: Error): void => {
        cleanup();
        reject(ServalError.internal(`instance ${placement.name} failed to start: ${e.message}`));
      };
      const onExit = (code: number): void => {
        cleanup();
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

  execute(req: ExecRequest): Promise<ExecResult> {
    if (this.dead) return Promise.reject(ServalError.internal(this.dead));
    const id = this.nextId++;
    return new Promise<ExecResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const msg: ToWorker = { type: 'exec', id, req };
      this.worker.postMessage(msg, [req.buffer]);
    });
  }

  async close(): Promise<void> {
    if (this.dead) return;
    this.dead = `instance ${this.placement.name} is closed`;
    const exited = new Promise<void>((r) => this.worker.once('exit', () => r()));
    this.worker.postMessage({ type: 'close' } satisfies ToWorker);
    const timer = setTimeout(() => void this.worker.terminate(), 5000);
    await exited;
    clearTimeout(timer);
  }

  private onMessage(msg: FromWorker): void {
    if (msg.type !== 'result' && msg.type !== 'exec-error') return;
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.type === 'result') p.resolve(msg.result);
    else p.reject(ServalError.internal(`onnxruntime execution failed: ${msg.message}`));
  }

  private fail(reason: string): void {
    if (!this.dead) this.dead = reason;
    for (const p of this.pending.values()) p.reject(ServalError.internal(reason));
    this.pending.clear();
  }
}
