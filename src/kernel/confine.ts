// Confinement of the files a model config names (model file, labels, warm-up and initial-state
// data, Python environments) to that model's folder. A config can come from a client (a repository
// load with a `config` override), so a name like "../../etc/passwd", an absolute path or a symlink
// leading out of the folder must never be opened. The check is on the real path (symlinks
// resolved) of both the folder and the file. Error texts name the config field and the value as
// written, never the server's absolute paths.
import { realpathSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { ServalError } from './errors.js';

/** What a confined name refers to, for error texts: the model and the config field naming it. */
export interface ConfinedName {
  /** The model's name, for the error text (none: the caller adds its own context). */
  model?: string;
  /** The config field that names the file, e.g. `default_model_filename`. */
  field: string;
  /** The name as the config writes it. */
  value: string;
}

function inside(root: string, full: string): boolean {
  const rel = path.relative(root, full);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

const prefix = (n: ConfinedName): string => (n.model === undefined ? '' : `model '${n.model}': `);

function escapeError(n: ConfinedName, base: string): ServalError {
  const where = base === '' ? "the model's folder" : `the model's '${base}' folder`;
  return ServalError.invalidArg(`${prefix(n)}${n.field} '${n.value}' must name a file inside ${where}`);
}

function readError(n: ConfinedName, e: unknown): ServalError {
  return ServalError.invalidArg(`${prefix(n)}cannot read ${n.field} '${n.value}': ${(e as NodeJS.ErrnoException).code ?? 'error'}`);
}

function lexical(modelDir: string, base: string, n: ConfinedName): { root: string; full: string } {
  const root = path.resolve(modelDir);
  if (n.value === '' || n.value.includes('\0') || path.isAbsolute(n.value)) throw escapeError(n, base);
  const full = path.resolve(root, base, n.value);
  if (!inside(path.resolve(root, base), full)) throw escapeError(n, base);
  return { root, full };
}

function checkReal(realRoot: string, realFull: string | undefined, n: ConfinedName, base: string): void {
  if (realFull !== undefined && !inside(realRoot, realFull)) throw escapeError(n, base);
}

const missing = (e: unknown): boolean => {
  const code = (e as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
};

/**
 * The absolute path of `value` (a name from the config, relative to `<modelDir>/<base>`), refused
 * unless it stays inside `<modelDir>/<base>` by name and inside `modelDir` after symlinks. A file
 * that does not exist passes (the caller's read reports it); a dangling symlink reads as missing.
 */
export async function confinedPath(modelDir: string, base: string, n: ConfinedName): Promise<string> {
  const { root, full } = lexical(modelDir, base, n);
  const realRoot = await realpath(root).catch(() => root);
  const realFull = await realpath(full).catch((e: unknown) => {
    if (missing(e)) return undefined;
    throw readError(n, e);
  });
  checkReal(realRoot, realFull, n, base);
  return full;
}

/** `confinedPath` for synchronous callers. */
export function confinedPathSync(modelDir: string, base: string, n: ConfinedName): string {
  const { root, full } = lexical(modelDir, base, n);
  let realRoot = root;
  try {
    realRoot = realpathSync(root);
  } catch {}
  let realFull: string | undefined;
  try {
    realFull = realpathSync(full);
  } catch (e) {
    if (!missing(e)) {
      throw readError(n, e);
    }
  }
  checkReal(realRoot, realFull, n, base);
  return full;
}

/**
 * A file's name for error texts sent to clients: relative to the repository (`<model>/<rest>`)
 * when it lies in the model's folder, else only its base name — never a server's absolute path.
 */
export function displayPath(modelDir: string, full: string): string {
  const root = path.resolve(modelDir);
  const abs = path.resolve(full);
  if (!inside(root, abs)) return path.basename(abs);
  return path.join(path.basename(root), path.relative(root, abs)).split(path.sep).join('/');
}

/**
 * `message` (from a backend: ONNX Runtime, a Python traceback) with the model folder's absolute
 * path replaced by the model's repository-relative name.
 */
export function scrubPaths(message: string, modelDir: string): string {
  const root = path.resolve(modelDir);
  let real = root;
  try {
    real = realpathSync(root);
  } catch {}
  const name = path.basename(root);
  let out = message.replaceAll(`${root}${path.sep}`, `${name}/`).replaceAll(root, name);
  if (real !== root) out = out.replaceAll(`${real}${path.sep}`, `${name}/`).replaceAll(real, name);
  return out;
}
