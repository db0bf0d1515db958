// Auto-complete of a Python model: its TritonPythonModel.auto_complete_config(config), run once
// per load in a short-lived stub (as in Triton, nothing it creates survives into initialize).
import { readFile } from 'node:fs/promises';
import { fromTritonConfigJson, toTritonConfigJson } from '../../config/config_json.js';
import type { ModelConfig } from '../../config/types.js';
import { ServalError } from '../../kernel/errors.js';
import { oneLine } from './instance.js';
import { interpreterProblem } from './interpreter.js';
import { StubProcess } from './stub_process.js';

/** The completed config, or `config` itself when model.py defines no auto_complete_config. */
export async function pythonAutoComplete(config: ModelConfig, modelPath: string, interpreter: string): Promise<ModelConfig> {
  const name = config.name ?? '';
  const source = await readFile(modelPath, 'utf8').catch(() => '');
  // Starting Python costs a fraction of a second: only when the file can define the method.
  if (!source.includes('auto_complete_config')) return config;
  const stub = StubProcess.spawn(interpreter, 'autocomplete');
  const answer = new Promise<ModelConfig>((resolve, reject) => {
    stub.onMessage = (m) => {
      if (m.t === 'autocomplete_done') {
        if (m.config === null || m.config === undefined) resolve(config);
        else {
          try {
            resolve({ ...(fromTritonConfigJson(JSON.stringify(m.config)) as ModelConfig), name });
          } catch (e) {
            reject(ServalError.invalidArg(`model '${name}': auto_complete_config returned an invalid config: ${(e as Error).message}`));
          }
        }
      } else if (m.t === 'init_error' || m.t === 'fatal') {
        const what = m.t === 'init_error' ? `auto_complete_config of model '${name}' failed: ` : '';
        reject(
          ServalError.invalidArg(
            interpreterProblem(interpreter, { message: what + oneLine(String(m.msg)), missing: m.missing as string | null }),
          ),
        );
      }
    };
    void stub.exited.then((e) =>
      reject(
        ServalError.invalidArg(
          e.spawnError
            ? interpreterProblem(interpreter, { spawnError: e.spawnError })
            : `model '${name}': the Python stub running auto_complete_config exited (code ${e.code ?? e.signal})`,
        ),
      ),
    );
  });
  stub.send({ t: 'autocomplete', model_path: modelPath, config: toTritonConfigJson(config as Record<string, unknown>) });
  try {
    return await answer;
  } finally {
    // The stub waits for this before it exits, so its exit never overtakes its answer.
    if (stub.alive) stub.send({ t: 'fin' });
    await stub.stop(5000);
  }
}
