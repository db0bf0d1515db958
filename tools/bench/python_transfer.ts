/**
 * How to move a tensor between Node and a Python process, measured: the Python backend's way
 * (a /dev/shm file: Node writes it with one positioned write, Python maps it and reads a numpy
 * view without a copy; the answer comes back the same way through a second file) against
 * sending the bytes through the socket itself (Node writes them after the control message,
 * Python reads them into a buffer, and sends them back the same way). Each round trip moves the
 * tensor there and back, as an identity model's execution does; the control message is the same
 * 8 bytes either way.
 *
 *   npm run build && node dist/tools/bench/python_transfer.js
 *
 * Uses the interpreter the Python backend would (the project's .venv when there is one).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { defaultInterpreter } from '../../src/backends/python/interpreter.js';
import { shmDirectory } from '../../src/backends/python/shm.js';

// The Python side: for each 8-byte request (mode, size) answer with the tensor, the way the mode says.
const PY = `
import mmap, os, struct, sys
import numpy as np
ctl, to_fd, from_fd = 3, 4, 5
to_map = from_map = None
size_mapped = 0
def read_exact(n):
    buf = bytearray(n); view = memoryview(buf); got = 0
    while got < n:
        k = os.readv(ctl, [view[got:]])
        if k == 0: sys.exit(0)
        got += k
    return buf
while True:
    mode, n = struct.unpack("<II", read_exact(8))
    if mode == 0:  # shared memory: a view of the input, one copy into the output file
        if n > size_mapped:
            to_map = mmap.mmap(to_fd, n); os.ftruncate(from_fd, n); from_map = mmap.mmap(from_fd, n); size_mapped = n
        x = np.frombuffer(to_map, np.uint8, n, 0)
        from_map[0:n] = memoryview(x)
        os.write(ctl, struct.pack("<II", 0, n))
    else:  # the socket: read the bytes, write them back
        x = np.frombuffer(read_exact(n), np.uint8)
        out = memoryview(struct.pack("<II", 1, n) + x.tobytes())
        while out:
            out = out[os.write(ctl, out):]
`;

async function main(): Promise<void> {
  const files = ['to', 'from'].map((w) =>
    path.join(shmDirectory(), `serval_transfer_${process.pid}_${w}_${randomBytes(4).toString('hex')}`),
  );
  const [toFd, fromFd] = files.map((f) => openSync(f, 'w+', 0o600)) as [number, number];
  for (const f of files) unlinkSync(f);
  const child = spawn(defaultInterpreter(undefined), ['-c', PY], { stdio: ['ignore', 'inherit', 'inherit', 'pipe', toFd, fromFd] });
  const sock = child.stdio[3] as Duplex;
  // Chunks are kept as they come and joined once per message (no quadratic re-copying).
  let chunks: Buffer[] = [];
  let have = 0;
  let want = 0;
  let wake: ((b: Buffer) => void) | undefined;
  const take = (n: number): Buffer => {
    const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, have);
    chunks = all.byteLength > n ? [all.subarray(n)] : [];
    have -= n;
    return all.subarray(0, n);
  };
  sock.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    have += chunk.byteLength;
    if (wake && have >= want) {
      const w = wake;
      wake = undefined;
      w(take(want));
    }
  });
  const read = (n: number): Promise<Buffer> =>
    new Promise((resolve) => {
      want = n;
      if (have >= n) resolve(take(n));
      else wake = resolve;
    });
  const header = (mode: number, n: number): Buffer => {
    const h = Buffer.alloc(8);
    h.writeUInt32LE(mode, 0);
    h.writeUInt32LE(n, 4);
    return h;
  };
  let shmSize = 0;
  const viaShm = async (data: Buffer): Promise<Buffer> => {
    if (data.byteLength > shmSize) {
      ftruncateSync(toFd, data.byteLength);
      shmSize = data.byteLength;
    }
    writeSync(toFd, data, 0, data.byteLength, 0);
    sock.write(header(0, data.byteLength));
    await read(8);
    const out = Buffer.allocUnsafe(data.byteLength);
    readSync(fromFd, out, 0, out.byteLength, 0);
    return out;
  };
  const viaSocket = async (data: Buffer): Promise<Buffer> => {
    sock.write(header(1, data.byteLength));
    sock.write(data);
    await read(8);
    return Buffer.from(await read(data.byteLength));
  };

  console.log('| tensor | /dev/shm file, µs per round trip | through the socket, µs | socket / shm |');
  console.log('|---|---|---|---|');
  for (const [label, n] of [
    ['64 KiB', 64 << 10],
    ['1 MiB', 1 << 20],
    ['16 MiB', 16 << 20],
    ['64 MiB', 64 << 20],
  ] as const) {
    const data = randomBytes(n);
    const rounds = Math.max(5, Math.floor((256 << 20) / n));
    const times = { shm: [] as number[], socket: [] as number[] };
    for (let r = 0; r < rounds + 2; r++) {
      for (const [way, f] of [
        ['shm', viaShm],
        ['socket', viaSocket],
      ] as const) {
        const t0 = process.hrtime.bigint();
        const out = await f(data);
        const us = Number(process.hrtime.bigint() - t0) / 1000;
        if (!out.equals(data)) throw new Error(`${way}: the data came back different`);
        if (r >= 2) times[way].push(us);
      }
    }
    const median = (a: number[]): number => a.sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
    const s = median(times.shm);
    const k = median(times.socket);
    console.log(`| ${label} | ${s.toFixed(0)} | ${k.toFixed(0)} | ${(k / s).toFixed(2)} |`);
  }
  child.kill();
  closeSync(toFd);
  closeSync(fromFd);
}

await main();
