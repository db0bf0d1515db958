// The optional memory-map addon (native/serval_mmap.c, built by tools/native/build.mjs during
// `npm ci`). Without it, or with SERVAL_PYTHON_MMAP=0, shm.ts falls back to positioned reads and
// writes; the stub side is the same either way.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface MapAddon {
  /** An ArrayBuffer over a shared mapping of the file's first `length` bytes. */
  map(fd: number, length: number): ArrayBuffer;
  /** Detaches `buffer` (its views become empty) and unmaps its memory. */
  unmap(buffer: ArrayBuffer): void;
  /** Gives the file's pages in [at, at + length) now: ENOSPC is thrown here, not a SIGBUS later. */
  reserve(fd: number, at: number, length: number): void;
}

const FILE = path.join('native', 'build', 'serval_mmap.node');

function load(): { addon?: MapAddon; reason: string } {
  if (process.env.SERVAL_PYTHON_MMAP === '0') return { reason: 'switched off by SERVAL_PYTHON_MMAP=0' };
  // src/backends/python under the root, dist/src/backends/python, or a copy of dist one folder
  // further down (tmp/ab-a/src/backends/python, as tools/bench/ab.sh makes): look upwards for the build.
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++, dir = path.dirname(dir)) {
    const file = path.join(dir, FILE);
    if (!existsSync(file)) continue;
    try {
      return { addon: createRequire(import.meta.url)(file) as MapAddon, reason: `loaded from ${file}` };
    } catch (e) {
      return { reason: `${file} does not load: ${e instanceof Error ? e.message : String(e)}` };
    }
  }
  return { reason: `not built: no ${FILE} (npm ci builds it where a C compiler is found)` };
}

const loaded = load();

/** The addon, or undefined where it is not built or is switched off. */
export const mapAddon: MapAddon | undefined = loaded.addon;
/** Why the addon is or is not in use (for the log at verbose level). */
export const mapAddonStatus: string = loaded.reason;
