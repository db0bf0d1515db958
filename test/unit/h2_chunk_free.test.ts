// The lean HTTP/2 session frees a socket read once it is read, when nothing kept a view of it
// (src/frontends/grpc/h2/session.ts onData): the memory of a chunk its stream handlers copy is
// detached at once; a chunk a handler may still read, or whose leftover the session keeps, is not.
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { encodeHeaders } from '../../src/frontends/grpc/h2/hpack.js';
import { H2Session, type StreamHandler } from '../../src/frontends/grpc/h2/session.js';
import { H2_PREFACE, h2Frame } from '../helpers/h2.js';

const DATA = 0;
const HEADERS = 1;
const SETTINGS = 4;
const END_HEADERS = 0x4;

/** What the session needs of a socket: events in, writes swallowed. */
class FakeSocket extends EventEmitter {
  writableNeedDrain = false;
  destroyed = false;
  writableEnded = false;
  setNoDelay(): this {
    return this;
  }
  write(_b: Uint8Array, cb?: () => void): boolean {
    cb?.();
    return true;
  }
  cork(): void {}
  uncork(): void {}
  pause(): this {
    return this;
  }
  resume(): this {
    return this;
  }
  end(): this {
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }
}

/** A socket read: an ArrayBuffer of its own, as Node's TCP reads are. */
function read(bytes: Buffer): Buffer {
  const own = Buffer.from(new ArrayBuffer(bytes.length));
  bytes.copy(own);
  return own;
}

/** A session whose one stream's DATA goes to `handler`, opened by a first read (preface, SETTINGS, HEADERS). */
function open(copies: boolean): { socket: FakeSocket; got: Buffer[]; views: Buffer[] } {
  const socket = new FakeSocket();
  const got: Buffer[] = [];
  const views: Buffer[] = [];
  const handler: StreamHandler = {
    copies,
    data(chunk, release) {
      got.push(Buffer.from(chunk));
      views.push(chunk);
      release();
    },
    end() {},
    reset() {},
  };
  new H2Session(socket as unknown as Socket, () => handler, { closed() {} });
  const headers = encodeHeaders([
    [':method', 'POST'],
    [':path', '/x'],
    [':scheme', 'http'],
    [':authority', 'a'],
  ]);
  socket.emit(
    'data',
    read(Buffer.concat([H2_PREFACE, h2Frame(SETTINGS, 0, 0, Buffer.alloc(0)), h2Frame(HEADERS, END_HEADERS, 1, headers)])),
  );
  return { socket, got, views };
}

const payload = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff));

describe('socket reads freed by the lean HTTP/2 session', () => {
  it('frees a read whose DATA went to a handler that copies', () => {
    const { socket, got } = open(true);
    const p = payload(20_000, 1);
    const chunk = read(h2Frame(DATA, 0, 1, p));
    socket.emit('data', chunk);
    expect(Buffer.concat(got).equals(p)).toBe(true);
    expect(chunk.buffer.byteLength).toBe(0);
  });

  it('keeps a read a handler that does not copy may still hold', () => {
    const { socket, got, views } = open(false);
    const p = payload(20_000, 2);
    const chunk = read(h2Frame(DATA, 0, 1, p));
    socket.emit('data', chunk);
    expect(chunk.buffer.byteLength).toBe(chunk.length);
    expect(Buffer.concat(views).equals(p)).toBe(true);
    expect(Buffer.concat(got).equals(p)).toBe(true);
  });

  it('keeps a read whose large leftover it holds, and reads the frame whole from the next', () => {
    const { socket, got } = open(true);
    // A 20,000-byte padded DATA frame (padding makes the session wait for the whole frame) split
    // after 10,000 bytes: the first read's leftover is a view the session keeps.
    const p = payload(19_000, 3);
    const padded = Buffer.concat([Buffer.from([0]), p]); // pad length 0
    const frame = h2Frame(DATA, 0x8, 1, padded);
    const first = read(frame.subarray(0, 10_000));
    const second = read(frame.subarray(10_000));
    socket.emit('data', first);
    expect(first.buffer.byteLength).toBe(first.length);
    socket.emit('data', second);
    expect(Buffer.concat(got).equals(p)).toBe(true);
    expect(second.buffer.byteLength).toBe(0);
  });
});
