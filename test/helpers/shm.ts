// POSIX shared memory objects for the shared-memory tests, made the way clients make them
// (files under /dev/shm, what shm_open creates) and removed again by `cleanup()`.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface ShmObjects {
  /** The unique start of every name this set makes: `${tag}_missing` names an object that does not exist. */
  tag: string;
  /** A new object holding `bytes` (or `size` zero bytes); returns its key, '/<unique name>'. */
  create(name: string, bytes: Uint8Array | number): string;
  /** The object's file. */
  file(key: string): string;
  /** Its current contents. */
  read(key: string): Buffer;
  /** Removes every object this set created. */
  cleanup(): void;
}

export function shmObjects(prefix = 'serval_test'): ShmObjects {
  const tag = `${prefix}_${process.pid}_${randomBytes(3).toString('hex')}`;
  const made = new Set<string>();
  const file = (key: string): string => path.join('/dev/shm', key.replace(/^\//, ''));
  return {
    tag,
    create(name, bytes) {
      const key = `/${tag}_${name}`;
      writeFileSync(file(key), typeof bytes === 'number' ? new Uint8Array(bytes) : bytes);
      made.add(file(key));
      return key;
    },
    file,
    read: (key) => readFileSync(file(key)),
    cleanup() {
      for (const f of made) rmSync(f, { force: true });
      made.clear();
    },
  };
}
