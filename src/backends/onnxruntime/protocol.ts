// What the main thread and an ONNX Runtime instance worker exchange outside the shared-memory
// channel (channel.ts): start-up data and the start-up outcome.
import type { MessagePort } from 'node:worker_threads';
import type { ModelSignature } from '../../config/signature.js';
import type { OrtSettings } from './placement.js';

export interface SessionSettings extends OrtSettings {
  modelPath: string;
  /** -1 for CPU, else the CUDA device id. */
  cudaDeviceId: number;
}

export interface WorkerData {
  settings: SessionSettings;
  /** One per slot (channel.ts). */
  controls: SharedArrayBuffer[];
  arenas: SharedArrayBuffer[];
  /** Carries replacement arenas in both directions. */
  port: MessagePort;
}

export type FromWorker = { type: 'ready'; signature: ModelSignature } | { type: 'init-error'; message: string };

/** Posted on the arena port by whichever side grew the arena. */
export interface ArenaMessage {
  slot: number;
  arena: SharedArrayBuffer;
}
