// Triton's Python backend (`backend: "python"`): a model is a `model.py` defining
// `class TritonPythonModel`; each instance is a Python stub process (instance.ts) that imports it
// and calls initialize / execute / finalize, with Serval's `triton_python_backend_utils`
// (stub/triton_python_backend_utils.py) as the `pb_utils` it imports. The model's inputs and
// outputs are what its config declares (or what its auto_complete_config adds).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { displayPath } from '../../kernel/confine.js';
import { ServalError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/log.js';
import type { Backend } from '../backend.js';
import { pythonAutoComplete } from './autocomplete.js';
import { PythonInstance } from './instance.js';
import { EXECUTION_ENV_PATH, modelInterpreter } from './interpreter.js';
import { mapAddon, mapAddonStatus } from './native_map.js';
import { type PythonSettings, placePythonModel } from './placement.js';
import type { StubMalloc } from './stub_process.js';

export type { StubMalloc };

export interface PythonBackendOptions {
  /** `--backend-config=python,interpreter=PATH`: the Python for every model without EXECUTION_ENV_PATH. */
  interpreter?: string;
  /** `--backend-config=python,stub-malloc=keep|system` (default keep): see StubMalloc. */
  malloc?: StubMalloc;
  log: Logger;
}

/** The keys `--backend-config=python,KEY=VALUE` takes; Triton's shared-memory keys are accepted and have no effect. */
export const PYTHON_BACKEND_CONFIG_KEYS = [
  'interpreter',
  'shm-default-byte-size',
  'shm-growth-byte-size',
  'stub-timeout-seconds',
  'shm-region-prefix-name',
  'stub-malloc',
];

/** `stub-malloc`'s value (undefined: keep); throws, naming the setting, on any other. */
export function parseStubMalloc(value: string | undefined): StubMalloc {
  if (value === undefined || value === 'keep' || value === 'system') return value ?? 'keep';
  throw new Error(`--backend-config: the python backend's stub-malloc is keep or system, got '${value}'`);
}

export function pythonBackend(opts: PythonBackendOptions): Backend<PythonSettings> {
  opts.log.debug(
    `Python backend: tensors reach the stubs ${mapAddon ? 'through memory maps' : 'by positioned reads and writes'} (memory-map addon: ${mapAddonStatus})`,
  );
  return {
    name: 'python',
    platforms: [],
    displayName: 'Python',
    outputsInModelOrder: true,
    defaultModelFilename: 'model.py',
    async readSignature(files) {
      if (!existsSync(files.modelPath)) {
        throw ServalError.invalidArg(
          `model '${path.basename(files.modelDir)}': the Python model file ${displayPath(files.modelDir, files.modelPath)} does not exist`,
        );
      }
      // A Python model's inputs and outputs are its config's.
      return undefined;
    },
    autoComplete(config, _signature, files) {
      const env = config.parameters?.[EXECUTION_ENV_PATH]?.string_value;
      const interpreter = modelInterpreter(env || undefined, files.modelDir, config.name ?? '', opts.interpreter);
      return pythonAutoComplete(config, files.modelPath, interpreter);
    },
    placeInstances: (config) => placePythonModel(config),
    startInstance(placement, settings, files, host) {
      const modelDir = path.resolve(files.modelDir);
      const name = path.basename(modelDir);
      const interpreter = modelInterpreter(settings.executionEnvPath, modelDir, name, opts.interpreter);
      return PythonInstance.start(placement, {
        interpreter,
        modelPath: path.resolve(files.modelPath),
        host,
        log: opts.log,
        decoupled: settings.decoupled,
        iterative: settings.iterative,
        malloc: opts.malloc ?? 'keep',
        args: {
          model_config: settings.modelConfigJson,
          model_instance_kind: placement.kind === 'KIND_GPU' ? 'GPU' : 'CPU',
          model_instance_name: placement.name,
          model_instance_device_id: String(Math.max(0, placement.deviceId)),
          model_repository: modelDir,
          model_version: path.basename(path.dirname(path.resolve(files.modelPath))),
          model_name: name,
        },
      });
    },
  };
}
