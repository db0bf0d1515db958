// A shared-memory file between Serval and a Python stub. The stub maps the file and builds numpy
// arrays over it without a copy. Serval maps it too where the memory-map addon is built
// (native_map.ts) and copies with memcpy; without the addon (Node cannot map memory) it moves the
// bytes with positioned reads and writes, a system call and a page-cache lookup per page. The
// file lives in
// /dev/shm (RAM) where there is one, and is unlinked as soon as it is open: only the two
// processes' descriptors keep it, so nothing is left behind however either process ends.
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fstatSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync, writevSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ServalError } from '../../kernel/errors.js';
import { type MapAddon, mapAddon } from './native_map.js';

/** Pages are reserved ahead of stores in steps of this (see ShmFile.region). */
const RESERVE_STEP = 1 << 16;

/** Where the files go: tmpfs when the system has it. */
export function shmDirectory(): string {
  return existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
}

export class ShmFile {
  /** The mapping (with the addon): an ArrayBuffer over the file's first bytes, and a view of it. */
  private mapping: ArrayBuffer | undefined;
  private view: Buffer | undefined;
  /** Bytes from the start whose pages are reserved for stores through the mapping. */
  private reserved = 0;

  private constructor(
    readonly fd: number,
    private bytes: number,
    private readonly what: string,
    private readonly addon: MapAddon | undefined,
  ) {}

  /** Whether this file is read and written through a memory map (else positioned reads and writes). */
  get mapped(): boolean {
    return this.addon !== undefined;
  }

  /** A new file of `size` bytes (sparse: tmpfs gives pages only when written). `addon` (null: none) is for tests. */
  static create(label: string, size: number, addon: MapAddon | null | undefined = mapAddon): ShmFile {
    const file = path.join(
      shmDirectory(),
      `serval_python_${process.pid}_${label.replace(/[^\w.-]/g, '_')}_${randomBytes(4).toString('hex')}`,
    );
    const fd = openSync(file, 'w+', 0o600);
    try {
      unlinkSync(file);
      ftruncateSync(fd, size);
    } catch (e) {
      closeSync(fd);
      throw e;
    }
    return new ShmFile(fd, size, file, addon ?? undefined);
  }

  /** The file's size as this side knows it (the stub may have grown the one it writes). */
  get size(): number {
    return this.bytes;
  }

  /** Makes the file at least `size` bytes long (doubling, so growth is rare). */
  ensure(size: number): void {
    if (size <= this.bytes) return;
    let next = Math.max(this.bytes * 2, 1 << 20);
    while (next < size) next *= 2;
    this.resize(next);
  }

  private resize(size: number): void {
    try {
      ftruncateSync(this.fd, size);
    } catch (e) {
      throw this.failure(`cannot grow it to ${size} bytes`, e);
    }
    this.bytes = size;
  }

  write(data: Uint8Array, position: number): void {
    this.ensure(position + data.byteLength);
    if (this.addon) {
      this.region(position + data.byteLength, true).set(data, position);
      return;
    }
    try {
      let done = 0;
      while (done < data.byteLength) done += writeSync(this.fd, data, done, data.byteLength - done, position + done);
    } catch (e) {
      throw this.failure(`cannot write ${data.byteLength} bytes`, e);
    }
  }

  /** Writes the buffers one after another from `position` in one system call. */
  writev(parts: Uint8Array[], position: number, total: number): void {
    this.ensure(position + total);
    if (this.addon) {
      const view = this.region(position + total, true);
      let at = position;
      for (const p of parts) {
        view.set(p, at);
        at += p.byteLength;
      }
      return;
    }
    try {
      const n = writevSync(this.fd, parts, position);
      if (n !== total) {
        // A short write (not expected on tmpfs): finish piece by piece.
        let at = 0;
        for (const p of parts) {
          if (at + p.byteLength > n) {
            const skip = Math.max(0, n - at);
            this.write(p.subarray(skip), position + at + skip);
          }
          at += p.byteLength;
        }
      }
    } catch (e) {
      throw this.failure(`cannot write ${total} bytes`, e);
    }
  }

  /** `length` bytes from `position`, in a new buffer the caller owns. */
  read(position: number, length: number): Buffer {
    const out = Buffer.allocUnsafe(length);
    if (this.addon) {
      this.region(position + length, false).copy(out, 0, position, position + length);
      return out;
    }
    let done = 0;
    try {
      while (done < length) {
        const n = readSync(this.fd, out, done, length - done, position + done);
        if (n === 0) throw new Error(`the file ends at ${fstatSync(this.fd).size} bytes`);
        done += n;
      }
    } catch (e) {
      throw this.failure(`cannot read ${length} bytes at ${position}`, e);
    }
    return out;
  }

  /**
   * The mapping, covering at least the first `end` bytes. Before a store, the pages up to `end`
   * are reserved: on a full tmpfs a store into a sparse page would kill the process with SIGBUS,
   * where reserving fails with ENOSPC. A read past the size this side knows follows the stub,
   * which grows the file it writes.
   */
  private region(end: number, store: boolean): Buffer {
    const addon = this.addon as MapAddon;
    try {
      if (store && end > this.reserved) {
        const upTo = Math.min(this.bytes, Math.ceil(end / RESERVE_STEP) * RESERVE_STEP);
        addon.reserve(this.fd, this.reserved, upTo - this.reserved);
        this.reserved = upTo;
      }
      if (this.view === undefined || end > this.view.byteLength) {
        if (end > this.bytes) {
          const actual = fstatSync(this.fd).size;
          if (actual < end) throw new Error(`the file ends at ${actual} bytes, before ${end}`);
          this.bytes = actual;
        }
        const old = this.mapping;
        this.mapping = addon.map(this.fd, this.bytes);
        this.view = Buffer.from(this.mapping);
        // Nothing outside this class holds a view of the old mapping (reads copy out).
        if (old) addon.unmap(old);
      }
    } catch (e) {
      throw this.failure(store ? `cannot map ${end} bytes to write` : `cannot read up to ${end} bytes`, e);
    }
    return this.view;
  }

  close(): void {
    if (this.mapping) {
      (this.addon as MapAddon).unmap(this.mapping);
      this.mapping = undefined;
      this.view = undefined;
    }
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
  }

  private failure(what: string, e: unknown): ServalError {
    const reason = e instanceof Error ? e.message : String(e);
    return ServalError.internal(
      `Python backend shared memory (${this.what}, deleted): ${what}: ${reason}` +
        (/ENOSPC/.test(reason) ? ` (${shmDirectory()} is full; give it more room, e.g. docker run --shm-size=1g)` : ''),
    );
  }
}
