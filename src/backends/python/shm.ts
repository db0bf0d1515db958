// A shared-memory file between Serval and a Python stub. Node cannot map memory, so Serval moves
// bytes with positioned reads and writes (one system call per batch, a kernel memcpy) while the
// stub maps the same file and builds numpy arrays over it without a copy. The file lives in
// /dev/shm (RAM) where there is one, and is unlinked as soon as it is open: only the two
// processes' descriptors keep it, so nothing is left behind however either process ends.
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fstatSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync, writevSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ServalError } from '../../kernel/errors.js';

/** Where the files go: tmpfs when the system has it. */
export function shmDirectory(): string {
  return existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
}

export class ShmFile {
  private constructor(
    readonly fd: number,
    private bytes: number,
    private readonly what: string,
  ) {}

  /** A new file of `size` bytes (sparse: tmpfs gives pages only when written). */
  static create(label: string, size: number): ShmFile {
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
    return new ShmFile(fd, size, file);
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

  close(): void {
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
