// Locations inside the installed package, valid both from src/ (tests) and dist/src/ (built).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

export function projectRoot(): string {
  if (root) return root;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`cannot find the project root (package.json) above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
  root = dir;
  return dir;
}

export function protoDir(): string {
  return path.join(projectRoot(), 'proto');
}
