// ONNX Runtime as a backend: models are `model.onnx` files; each instance is a worker thread with
// its own InferenceSession (instance.ts), on the CPU or on one CUDA device.
import path from 'node:path';
import { displayPath } from '../../kernel/confine.js';
import type { Backend } from '../backend.js';
import { autoCompleteConfig } from './autocomplete.js';
import { OrtInstance } from './instance.js';
import { DEFAULT_MODEL_FILENAME, ONNX_BACKEND, ONNX_PLATFORM } from './names.js';
import { type OrtSettings, placeModel } from './placement.js';
import { readOnnxSignature } from './signature.js';

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
    OrtInstance.start(placement, { ...settings, modelPath: path.resolve(files.modelPath), cudaDeviceId: placement.deviceId }),
};
