// Model upload through the repository load API (Triton's model file override): a load request's
// `file:<path>` parameters (bytes) are written into a fresh temporary model folder, which the
// model then loads from instead of its repository folder. Every path is confined to that folder
// (as Triton's LocalizeRepoAgent: the joined, normalized path must stay inside it); the folder is
// removed when the model is unloaded or loaded from elsewhere (repository.ts).
import { mkdir, mkdtemp, realpath, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ServalError } from '../kernel/errors.js';

export const FILE_PREFIX = 'file:';

/** A load request's model files: `file:<path>` → contents. */
export type UploadFiles = Map<string, Uint8Array>;

export interface UploadedModel {
  /** The temporary model folder (real path). */
  dir: string;
  /** Removes the folder and everything in it. */
  remove(): Promise<void>;
}

/**
 * Triton's answer to a load whose override files cannot be used: the reason goes to its log and
 * the client gets "failed to poll from model repository" (INTERNAL). Serval keeps that text first
 * and names the reason after it, so the client sees what to fix.
 */
export function uploadError(model: string, reason: string): ServalError {
  // The client's fault all the same: not logged as the server's.
  return new ServalError('INTERNAL', `failed to load '${model}', failed to poll from model repository: ${reason}`, true);
}

/**
 * The `file:` parameters of a load request, checked as Triton checks them (bytes values, and a
 * `config` to go with them); undefined when the request has none.
 */
export function uploadFiles(model: string, parameters: Record<string, unknown>): UploadFiles | undefined {
  const files: UploadFiles = new Map();
  for (const [key, value] of Object.entries(parameters)) {
    if (!key.startsWith(FILE_PREFIX)) continue;
    if (!(value instanceof Uint8Array)) throw uploadError(model, `File parameter '${key}' must have bytes type for its value`);
    files.set(key, value);
  }
  if (files.size === 0) return undefined;
  if (parameters.config === undefined) throw uploadError(model, "Load parameter 'config' must be specified for model file override");
  return files;
}

/**
 * Writes `files` into a new temporary folder. A path that leaves the folder (`file:../x`), names
 * the folder itself (`file:`), or runs through a file written as another's folder is refused with
 * Triton's texts; nothing is left behind when one is.
 */
export async function writeUploadedModel(model: string, files: UploadFiles): Promise<UploadedModel> {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'serval-upload-')));
  const remove = (): Promise<void> => rm(dir, { recursive: true, force: true });
  try {
    // In path order, whatever order the request's map came in (a gRPC map has none): a file is
    // written before anything that names it as a folder, so such a clash always reads the same.
    for (const [key, bytes] of [...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      // Joined, not resolved, as Triton's JoinPath: 'file:/etc/x' lands at <folder>/etc/x.
      const full = path.join(dir, key.slice(FILE_PREFIX.length));
      const rel = path.relative(dir, full);
      if (rel.startsWith('..') || path.isAbsolute(rel) || key.includes('\0')) {
        throw uploadError(model, `Invalid file parameter '${key}' with normalized path '${full}' must stay within model directory.`);
      }
      if (rel === '') throw uploadError(model, `Invalid file parameter '${key}': it names the model directory, not a file in it`);
      const parent = path.dirname(full);
      const st = await stat(parent).catch(() => undefined);
      if (st && !st.isDirectory()) throw uploadError(model, `Invalid file parameter '${key}', directory has been created as a file`);
      if (!st) {
        await mkdir(parent, { recursive: true }).catch(() => {
          throw uploadError(model, `Invalid file parameter '${key}', directory has been created as a file`);
        });
      }
      // Our own fresh folder holds no links, so nothing written here can land outside it.
      await writeFile(full, bytes, { flag: 'wx' }).catch((e: NodeJS.ErrnoException) => {
        const why =
          e.code === 'EISDIR' || e.code === 'EEXIST' ? 'a directory (or another file) of that name was written before it' : e.code;
        throw uploadError(model, `Invalid file parameter '${key}': cannot write it: ${why}`);
      });
    }
  } catch (e) {
    await remove();
    throw e;
  }
  return { dir, remove };
}
