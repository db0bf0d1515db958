// The backends this server runs models with, in the order the registry prefers them for a config
// that names neither platform nor backend. A new backend is its folder and one line here.
import { onnxRuntimeBackend } from './backends/onnxruntime/backend.js';
import { BackendRegistry } from './backends/registry.js';

export function builtinBackends(): BackendRegistry {
  return new BackendRegistry([onnxRuntimeBackend]);
}
