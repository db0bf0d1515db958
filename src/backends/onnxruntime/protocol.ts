// What the main thread and an ONNX Runtime instance worker exchange outside the shared-memory
// channel (channel.ts): start-up data and the start-up outcome.
import type { MessagePort } from 'node:worker_threads';
import type { ModelSignature } from '../backend.js';

export interface SessionSettings {
  modelPath: string;
  intraOpThreads: number;
  interOpThreads: number;
  /** ORT's session.intra_op.allow_spinning: idle intra-op threads busy-wait for work. */
  allowSpinning: boolean;
  /** -1 for CPU, else the CUDA device id. */
  cudaDeviceId: number;
  graphOptimizationLevel: 'disabled' | 'basic' | 'extended' | 'all';
}

export interface WorkerData {
  settings: SessionSettings;
  /** One per slot (channel.ts). */
  controls: SharedArrayBuffer[];
  arenas: SharedArrayBuffer[];
  /** Carries replacement arenas in both directions. */
  port: MessagePort;
}

export type FromWorker =
  | { type: 'ready'; signature: ModelSignature }
  | { type: 'init-error'; message: string };

/** Posted on the arena port by whichever side grew the arena. */
export interface ArenaMessage {
  slot: number;
  arena: SharedArrayBuffer;
}
