// Builds native/serval_mmap.c into native/build/serval_mmap.node (run by `npm ci` and `npm run
// build`). The addon is optional: where it cannot be built (no C compiler, node without its
// headers) this prints why and exits 0, and the Python backend keeps its positioned reads and
// writes (src/backends/python/shm.ts). Node-API only, compiled against the headers node ships, so
// nothing is downloaded. Skipped when the source is absent (the container's dependency layer) or
// the built file is newer than it.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const source = path.join(root, 'native', 'serval_mmap.c');
const target = path.join(root, 'native', 'build', 'serval_mmap.node');

function skip(why) {
  console.warn(
    `serval: the memory-map addon was not built (${why}); the Python backend will copy tensors with positioned reads and writes instead`,
  );
  process.exit(0);
}

if (!existsSync(source)) process.exit(0);
if (process.platform === 'win32') skip('not written for Windows');
if (existsSync(target) && statSync(target).mtimeMs >= statSync(source).mtimeMs) process.exit(0);

const candidates = [path.resolve(path.dirname(process.execPath), '..', 'include', 'node'), '/usr/include/node', '/usr/local/include/node'];
const include = candidates.find((dir) => existsSync(path.join(dir, 'node_api.h')));
if (!include) skip(`no node_api.h in ${candidates.join(', ')}`);

const cc = process.env.CC || 'cc';
const args = ['-O2', '-fPIC', '-shared', '-Wall', `-I${include}`, source, '-o', target];
if (process.platform === 'darwin') args.splice(3, 0, '-undefined', 'dynamic_lookup');
mkdirSync(path.dirname(target), { recursive: true });
try {
  execFileSync(cc, args, { stdio: ['ignore', 'ignore', 'pipe'] });
} catch (e) {
  const detail =
    e.code === 'ENOENT'
      ? `no C compiler: ${cc} not found`
      : String(e.stderr || e.message)
          .trim()
          .split('\n')[0];
  skip(detail);
}
