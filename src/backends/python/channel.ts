// The control channel to a Python stub: frames of a 4-byte little-endian length and a JSON
// message. It carries only metadata (names, shapes, offsets, request ids and parameters); tensor
// bytes go through the shared-memory files (shm.ts).
import { encodeJson } from '../../kernel/json.js';

/** A message either way; `t` says which (see stub/serval_python_stub.py). */
export interface StubMessage {
  t: string;
  [key: string]: unknown;
}

export function encodeFrame(msg: StubMessage): Buffer {
  const body = Buffer.from(encodeJson(msg), 'utf8');
  const frame = Buffer.allocUnsafe(4 + body.byteLength);
  frame.writeUInt32LE(body.byteLength, 0);
  body.copy(frame, 4);
  return frame;
}

/** Splits a byte stream into messages; a frame may arrive in pieces or several in one chunk. */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): StubMessage[] {
    this.pending = this.pending.byteLength ? Buffer.concat([this.pending, chunk]) : chunk;
    const out: StubMessage[] = [];
    let at = 0;
    while (this.pending.byteLength - at >= 4) {
      const n = this.pending.readUInt32LE(at);
      if (this.pending.byteLength - at - 4 < n) break;
      const msg = JSON.parse(this.pending.toString('utf8', at + 4, at + 4 + n)) as unknown;
      if (typeof msg !== 'object' || msg === null || typeof (msg as StubMessage).t !== 'string') {
        throw new Error('the Python stub sent a message without a type');
      }
      out.push(msg as StubMessage);
      at += 4 + n;
    }
    this.pending = at === this.pending.byteLength ? Buffer.alloc(0) : this.pending.subarray(at);
    return out;
  }
}
