// Which Python runs a model's stub, and how to say what is missing when it cannot.
//
// In order: the model's EXECUTION_ENV_PATH parameter (Triton's: an environment folder, or a
// conda-pack .tar.gz, `$$TRITON_MODEL_DIRECTORY` standing for the model's folder); the server's
// `--backend-config=python,interpreter=PATH`; the project's own .venv (tools/ci/setup-python.sh
// and `npm start` install numpy and Pillow there); `python3` on the PATH.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { confinedPathSync } from '../../kernel/confine.js';
import { ServalError } from '../../kernel/errors.js';
import { projectRoot } from '../../kernel/paths.js';

export const EXECUTION_ENV_PATH = 'EXECUTION_ENV_PATH';

/** The interpreter for a model without EXECUTION_ENV_PATH. */
export function defaultInterpreter(configured: string | undefined): string {
  if (configured) return configured;
  const venv = path.join(projectRoot(), '.venv', 'bin', 'python3');
  return existsSync(venv) ? venv : 'python3';
}

/** The interpreter inside an environment folder (a venv or an unpacked conda environment). */
function inEnvironment(dir: string, shown: string, model: string): string {
  for (const name of ['python3', 'python']) {
    const p = path.join(dir, 'bin', name);
    if (existsSync(p)) return p;
  }
  throw ServalError.invalidArg(`model '${model}': ${EXECUTION_ENV_PATH} '${shown}' has no bin/python3`);
}

/** tar's complaint without the command line (which holds server paths). */
function tarReason(e: unknown): string {
  const err = (e as { stderr?: Buffer }).stderr?.toString().trim().split('\n')[0];
  return err ? `: ${err.replace(/^tar: [^:]*: /, '')}` : '';
}

/** A conda-pack archive, unpacked once per archive and modification time into the temp folder. */
function unpacked(archive: string, shown: string, model: string): string {
  const stamp = `${archive}:${statSync(archive).mtimeMs}`;
  const dir = path.join(os.tmpdir(), 'serval-python-envs', createHash('sha256').update(stamp).digest('hex').slice(0, 16));
  if (existsSync(dir)) return dir;
  const partial = `${dir}.${process.pid}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  try {
    execFileSync('tar', ['-xzf', archive, '-C', partial], { stdio: ['ignore', 'ignore', 'pipe'] });
    renameSync(partial, dir);
  } catch (e) {
    rmSync(partial, { recursive: true, force: true });
    if (existsSync(dir)) return dir; // another load unpacked it meanwhile
    throw ServalError.invalidArg(`model '${model}': cannot unpack ${EXECUTION_ENV_PATH} '${shown}'${tarReason(e)}`);
  }
  return dir;
}

/**
 * The interpreter a model's stub runs with. The environment must lie inside the model's folder
 * (after symlinks): a config can come from a client's load request, and an environment is run.
 */
export function modelInterpreter(envPath: string | undefined, modelDir: string, model: string, configured: string | undefined): string {
  if (!envPath) return defaultInterpreter(configured);
  const relative = envPath.replaceAll('$$TRITON_MODEL_DIRECTORY', '.');
  const resolved = confinedPathSync(modelDir, '', { model, field: `parameter ${EXECUTION_ENV_PATH}`, value: relative });
  if (!existsSync(resolved)) throw ServalError.invalidArg(`model '${model}': ${EXECUTION_ENV_PATH} '${envPath}' does not exist`);
  if (/\.(tar\.gz|tgz)$/.test(resolved)) return inEnvironment(unpacked(resolved, envPath, model), envPath, model);
  if (statSync(resolved).isDirectory()) return inEnvironment(resolved, envPath, model);
  throw ServalError.invalidArg(`model '${model}': ${EXECUTION_ENV_PATH} '${envPath}' is neither a folder nor a .tar.gz archive`);
}

const HOW_TO_CHOOSE =
  'or point Serval at a Python environment that has it: --backend-config=python,interpreter=/path/to/python3 ' +
  `for every Python model, or the model parameter ${EXECUTION_ENV_PATH} for one`;

/** Why a stub could not start, saying what to install. */
export function interpreterProblem(
  interpreter: string,
  problem: { spawnError?: string; missing?: string | null; message?: string },
): string {
  if (problem.spawnError) {
    return (
      `the Python backend cannot run '${interpreter}' (${problem.spawnError}): install Python 3 (3.8 or newer) with numpy ` +
      `(npm run setup:python creates the project's .venv with both), ${HOW_TO_CHOOSE}`
    );
  }
  const base = problem.message?.trimEnd() ?? '';
  if (problem.missing) {
    return `${base}${base ? '; ' : ''}the Python package '${problem.missing}' is missing in '${interpreter}': install it with '${interpreter} -m pip install ${problem.missing}', ${HOW_TO_CHOOSE}`;
  }
  return base;
}
