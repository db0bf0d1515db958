// The backends this server runs models with, in the order the registry prefers them for a config
// that names neither platform nor backend. A new backend is its folder and one line here.
import { createOnnxRuntimeBackend } from './backends/onnxruntime/backend.js';
import { parseSharing } from './backends/onnxruntime/placement.js';
import { PYTHON_BACKEND_CONFIG_KEYS, parseStubMalloc, pythonBackend } from './backends/python/backend.js';
import { BackendRegistry } from './backends/registry.js';
import { createLogger, type Logger } from './kernel/log.js';

export interface BackendSettings {
  log?: Logger;
  /** `--backend-config=BACKEND,KEY=VALUE` entries, as given. */
  backendConfig?: readonly string[];
}

/** `--backend-config` entries by backend; throws, naming the entry, on one that is malformed. */
export function parseBackendConfig(entries: readonly string[]): Map<string, Map<string, string>> {
  const out = new Map<string, Map<string, string>>();
  for (const e of entries) {
    const m = /^([^,=]+),([^=]+)=(.*)$/s.exec(e);
    if (!m) throw new Error(`--backend-config expects BACKEND,SETTING=VALUE, got '${e}'`);
    const [, backend, key, value] = m as unknown as [string, string, string, string];
    if (backend === 'python' && !PYTHON_BACKEND_CONFIG_KEYS.includes(key)) {
      throw new Error(`--backend-config: the python backend has no setting '${key}' (it takes ${PYTHON_BACKEND_CONFIG_KEYS.join(', ')})`);
    }
    if (!out.has(backend)) out.set(backend, new Map());
    out.get(backend)!.set(key, value);
  }
  return out;
}

export function builtinBackends(settings: BackendSettings = {}): BackendRegistry {
  const config = parseBackendConfig(settings.backendConfig ?? []);
  return new BackendRegistry([
    createOnnxRuntimeBackend(parseSharing(config.get('onnxruntime'))),
    pythonBackend({
      interpreter: config.get('python')?.get('interpreter'),
      malloc: parseStubMalloc(config.get('python')?.get('stub-malloc')),
      log: settings.log ?? createLogger(0),
    }),
  ]);
}
