// What the main thread and an ONNX Runtime worker exchange outside the shared-memory channel
// (channel.ts): start-up data, sessions opened on the worker, and their outcome.
import type { MessagePort } from 'node:worker_threads';
import type { ModelSignature } from '../../config/signature.js';
import type { OrtSettings } from './placement.js';

export interface SessionSettings extends OrtSettings {
  modelPath: string;
  /** The model's name, for error texts (else its folder, from modelPath). */
  modelName?: string;
  /** -1 for CPU, else the CUDA device id. */
  cudaDeviceId: number;
}

/** What a worker starts with: the doorbell every session on it rings, and the port for `ToWorker`. */
export interface WorkerData {
  /** Int32 word 0: bumped (and notified) after every command of any session, and every `ToWorker` message. */
  bell: SharedArrayBuffer;
  port: MessagePort;
}

/** One session's channel (channel.ts): the slots' controls and arenas, and its arena port. */
export interface SessionChannel {
  /** The slots' controls, one after the other (channel.ts Control.slots). */
  controls: SharedArrayBuffer;
  arenas: SharedArrayBuffer[];
  /** Carries replacement arenas in both directions. */
  port: MessagePort;
}

/**
 * Main thread → worker, on the worker's port (read with receiveMessageOnPort after a ring): open a
 * session; or exit, once the worker hosts no session any more. A session closes through its own
 * channel (OP_CLOSE), after the commands before it.
 */
export type ToWorker = ({ type: 'open'; id: number; settings: SessionSettings } & SessionChannel) | { type: 'exit' };

export type FromWorker =
  | { type: 'ready'; id: number; signature: ModelSignature }
  | { type: 'init-error'; id: number; message: string }
  | { type: 'closed'; id: number };

/**
 * Posted on a session's arena port: a grown arena (by whichever side grew it); a large execution's
 * own input memory (main thread → worker) or its outputs (worker → main thread), both transferred,
 * not copied (channel.ts LARGE_ARENA).
 */
export type ArenaMessage =
  | { slot: number; arena: SharedArrayBuffer }
  | { slot: number; input: ArrayBuffer }
  | { slot: number; outputs: ArrayBuffer[] };
