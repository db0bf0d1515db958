// ONNX Runtime as a backend: models are `model.onnx` files; each instance is an InferenceSession
// (instance.ts) on a worker thread, on the CPU or on one CUDA device; small CPU models share a
// few workers (host.ts).
import path from 'node:path';
import { displayPath } from '../../kernel/confine.js';
import type { Backend } from '../backend.js';
import { autoCompleteConfig } from './autocomplete.js';
import { WorkerPool } from './host.js';
import { OrtInstance } from './instance.js';
import { DEFAULT_MODEL_FILENAME, ONNX_BACKEND, ONNX_PLATFORM } from './names.js';
import { defaultSharing, type OrtSettings, placeModel, type SharingSettings } from './placement.js';
import { readOnnxSignature } from './signature.js';

/** The backend with its `--backend-config=onnxruntime,...` settings (placement.ts parseSharing). */
export function createOnnxRuntimeBackend(sharing: SharingSettings = defaultSharing()): Backend<OrtSettings> {
  const pool = new WorkerPool(sharing);
  return {
    ...onnxRuntimeBackend,
    startInstance: (placement, settings, files) =>
      OrtInstance.start(
        placement,
        {
          ...settings,
          modelPath: path.resolve(files.modelPath),
          modelName: path.basename(files.modelDir),
          cudaDeviceId: placement.deviceId,
        },
        pool,
      ),
  };
}

/** The backend with every instance on a worker of its own (its registry entry in unit tests). */
export const onnxRuntimeBackend: Backend<OrtSettings> = {
  name: ONNX_BACKEND,
  platforms: [ONNX_PLATFORM],
  displayName: 'ONNX',
  defaultModelFilename: DEFAULT_MODEL_FILENAME,
  readSignature: (files) => readOnnxSignature(files.modelPath, displayPath(files.modelDir, files.modelPath)),
  // readSignature always gives one for an ONNX file.
  autoComplete: (config, signature) => (signature ? autoCompleteConfig(config, signature) : config),
  utf8BytesOnly: true,
  placeInstances: (config) => placeModel(config),
  startInstance: (placement, settings, files) =>
    OrtInstance.start(placement, {
      ...settings,
      modelPath: path.resolve(files.modelPath),
      modelName: path.basename(files.modelDir),
      cudaDeviceId: placement.deviceId,
    }),
};
