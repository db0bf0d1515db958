// Messages between the main thread and an ONNX Runtime instance worker.
import type { ExecRequest, ExecResult, ModelSignature } from '../backend.js';

export interface SessionSettings {
  modelPath: string;
  intraOpThreads: number;
  interOpThreads: number;
  /** -1 for CPU, else the CUDA device id. */
  cudaDeviceId: number;
  graphOptimizationLevel: 'disabled' | 'basic' | 'extended' | 'all';
}

export type ToWorker =
  | { type: 'exec'; id: number; req: ExecRequest }
  | { type: 'close' };

export type FromWorker =
  | { type: 'ready'; signature: ModelSignature }
  | { type: 'init-error'; message: string }
  | { type: 'result'; id: number; result: ExecResult }
  | { type: 'exec-error'; id: number; message: string };
