// The control channel to a Python stub: frames of an 8-byte header (the JSON message's length and
// the length of the bytes attached to it, both 32-bit little-endian), the JSON message, then the
// attached bytes. Messages carry metadata (names, shapes, offsets, request ids and parameters);
// large tensors go through the shared-memory files (shm.ts); an execution's small inputs and
// outputs travel attached (one socket write beats a positioned write plus a read for them), and so
// do the tensors of messages that must stand on their own: a decoupled model's responses and BLS
// traffic outside execute(), since the shared memory is reused by the next execution.
import { encodeJson } from '../../kernel/json.js';

/** A message either way; `t` says which (see stub/serval_python_stub.py). */
export interface StubMessage {
  t: string;
  /** The bytes attached to the message (tensor data its offsets point into); set by FrameReader. */
  bin?: Buffer;
  [key: string]: unknown;
}

const HEADER = 8;

/** Whether JSON.stringify writes `v` exactly: no bigint, -0 or ExactInteger (encodeJson's cases). */
function plain(v: unknown): boolean {
  if (typeof v === 'number') return !Object.is(v, -0);
  if (typeof v !== 'object' || v === null) return typeof v !== 'bigint';
  if (Array.isArray(v)) return v.every(plain);
  // Anything but a plain object (an ExactInteger, a Buffer) takes the careful path.
  if (Object.getPrototypeOf(v) !== Object.prototype) return false;
  for (const k in v) if (!plain((v as Record<string, unknown>)[k])) return false;
  return true;
}

/** A message's JSON; the per-request messages are plain, and JSON.stringify without encodeJson's replacer is several times faster. */
function messageJson(msg: StubMessage): string {
  return plain(msg) ? JSON.stringify(msg) : encodeJson(msg);
}

/** The frame of `msg`, with `attached` (a list of parts, written in order) after it. */
export function encodeFrame(msg: StubMessage, attached: readonly Uint8Array[] = []): Uint8Array[] {
  const body = Buffer.from(messageJson(msg), 'utf8');
  let binLength = 0;
  for (const a of attached) binLength += a.byteLength;
  const head = Buffer.allocUnsafe(HEADER);
  head.writeUInt32LE(body.byteLength, 0);
  head.writeUInt32LE(binLength, 4);
  return [head, body, ...attached];
}

/** The frame of `msg` and `attached` in one buffer (for small frames: one write, no stream corking). */
export function encodeFrameBuffer(msg: StubMessage, attached: readonly Uint8Array[] = []): Buffer {
  const json = messageJson(msg);
  const n = Buffer.byteLength(json, 'utf8');
  let binLength = 0;
  for (const a of attached) binLength += a.byteLength;
  const out = Buffer.allocUnsafe(HEADER + n + binLength);
  out.writeUInt32LE(n, 0);
  out.writeUInt32LE(binLength, 4);
  out.write(json, HEADER, 'utf8');
  let at = HEADER + n;
  for (const a of attached) {
    out.set(a, at);
    at += a.byteLength;
  }
  return out;
}

/** Splits a byte stream into messages; a frame may arrive in pieces or several in one chunk. */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): StubMessage[] {
    this.pending = this.pending.byteLength ? Buffer.concat([this.pending, chunk]) : chunk;
    const out: StubMessage[] = [];
    let at = 0;
    while (this.pending.byteLength - at >= HEADER) {
      const n = this.pending.readUInt32LE(at);
      const b = this.pending.readUInt32LE(at + 4);
      if (this.pending.byteLength - at - HEADER < n + b) break;
      const start = at + HEADER;
      const msg = JSON.parse(this.pending.toString('utf8', start, start + n)) as unknown;
      if (typeof msg !== 'object' || msg === null || typeof (msg as StubMessage).t !== 'string') {
        throw new Error('the Python stub sent a message without a type');
      }
      // Attached bytes are copied out: the pending buffer is reused for what follows.
      if (b > 0) (msg as StubMessage).bin = Buffer.from(this.pending.subarray(start + n, start + n + b));
      out.push(msg as StubMessage);
      at = start + n + b;
    }
    this.pending = at === this.pending.byteLength ? Buffer.alloc(0) : this.pending.subarray(at);
    return out;
  }
}
