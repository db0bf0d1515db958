// The Python backend's shared-memory files (src/backends/python/shm.ts), through the memory-map
// addon and through the positioned reads and writes it replaces: what one side writes is what the
// file holds for the other side (the stub maps the same file), at any offset, across growth on
// either side, and a read past the file's end is an error rather than garbage or a crash.
import { copyFileSync, fstatSync, ftruncateSync, mkdirSync, mkdtempSync, readFileSync, readSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { mapAddon, mapAddonStatus } from '../../src/backends/python/native_map.js';
import { ShmFile } from '../../src/backends/python/shm.js';
import { expectServalError } from '../helpers/errors.js';

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

/** The file's bytes as another process sees them: read through the descriptor, not the class. */
function onDisk(file: ShmFile, at: number, n: number): Buffer {
  const out = Buffer.alloc(n);
  let done = 0;
  while (done < n) done += readSync(file.fd, out, done, n - done, at + done);
  return out;
}

describe('the memory-map addon', () => {
  it('is built and loads where CI runs (a C compiler and node headers are there)', () => {
    if (process.env.CI !== 'true') return;
    expect(mapAddonStatus).toMatch(/^loaded from /);
    expect(mapAddon).toBeDefined();
  });

  it.runIf(mapAddon)('is found from a copy of the build one folder below the project (tools/bench/ab.sh makes such copies)', async () => {
    // The module's own folder five levels below the root, as in tmp/ab-a/src/backends/python.
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
    mkdirSync(path.join(root, 'tmp'), { recursive: true });
    const copy = mkdtempSync(path.join(root, 'tmp', 'native-lookup-'));
    try {
      const dir = path.join(copy, 'src', 'backends', 'python');
      mkdirSync(dir, { recursive: true });
      copyFileSync(path.join(root, 'src', 'backends', 'python', 'native_map.ts'), path.join(dir, 'native_map.ts'));
      const mod = (await import(
        pathToFileURL(path.join(dir, 'native_map.ts')).href
      )) as typeof import('../../src/backends/python/native_map.js');
      expect(mod.mapAddonStatus).toBe(`loaded from ${path.join(root, 'native', 'build', 'serval_mmap.node')}`);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it.runIf(mapAddon)('maps a file, detaches on unmap, and names a bad descriptor', () => {
    const addon = mapAddon!;
    const file = ShmFile.create('addon', 1 << 16, null);
    try {
      const buffer = addon.map(file.fd, 1 << 16);
      const view = new Uint8Array(buffer);
      view.set([7, 8, 9], 100);
      expect([...onDisk(file, 100, 3)]).toEqual([7, 8, 9]);
      addon.unmap(buffer);
      // Every view is empty now: nothing can touch the unmapped memory.
      expect(buffer.byteLength).toBe(0);
      expect(view.byteLength).toBe(0);
      addon.unmap(buffer);
      expect(addon.map(file.fd, 0).byteLength).toBe(0);
      expect(() => addon.map(123456, 4096)).toThrow(/mmap: Bad file descriptor/);
      expect(() => addon.map(-1, 4096)).toThrow(TypeError);
      expect(() => addon.reserve(123456, 0, 4096)).toThrow(/posix_fallocate: Bad file descriptor/);
    } finally {
      file.close();
    }
  });

  it.runIf(mapAddon && process.platform === 'linux')('gives the memory back once unmapped, not at some later collection', async () => {
    const addon = mapAddon!;
    const file = ShmFile.create('unmapped', 1 << 20, null);
    const ours = () =>
      readFileSync('/proc/self/maps', 'utf8')
        .split('\n')
        .filter((l) => l.includes('_unmapped_')).length;
    try {
      const before = ours();
      const buffer = addon.map(file.fd, 1 << 20);
      expect(ours()).toBe(before + 1);
      addon.unmap(buffer);
      // Node runs the finalizer (the munmap) on its next turn.
      await new Promise((r) => setTimeout(r, 20));
      expect(ours()).toBe(before);
    } finally {
      file.close();
    }
    // A mapped file, grown (a second mapping) and closed: none of its mappings stay.
    const mapped = ShmFile.create('unmapped', 1 << 20, addon);
    mapped.write(pattern(10, 1), 0);
    mapped.write(pattern(10, 2), 3 << 20);
    mapped.close();
    await new Promise((r) => setTimeout(r, 20));
    expect(ours()).toBe(0);
  });
});

// Both ways where the addon is built (CI asserts it is, above); the fallback alone elsewhere.
const modes = [
  ...(mapAddon ? [{ name: 'through the memory map', addon: mapAddon }] : []),
  { name: 'through positioned reads and writes', addon: null },
];

describe.each(modes)('a shared-memory file $name', ({ addon }) => {
  const open = (size: number) => ShmFile.create('test', size, addon);

  it('writes and reads back at any offset, as the file holds it', () => {
    const file = open(1 << 20);
    try {
      expect(file.mapped).toBe(addon !== null);
      const a = pattern(100_000, 1);
      file.write(a, 4096);
      expect(onDisk(file, 4096, a.byteLength).equals(a)).toBe(true);
      expect(file.read(4096, a.byteLength).equals(a)).toBe(true);
      // Another writer (the stub) changes the bytes: a read sees them, not a stale copy.
      const b = pattern(5000, 2);
      writeSync(file.fd, b, 0, b.byteLength, 10_000);
      expect(file.read(10_000, 5000).equals(b)).toBe(true);
      // The buffer read is the caller's: writing the file afterwards does not change it.
      const held = file.read(10_000, 5000);
      file.write(pattern(5000, 3), 10_000);
      expect(held.equals(b)).toBe(true);
    } finally {
      file.close();
    }
  });

  it('writes parts one after another from a position', () => {
    const file = open(1 << 20);
    try {
      const parts = [pattern(3, 1), pattern(70_000, 2), pattern(0, 3), pattern(129, 4)];
      file.writev(parts, 640, 70_132);
      expect(onDisk(file, 640, 70_132).equals(Buffer.concat(parts))).toBe(true);
    } finally {
      file.close();
    }
  });

  it('grows for a write past its size, keeping what it held', () => {
    const file = open(1 << 20);
    try {
      const head = pattern(4096, 5);
      file.write(head, 0);
      const tail = pattern(300_000, 6);
      const at = (3 << 20) + 17;
      file.write(tail, at);
      expect(file.size).toBeGreaterThanOrEqual(at + tail.byteLength);
      expect(fstatSync(file.fd).size).toBe(file.size);
      expect(file.read(0, 4096).equals(head)).toBe(true);
      expect(file.read(at, tail.byteLength).equals(tail)).toBe(true);
      // Mapped, every page up to the write's end has its memory before the store (a full tmpfs
      // fails the write with ENOSPC rather than killing the server with SIGBUS at the store).
      if (addon) expect(fstatSync(file.fd).blocks * 512).toBeGreaterThanOrEqual(at + tail.byteLength);
    } finally {
      file.close();
    }
  });

  it('reads what the other side wrote after growing the file itself', () => {
    const file = open(1 << 20);
    try {
      file.read(0, 10);
      const far = pattern(200_000, 7);
      const at = 5 << 20;
      ftruncateSync(file.fd, 8 << 20);
      writeSync(file.fd, far, 0, far.byteLength, at);
      expect(file.read(at, far.byteLength).equals(far)).toBe(true);
      // Mapped, the size this side knows follows (the stub is told it again when it restarts).
      if (addon) expect(file.size).toBe(8 << 20);
    } finally {
      file.close();
    }
  });

  it('names a read past the end of the file', () => {
    const file = open(1 << 20);
    try {
      const e = expectServalError(() => file.read((1 << 20) - 10, 100), 'INTERNAL');
      expect(e.message).toMatch(/shared memory .*the file ends at 1048576 bytes/);
    } finally {
      file.close();
    }
  });
});
