// One HTTP/2 connection (RFC 9113) read and written in JS, server side: the lean gRPC path's
// transport (lean_grpc.ts). Node's http2 costs a unary call ~100 µs of main-thread CPU in its
// native session and stream objects (measured at one client: 345 µs per add_sub request over
// gRPC against 215 over the lean HTTP/1.1 path); this does the framing, HPACK and flow control
// a unary call needs and hands each stream to a handler the caller picks from its headers.
// What it does not serve itself it does not parse beyond HTTP/2: every stream is a handler's.
import type { Socket } from 'node:net';
import { IdTable } from '../../../kernel/churn.js';
import { freeNow, wholeBuffer } from '../../../kernel/memory.js';
import { encodeHeaders, type HeaderField, HpackDecoder, HpackError } from './hpack.js';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

enum Type {
  DATA = 0,
  HEADERS = 1,
  PRIORITY = 2,
  RST_STREAM = 3,
  SETTINGS = 4,
  PUSH_PROMISE = 5,
  PING = 6,
  GOAWAY = 7,
  WINDOW_UPDATE = 8,
  CONTINUATION = 9,
}

const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY_FLAG = 0x20;

/** RFC 9113 §7 error codes. */
export const H2Error = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  ENHANCE_YOUR_CALM: 11,
} as const;

const SETTINGS_HEADER_TABLE_SIZE = 1;
const SETTINGS_ENABLE_PUSH = 2;
const SETTINGS_INITIAL_WINDOW_SIZE = 4;
const SETTINGS_MAX_FRAME_SIZE = 5;

/** The peer's defaults (RFC 9113 §6.5.2). */
const DEFAULT_WINDOW = 65535;
const DEFAULT_FRAME = 16384;
const MAX_WINDOW = 2 ** 31 - 1;

/**
 * What this side allows, as Serval's grpc-js sessions do (connection.ts widenFlowControl): a
 * client may send a stream 8 MiB and the connection 16 MiB before it waits for a WINDOW_UPDATE,
 * in frames of up to 1 MiB.
 */
export const STREAM_WINDOW = 8 << 20;
export const CONNECTION_WINDOW = 16 << 20;
export const MAX_FRAME = 1 << 20;
/** A request's header block, compressed (all its CONTINUATION frames) and decoded. */
const MAX_HEADER_BLOCK = 256 << 10;
const MAX_HEADER_LIST = 64 << 10;

/** What a stream's owner hears from the client. */
export interface StreamHandler {
  /** Bytes of the stream's DATA frames, in order; `release` gives their flow-control credit back (once). */
  data(chunk: Buffer, release: () => void): void;
  /**
   * data() copies what it is given before it returns and keeps no view of it: the socket's chunk
   * may then be freed at once (see H2Session.onData).
   */
  readonly copies?: boolean;
  /** The client ended its side (END_STREAM). */
  end(): void;
  /** The stream is gone (reset by the client, or the connection closed) before both sides ended. */
  reset(code: number): void;
  /** Both sides have ended: the stream is closed. */
  closed?(): void;
}

/** Picks the handler of a new stream from its request headers (decoded, in order). */
export type StreamRouter = (stream: H2Stream, fields: readonly HeaderField[]) => StreamHandler;

/** A stream as its handler sends on it. */
export class H2Stream {
  /** The client has ended its side. */
  remoteEnded = false;
  /** This side has sent END_STREAM (or a reset). */
  localEnded = false;
  headersSent = false;
  handler: StreamHandler | undefined;
  /** Credit this side may still use to send DATA. */
  sendWindow: number;
  /** What the client may still send before this side's next WINDOW_UPDATE. */
  recvWindow = STREAM_WINDOW;
  unacked = 0;
  /** DATA (and the trailers that follow it) waiting for send credit. */
  queue: { data: Uint8Array; at: number }[] = [];
  queuedBytes = 0;
  trailers: Buffer | undefined;
  /** Response headers held back to go out with the first DATA (answer()). */
  head: Buffer | undefined;
  written: (() => void) | undefined;
  /** Called once the queue is written out (the proxy's cue to read more). */
  onDrain: (() => void) | undefined;

  constructor(
    readonly session: H2Session,
    readonly id: number,
  ) {
    this.sendWindow = session.peerInitialWindow;
  }

  get gone(): boolean {
    return this.localEnded || this.session.destroyed;
  }

  /** Response headers; `endStream`: a trailers-only response. */
  respond(fields: readonly HeaderField[] | Buffer, endStream = false): void {
    this.session.sendHeaders(this, fields, endStream);
  }

  /** Response headers, DATA from `parts` and trailers that end the stream, in one write where credit allows. */
  answer(
    headers: readonly HeaderField[] | Buffer,
    parts: readonly Uint8Array[],
    trailers: readonly HeaderField[] | Buffer,
    written?: () => void,
  ): void {
    this.session.sendHeaders(this, headers, false, true);
    this.session.sendData(this, parts, trailers, written);
  }

  /** DATA from `parts` in order, then (optionally) trailers that end the stream; `written` once all is written. */
  send(parts: readonly Uint8Array[], trailers?: readonly HeaderField[] | Buffer, written?: () => void): void {
    this.session.sendData(this, parts, trailers, written);
  }

  /** Ends the stream now with RST_STREAM `code`. */
  reset(code: number): void {
    this.session.resetStream(this, code);
  }
}

/** Things the session tells its owner. */
export interface SessionEvents {
  /** The connection closed; every stream has heard `reset`. */
  closed(session: H2Session): void;
  /** A PING arrived (the owner may police them); the session answers it either way. */
  ping?(session: H2Session): void;
  /** A new stream opened. */
  streamOpened?(session: H2Session): void;
  /** An unexpected error while reading (a bug): the connection ends with INTERNAL_ERROR; the owner logs it. */
  fault?(e: unknown): void;
}

export class H2Session {
  /** Open streams by id (not a Map of them: kernel/churn.ts). */
  readonly streams = new IdTable<H2Stream>();
  destroyed = false;
  /** No new streams: a GOAWAY went out, or came in. */
  draining = false;
  lastStreamId = 0;
  peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrame = DEFAULT_FRAME;
  private sendWindow = DEFAULT_WINDOW;
  private recvWindow = CONNECTION_WINDOW;
  private unacked = 0;
  private readonly hpack = new HpackDecoder(4096, MAX_HEADER_LIST);
  // Reading: the preface, then frames; DATA payloads pass on as they arrive.
  private prefaceLeft = PREFACE.length;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private frameLength = -1;
  private frameType = 0;
  private frameFlags = 0;
  private frameStream = 0;
  /** Bytes left of a DATA payload being passed on. */
  private dataLeft = 0;
  private dataStream: H2Stream | undefined;
  /** A header block being continued: its stream, flags and fragments. */
  private continuing: { id: number; flags: number; parts: Buffer[]; size: number } | undefined;
  /** Streams with DATA waiting for credit, in the order they queued. */
  private readonly blocked = new Set<H2Stream>();
  private pausedForWrite = false;
  /** Something may still read the socket chunk being read (a kept leftover, a handler that does not copy). */
  private chunkHeld = false;

  constructor(
    readonly socket: Socket,
    private readonly route: StreamRouter,
    private readonly events: SessionEvents,
  ) {
    socket.setNoDelay(true);
    const settings = Buffer.alloc(12);
    settings.writeUInt16BE(SETTINGS_INITIAL_WINDOW_SIZE, 0);
    settings.writeUInt32BE(STREAM_WINDOW, 2);
    settings.writeUInt16BE(SETTINGS_MAX_FRAME_SIZE, 6);
    settings.writeUInt32BE(MAX_FRAME, 8);
    const update = Buffer.alloc(4);
    update.writeUInt32BE(CONNECTION_WINDOW - DEFAULT_WINDOW, 0);
    socket.write(
      Buffer.concat([frameHeader(settings.length, Type.SETTINGS, 0, 0), settings, frameHeader(4, Type.WINDOW_UPDATE, 0, 0), update]),
    );
    socket.on('data', (chunk: Buffer) => this.onData(chunk, true));
    socket.on('drain', () => this.onDrain());
    socket.on('close', () => this.destroy());
    socket.on('error', () => this.destroy());
    // The listener is not half-open (as Node's http2 server): the client's end is the connection's.
    socket.on('end', () => this.destroy());
  }

  /** Bytes that arrived before the session took the socket. */
  feed(chunk: Buffer): void {
    this.onData(chunk);
  }

  // ---- reading ----

  /**
   * `fromSocket`: the chunk is the socket's read and no one else has it. Once read, its memory is
   * freed at once unless something kept a view of it: a socket read is an ArrayBuffer of its own
   * that V8 counts as external memory until a collection finds it, and 1 MiB requests made one
   * scavenge ("external memory pressure") every ~60 requests.
   */
  private onData(chunk: Buffer, fromSocket = false): void {
    if (this.destroyed) return;
    this.chunkHeld = false;
    try {
      this.read(chunk);
      if (fromSocket && !this.chunkHeld) {
        const whole = wholeBuffer(chunk);
        if (whole) freeNow(whole);
      }
    } catch (e) {
      // Whatever a client sends ends at worst its own connection, never the server.
      if (e instanceof ConnectionError) this.goaway(e.code, e.message);
      else if (e instanceof HpackError) this.goaway(H2Error.COMPRESSION_ERROR, e.message);
      else {
        this.events.fault?.(e);
        this.goaway(H2Error.INTERNAL_ERROR, 'internal error');
      }
    }
    if (!this.destroyed && this.socket.writableNeedDrain && !this.pausedForWrite) {
      // A client that does not read what it is sent is not read from either, so it cannot grow
      // the server's memory with answers it never takes.
      this.pausedForWrite = true;
      this.socket.pause();
    }
  }

  private onDrain(): void {
    if (this.pausedForWrite) {
      this.pausedForWrite = false;
      this.socket.resume();
    }
  }

  private read(chunk: Buffer): void {
    let at = 0;
    if (this.prefaceLeft > 0) {
      const n = Math.min(this.prefaceLeft, chunk.length);
      const from = PREFACE.length - this.prefaceLeft;
      if (!chunk.subarray(0, n).equals(PREFACE.subarray(from, from + n))) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'bad preface');
      this.prefaceLeft -= n;
      at = n;
    }
    while (at < chunk.length && !this.destroyed) {
      if (this.dataLeft > 0) {
        const n = Math.min(this.dataLeft, chunk.length - at);
        this.dataLeft -= n;
        this.passData(chunk.subarray(at, at + n), n);
        at += n;
        if (this.dataLeft === 0) this.dataFrameDone(this.frameFlags);
        continue;
      }
      if (this.frameLength < 0) {
        const need = 9 - this.buffered;
        if (chunk.length - at < need) {
          this.keep(chunk.subarray(at));
          return;
        }
        const head = this.take(chunk.subarray(at, at + need));
        at += need;
        this.frameLength = head.readUIntBE(0, 3);
        this.frameType = head[3]!;
        this.frameFlags = head[4]!;
        this.frameStream = head.readUInt32BE(5) & 0x7fffffff;
        if (this.frameLength > MAX_FRAME) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'frame too large');
        if (this.continuing && this.frameType !== Type.CONTINUATION)
          throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'expected CONTINUATION');
        if (this.frameType === Type.DATA && !(this.frameFlags & PADDED)) {
          this.startData(this.frameStream, this.frameLength);
          if (this.frameLength === 0) this.dataFrameDone(this.frameFlags);
          continue;
        }
      }
      const need = this.frameLength - this.buffered;
      if (chunk.length - at < need) {
        this.keep(chunk.subarray(at));
        return;
      }
      const payload = this.take(chunk.subarray(at, at + need));
      at += need;
      const type = this.frameType;
      const flags = this.frameFlags;
      const id = this.frameStream;
      this.frameLength = -1;
      this.frame(type, flags, id, payload);
    }
  }

  private keep(part: Buffer): void {
    if (part.length === 0) return;
    // A view of the socket's chunk would keep all of it: small leftovers are copied.
    if (part.length < 4096) this.chunks.push(Buffer.from(part));
    else {
      this.chunks.push(part);
      this.chunkHeld = true;
    }
    this.buffered += part.length;
  }

  /** What was kept, with `rest` after it, as one buffer; nothing is kept after. */
  private take(rest: Buffer): Buffer {
    if (this.buffered === 0) return rest;
    this.chunks.push(rest);
    const all = Buffer.concat(this.chunks);
    this.chunks = [];
    this.buffered = 0;
    return all;
  }

  /** A DATA frame of `n` bytes on stream `id` has begun: the stream its payload goes to, if any. */
  private startData(id: number, n: number): void {
    if (id === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'DATA on stream 0');
    this.chargeConnection(n);
    const s = this.streams.get(id);
    this.dataLeft = n;
    this.dataStream = undefined;
    if (!s || s.remoteEnded) {
      if (id > this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'DATA on an idle stream');
      // A closed stream's data is dropped (passData gives its credit back at once).
      if (s && !s.localEnded) this.resetStream(s, H2Error.STREAM_CLOSED);
      return;
    }
    if (n > s.recvWindow) {
      this.resetStream(s, H2Error.FLOW_CONTROL_ERROR);
      return;
    }
    s.recvWindow -= n;
    this.dataStream = s;
  }

  private passData(part: Buffer, n: number): void {
    const s = this.dataStream;
    if (!s?.handler || s.localEnded) {
      this.credit(s, n);
      return;
    }
    if (!s.handler.copies) this.chunkHeld = true;
    let released = false;
    s.handler.data(part, () => {
      if (released) return;
      released = true;
      this.credit(s, n);
    });
  }

  /** The DATA frame begun by startData is all in (`flags` its flags). */
  private dataFrameDone(flags: number): void {
    const s = this.dataStream;
    this.frameLength = -1;
    this.dataStream = undefined;
    if (s && flags & END_STREAM) this.remoteEnd(s);
  }

  /** The connection's receive window pays for a frame of `n` bytes. */
  private chargeConnection(n: number): void {
    if (n > this.recvWindow) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, 'connection window exceeded');
    this.recvWindow -= n;
  }

  /** `n` received bytes are consumed: the client may send them again (WINDOW_UPDATE when a quarter is due). */
  private credit(s: H2Stream | undefined, n: number): void {
    if (this.destroyed || n === 0) return;
    this.unacked += n;
    let out: Buffer[] | undefined;
    if (this.unacked >= CONNECTION_WINDOW / 4) {
      out = [windowUpdate(0, this.unacked)];
      this.recvWindow += this.unacked;
      this.unacked = 0;
    }
    if (s && !s.remoteEnded && this.streams.has(s.id)) {
      s.unacked += n;
      if (s.unacked >= STREAM_WINDOW / 4) {
        out ??= [];
        out.push(windowUpdate(s.id, s.unacked));
        s.recvWindow += s.unacked;
        s.unacked = 0;
      }
    }
    if (out) this.socket.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  }

  private frame(type: number, flags: number, id: number, payload: Buffer): void {
    switch (type) {
      case Type.DATA: {
        // Padded (the unpadded kind is passed on as it arrives): the padding counts against the windows too.
        const body = unpad(payload, flags);
        this.startData(id, payload.length);
        this.dataLeft = 0;
        this.passData(body, payload.length);
        this.dataFrameDone(flags);
        return;
      }
      case Type.HEADERS: {
        if (id === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'HEADERS on stream 0');
        let block = unpad(payload, flags);
        if (flags & PRIORITY_FLAG) {
          if (block.length < 5) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'short HEADERS');
          block = block.subarray(5);
        }
        if (flags & END_HEADERS) this.headerBlock(id, flags, block);
        else this.continuing = { id, flags, parts: [Buffer.from(block)], size: block.length };
        return;
      }
      case Type.CONTINUATION: {
        const c = this.continuing;
        if (!c || c.id !== id) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'unexpected CONTINUATION');
        c.parts.push(Buffer.from(payload));
        c.size += payload.length;
        if (c.size > MAX_HEADER_BLOCK) throw new ConnectionError(H2Error.ENHANCE_YOUR_CALM, 'header block too large');
        if (flags & END_HEADERS) {
          this.continuing = undefined;
          this.headerBlock(id, c.flags, Buffer.concat(c.parts));
        }
        return;
      }
      case Type.PRIORITY:
        if (id === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        if (payload.length !== 5) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'PRIORITY size');
        return;
      case Type.RST_STREAM: {
        if (id === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
        if (payload.length !== 4) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM size');
        if (id > this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
        const s = this.streams.get(id);
        if (s) this.drop(s, payload.readUInt32BE(0));
        return;
      }
      case Type.SETTINGS:
        if (id !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
        if (flags & ACK) {
          if (payload.length !== 0) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'SETTINGS ack with payload');
          return;
        }
        if (payload.length % 6 !== 0) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'SETTINGS size');
        for (let i = 0; i < payload.length; i += 6) this.setting(payload.readUInt16BE(i), payload.readUInt32BE(i + 2));
        this.socket.write(frameHeader(0, Type.SETTINGS, ACK, 0));
        this.flushBlocked();
        return;
      case Type.PUSH_PROMISE:
        throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case Type.PING:
        if (id !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'PING on a stream');
        if (payload.length !== 8) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'PING size');
        if (flags & ACK) {
          this.pingAcked?.();
          return;
        }
        this.socket.write(Buffer.concat([frameHeader(8, Type.PING, ACK, 0), payload]));
        this.events.ping?.(this);
        return;
      case Type.GOAWAY:
        if (id !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'GOAWAY on a stream');
        this.draining = true;
        this.closeIfIdle();
        return;
      case Type.WINDOW_UPDATE: {
        if (payload.length !== 4) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'WINDOW_UPDATE size');
        const inc = payload.readUInt32BE(0) & 0x7fffffff;
        if (id === 0) {
          if (inc === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
          this.sendWindow += inc;
          if (this.sendWindow > MAX_WINDOW) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, 'window above 2^31-1');
        } else {
          const s = this.streams.get(id);
          if (!s) {
            if (id > this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
            return;
          }
          if (inc === 0) {
            this.resetStream(s, H2Error.PROTOCOL_ERROR);
            return;
          }
          s.sendWindow += inc;
          if (s.sendWindow > MAX_WINDOW) {
            this.resetStream(s, H2Error.FLOW_CONTROL_ERROR);
            return;
          }
        }
        this.flushBlocked();
        return;
      }
      default:
      // Unknown frame types are ignored (RFC 9113 §4.1).
    }
  }

  private setting(key: number, value: number): void {
    switch (key) {
      case SETTINGS_ENABLE_PUSH:
        if (value > 1) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'ENABLE_PUSH');
        return;
      case SETTINGS_INITIAL_WINDOW_SIZE: {
        if (value > MAX_WINDOW) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, 'INITIAL_WINDOW_SIZE');
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const s of this.streams.values()) s.sendWindow += delta;
        return;
      }
      case SETTINGS_MAX_FRAME_SIZE:
        if (value < DEFAULT_FRAME || value > 2 ** 24 - 1) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'MAX_FRAME_SIZE');
        this.peerMaxFrame = value;
        return;
      case SETTINGS_HEADER_TABLE_SIZE:
      // This side never indexes what it sends: the peer's table size does not matter to it.
      default:
    }
  }

  private headerBlock(id: number, flags: number, block: Uint8Array): void {
    const fields = this.hpack.decode(block);
    const s = this.streams.get(id);
    if (s) {
      // Trailers: they must end the stream; gRPC requests have none, so they are not read.
      if (s.remoteEnded || !(flags & END_STREAM)) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'HEADERS on an open stream');
      this.remoteEnd(s);
      return;
    }
    if (id <= this.lastStreamId || id % 2 === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'stream id not new');
    this.lastStreamId = id;
    const stream = new H2Stream(this, id);
    if (this.draining) {
      stream.localEnded = true;
      this.socket.write(rstFrame(id, H2Error.REFUSED_STREAM));
      return;
    }
    this.streams.set(id, stream);
    this.events.streamOpened?.(this);
    if (flags & END_STREAM) stream.remoteEnded = true;
    try {
      stream.handler = this.route(stream, fields);
    } catch {
      this.resetStream(stream, H2Error.INTERNAL_ERROR);
      return;
    }
    if (stream.remoteEnded && !stream.localEnded) stream.handler.end();
    this.closeIfDone(stream);
  }

  private remoteEnd(s: H2Stream): void {
    if (s.remoteEnded) return;
    s.remoteEnded = true;
    if (!s.localEnded) s.handler?.end();
    this.closeIfDone(s);
  }

  // ---- writing ----

  sendHeaders(s: H2Stream, fields: readonly HeaderField[] | Buffer, endStream: boolean, holdForData = false): void {
    if (s.gone || s.headersSent) return;
    const block = Buffer.isBuffer(fields) ? fields : encodeHeaders(fields);
    s.headersSent = true;
    const frames = headersFrames(s.id, block, endStream, this.peerMaxFrame);
    if (holdForData) {
      s.head = frames;
      return;
    }
    this.socket.write(frames);
    if (endStream) this.localEnd(s);
  }

  sendData(s: H2Stream, parts: readonly Uint8Array[], trailers: readonly HeaderField[] | Buffer | undefined, written?: () => void): void {
    if (s.gone) {
      written?.();
      return;
    }
    for (const p of parts) {
      if (p.byteLength === 0) continue;
      s.queue.push({ data: p, at: 0 });
      s.queuedBytes += p.byteLength;
    }
    if (trailers) s.trailers = Buffer.isBuffer(trailers) ? trailers : encodeHeaders(trailers);
    if (written) {
      const before = s.written;
      s.written = before
        ? () => {
            before();
            written();
          }
        : written;
    }
    this.flush(s);
  }

  /** Writes what credit allows of `s`'s queue (and its trailers after the last of it). */
  private flush(s: H2Stream): void {
    if (s.gone) return;
    const out: Uint8Array[] = [];
    if (s.head) {
      out.push(s.head);
      s.head = undefined;
    }
    while (s.queue.length > 0) {
      const credit = Math.min(s.sendWindow, this.sendWindow);
      if (credit <= 0) break;
      const head = s.queue[0]!;
      const n = Math.min(credit, this.peerMaxFrame, head.data.byteLength - head.at);
      out.push(frameHeader(n, Type.DATA, 0, s.id), head.data.subarray(head.at, head.at + n));
      head.at += n;
      s.sendWindow -= n;
      this.sendWindow -= n;
      s.queuedBytes -= n;
      if (head.at === head.data.byteLength) s.queue.shift();
    }
    const done = s.queue.length === 0;
    const ending = done && s.trailers !== undefined;
    if (ending) {
      out.push(headersFrames(s.id, s.trailers!, true, this.peerMaxFrame));
      s.trailers = undefined;
    }
    const written = done ? s.written : undefined;
    if (done) s.written = undefined;
    if (out.length > 0) this.writeAll(out, written);
    else written?.();
    if (!done) {
      this.blocked.add(s);
      return;
    }
    this.blocked.delete(s);
    if (ending) this.localEnd(s);
    else s.onDrain?.();
  }

  private flushBlocked(): void {
    for (const s of [...this.blocked]) {
      if (this.sendWindow <= 0) return;
      this.blocked.delete(s);
      this.flush(s);
    }
  }

  private writeAll(out: Uint8Array[], written: (() => void) | undefined): void {
    const socket = this.socket;
    if (out.length === 1) {
      socket.write(out[0]!, written);
      return;
    }
    let small = 0;
    for (const o of out) small += o.byteLength;
    if (small <= 16384) {
      socket.write(Buffer.concat(out, small), written);
      return;
    }
    socket.cork();
    const last = out.length - 1;
    for (let i = 0; i < last; i++) socket.write(out[i]!);
    socket.write(out[last]!, written);
    socket.uncork();
  }

  resetStream(s: H2Stream, code: number): void {
    if (s.localEnded && !this.streams.has(s.id)) return;
    if (!this.destroyed) this.socket.write(rstFrame(s.id, code));
    this.drop(s, code, true);
  }

  /** The stream ends without both sides ending it (a reset either way). */
  private drop(s: H2Stream, code: number, byUs = false): void {
    const wasOpen = this.streams.delete(s.id);
    this.blocked.delete(s);
    const written = s.written;
    s.written = undefined;
    s.queue = [];
    s.queuedBytes = 0;
    s.trailers = undefined;
    s.head = undefined;
    const bothEnded = s.localEnded && s.remoteEnded;
    s.localEnded = true;
    s.remoteEnded = true;
    written?.();
    if (wasOpen && !bothEnded) s.handler?.reset(byUs ? H2Error.CANCEL : code);
    s.handler?.closed?.();
    this.closeIfIdle();
  }

  private localEnd(s: H2Stream): void {
    s.localEnded = true;
    this.blocked.delete(s);
    if (!s.remoteEnded && this.streams.has(s.id)) {
      // Answered before the client finished sending: RST_STREAM NO_ERROR asks it to stop
      // (RFC 9113 §8.1), as Node's http2 does, rather than let it send a request no one reads.
      this.resetStream(s, H2Error.NO_ERROR);
      return;
    }
    this.closeIfDone(s);
  }

  private closeIfDone(s: H2Stream): void {
    if (!(s.localEnded && s.remoteEnded) || !this.streams.delete(s.id)) return;
    s.handler?.closed?.();
    this.closeIfIdle();
  }

  // ---- the connection ----

  /** Set by the owner to hear a PING's ACK (keepalive). */
  pingAcked: (() => void) | undefined;

  ping(): void {
    if (!this.destroyed) this.socket.write(Buffer.concat([frameHeader(8, Type.PING, 0, 0), Buffer.alloc(8)]));
  }

  /** GOAWAY: streams after `lastStreamId` are refused; the connection closes once the open ones end (or at once on an error). */
  goaway(code: number, debug = '', graceful = code === H2Error.NO_ERROR): void {
    if (this.destroyed) return;
    const payload = Buffer.alloc(8 + Buffer.byteLength(debug));
    payload.writeUInt32BE(this.lastStreamId, 0);
    payload.writeUInt32BE(code, 4);
    payload.write(debug, 8);
    this.socket.write(Buffer.concat([frameHeader(payload.length, Type.GOAWAY, 0, 0), payload]));
    this.draining = true;
    if (!graceful) {
      this.socket.end();
      this.destroy();
      return;
    }
    this.closeIfIdle();
  }

  private closeIfIdle(): void {
    if (this.draining && this.streams.size === 0 && !this.destroyed) {
      this.socket.end();
      this.destroy();
    }
  }

  /** The connection is gone: every open stream hears `reset`. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const s of this.streams.values()) this.drop(s, H2Error.CANCEL);
    this.chunks = [];
    if (!this.socket.destroyed && !this.socket.writableEnded) this.socket.destroy();
    // A socket ended by this side closes once its last bytes are out.
    else if (!this.socket.destroyed) this.socket.destroySoon();
    this.events.closed(this);
  }
}

class ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

function frameHeader(length: number, type: number, flags: number, id: number): Buffer {
  const b = Buffer.allocUnsafe(9);
  b.writeUIntBE(length, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(id, 5);
  return b;
}

/** A header block as HEADERS (and CONTINUATION) frames of at most `maxFrame` bytes, in one buffer. */
function headersFrames(id: number, block: Buffer, endStream: boolean, maxFrame: number): Buffer {
  let out: Buffer;
  if (block.length <= maxFrame) {
    out = Buffer.allocUnsafe(9 + block.length);
    out.writeUIntBE(block.length, 0, 3);
    out[3] = Type.HEADERS;
    out[4] = END_HEADERS | (endStream ? END_STREAM : 0);
    out.writeUInt32BE(id, 5);
    block.copy(out, 9);
  } else {
    const parts: Buffer[] = [];
    for (let at = 0; at < block.length; at += maxFrame) {
      const piece = block.subarray(at, at + maxFrame);
      const first = at === 0;
      const last = at + maxFrame >= block.length;
      const flags = (last ? END_HEADERS : 0) | (first && endStream ? END_STREAM : 0);
      parts.push(frameHeader(piece.length, first ? Type.HEADERS : Type.CONTINUATION, flags, id), piece);
    }
    out = Buffer.concat(parts);
  }
  return out;
}

/** A frame whose payload is one 32-bit value: RST_STREAM (its error code), WINDOW_UPDATE (its increment). */
function u32Frame(type: number, id: number, value: number): Buffer {
  const b = Buffer.allocUnsafe(13);
  b.writeUIntBE(4, 0, 3);
  b[3] = type;
  b[4] = 0;
  b.writeUInt32BE(id, 5);
  b.writeUInt32BE(value, 9);
  return b;
}

const rstFrame = (id: number, code: number): Buffer => u32Frame(Type.RST_STREAM, id, code);
const windowUpdate = (id: number, inc: number): Buffer => u32Frame(Type.WINDOW_UPDATE, id, inc);

/** A padded payload's content (PADDED flag), or the payload as it is. */
function unpad(payload: Buffer, flags: number): Buffer {
  if (!(flags & PADDED)) return payload;
  if (payload.length < 1) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, 'padded frame too short');
  const pad = payload[0]!;
  if (pad >= payload.length) throw new ConnectionError(H2Error.PROTOCOL_ERROR, 'padding exceeds the frame');
  return payload.subarray(1, payload.length - pad);
}
