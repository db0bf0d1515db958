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

/**
 * Posted on the arena port: a grown arena (by whichever side grew it); a large execution's own
 * input memory (main thread → worker) or its outputs (worker → main thread), both transferred,
 * not copied (channel.ts LARGE_ARENA).
 */
export type ArenaMessage =
  | { slot: number; arena: SharedArrayBuffer }
  | { slot: number; input: ArrayBuffer }
  | { slot: number; outputs: ArrayBuffer[] };
