// A lean path for the common HTTP/1.1 inference request. Node's HTTP server and fastify cost
// about 30 µs of CPU per request around an inference (request and response objects, streams,
// routing, hooks): on a 2-core machine as much as the model's own stub. Here each connection is
// first read as raw bytes: while its requests are plain `POST /v2/models/M[/versions/V]/infer`
// with a Content-Length body (no compression, no Expect, no chunking) that arrives without a
// pause, they are answered here, through the same exchange as the fastify route
// (infer_exchange.ts), with the same bytes on the wire. A body over 64 KiB is copied from each
// chunk read straight into one buffer of its length, admitted against the byte budget at its
// head (Node's parser would copy every chunk once more first). The first request that is anything
// else, or that pauses mid-way, hands the connection to Node's HTTP server for good: the bytes
// read so far are given to it as if just received, after every answer already begun here has
// been written.
import { type IncomingHttpHeaders, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { CoreApi } from '../../core/api.js';
import type { BudgetTicket, ByteBudget } from '../../kernel/byte_budget.js';
import { Cancellation } from '../../kernel/cancel.js';
import type { Logger } from '../../kernel/log.js';
import { freeNow, freeSent, wholeBuffer } from '../../kernel/memory.js';
import type { RequestTrace } from '../../kernel/trace.js';
import { probeAfterEnd } from './half_close.js';
import { acceptedEncoding, answerInfer, errorAnswer, type InferAnswer, type InferExchangeOptions } from './infer_exchange.js';

export interface FastInferOptions extends InferExchangeOptions {
  budget?: ByteBudget;
  /** Node's keep-alive timeout, which an idle connection here gets too (ms). */
  keepAliveMs: number;
}

/** Node's limit on a request's head; a bigger one goes to Node, which answers 431. */
const MAX_HEAD = 16 << 10;
/** Bigger bodies are read into one buffer of their size as they arrive, rather than parsed from the connection's buffer. */
const MAX_BODY = 64 << 10;
/** How long a request that arrived in part may wait here for more before Node takes over. */
const PARTIAL_WAIT_MS = 50;
/**
 * Larger bodies go to Node's path: there the per-chunk cost is small beside the body, and a huge
 * one that stalls is held once, not also here until the hand-over.
 */
const MAX_LARGE_BODY = 64 << 20;
/** How long a large body may take here in all (it keeps arriving, but slowly) before Node takes over. */
const LARGE_WAIT_MS = 1000;
/**
 * Requests of one connection in flight at once; past this, or while the socket's written answers
 * wait for the client to read them, the connection is not read (Node's server pauses alike).
 */
const MAX_PIPELINED = 32;
const INFER_LINE = /^POST (\/v2\/models\/([^/?#%\s]+)(?:\/versions\/([^/?#%\s]+))?\/infer) HTTP\/1\.1$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Header names seen and found to be tokens, with their lower-case keys: clients send the same few
 * names on every request, so each is checked and lowered once. Bounded, so odd names cannot grow it.
 */
const headerKeys = new Map<string, string>();
const MAX_HEADER_KEYS = 256;

function headerKey(name: string): string | undefined {
  const known = headerKeys.get(name);
  if (known !== undefined) return known;
  if (!TOKEN.test(name)) return undefined;
  const key = name.toLowerCase();
  if (headerKeys.size < MAX_HEADER_KEYS) headerKeys.set(name, key);
  return key;
}

let dateSecond = 0;
let dateText = '';
/** The Date header's value, as Node writes it (one formatting per second). */
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

/** A response head and a body in one buffer: one socket write. */
function withHead(head: string, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(head.length + body.byteLength);
  body.copy(out, out.write(head, 0, 'latin1'));
  return out;
}

interface Parsed {
  url: string;
  model: string;
  version: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}

/** The head of a request whose body is over MAX_BODY: read into a buffer of `bodyLength` as it comes. */
interface LargeHead {
  head: Omit<Parsed, 'body'>;
  headLength: number;
  bodyLength: number;
}

/**
 * Parses one request from the head of `buf`: the request and its length, the head of one with a
 * body over 64 KiB (up to `maxLarge` bytes; 0: none), 'partial', or 'other' (Node's).
 */
export function parseFastRequest(buf: Buffer, maxLarge = 0): { req: Parsed; length: number } | LargeHead | 'partial' | 'other' {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return buf.byteLength > MAX_HEAD ? 'other' : 'partial';
  if (end > MAX_HEAD) return 'other';
  const lines = buf.toString('latin1', 0, end).split('\r\n');
  const m = INFER_LINE.exec(lines[0]!);
  if (!m) return 'other';
  const headers: IncomingHttpHeaders = {};
  const rawHeaders: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) return 'other';
    const name = line.slice(0, colon);
    // Folded lines, odd names, repeats: Node's parser decides.
    const key = headerKey(name);
    if (key === undefined || headers[key] !== undefined) return 'other';
    const value = line.slice(colon + 1).trim();
    headers[key] = value;
    rawHeaders.push(name, value);
  }
  const declared = headers['content-length'];
  if (declared === undefined || !/^\d{1,15}$/.test(declared)) return 'other';
  const bodyLength = Number(declared);
  // Over --http-max-input-size: Node's path reads it to its end and answers Triton's error.
  if (bodyLength > MAX_BODY && bodyLength > maxLarge) return 'other';
  if (
    headers['transfer-encoding'] !== undefined ||
    headers.expect !== undefined ||
    headers.upgrade !== undefined ||
    headers['content-encoding'] !== undefined ||
    (headers.connection !== undefined && headers.connection.toLowerCase() !== 'keep-alive') ||
    acceptedEncoding(headers['accept-encoding']) !== undefined
  ) {
    return 'other';
  }
  if (bodyLength > MAX_BODY) {
    return { head: { url: m[1]!, model: m[2]!, version: m[3] ?? '', headers, rawHeaders }, headLength: end + 4, bodyLength };
  }
  const length = end + 4 + bodyLength;
  if (buf.byteLength < length) return 'partial';
  return { req: { url: m[1]!, model: m[2]!, version: m[3] ?? '', headers, rawHeaders, body: buf.subarray(end + 4, length) }, length };
}

/**
 * The admission of a large body begun here, handed with its connection to Node's path: the route
 * reading that body takes it over (carriedTicket), so no other request takes its bytes meanwhile.
 */
const carried = new WeakMap<Socket, BudgetTicket>();

/** The admission handed over with `socket` for a body of `bytes`, if any (once). */
export function carriedTicket(socket: Socket | null | undefined, bytes: number): BudgetTicket | undefined {
  const t = socket ? carried.get(socket) : undefined;
  if (!t || !socket) return undefined;
  carried.delete(socket);
  if (t.bytes === bytes) return t;
  t.release();
  return undefined;
}

/** A large body being read: its head's bytes (for a hand-over), the buffer it fills, its admission. */
interface Filling {
  req: Parsed;
  headBytes: Buffer;
  filled: number;
  ticket?: BudgetTicket;
  since: number;
}

/** One answer in the connection's order: written once it is ready and every one before it is. */
interface Pending {
  bytes?: Buffer[];
  /** After the last part is written. */
  written?(): void;
  cancellation: Cancellation;
  trace?: RequestTrace;
  ticket?: BudgetTicket;
}

/**
 * Takes over `app.server`'s connections (before Node's HTTP server sees them) and serves the
 * plain inference requests on them. Not used with --http-restricted-api (its headers are checked
 * by a fastify hook).
 */
export function installFastInfer(app: FastifyInstance, core: CoreApi, log: Logger, opts: FastInferOptions): void {
  const server = app.server;
  const nodeListeners = server.listeners('connection') as Array<(socket: Socket) => void>;
  server.removeAllListeners('connection');
  const connections = new Set<FastConnection>();
  let closing = false;
  let ids = 0;

  class FastConnection {
    private buf: Buffer | undefined;
    /** A large body arriving: every byte read goes into it until it is whole. */
    private body: Filling | undefined;
    private readonly queue: Pending[] = [];
    private handing = false;
    private held = false;
    private ended = false;
    private wait: NodeJS.Timeout | undefined;
    private stopProbes: (() => void) | undefined;
    private recvStart = 0n;

    constructor(private readonly socket: Socket) {
      connections.add(this);
      socket.setNoDelay(true);
      socket.setTimeout(opts.keepAliveMs);
      for (const [event, fn] of this.listeners()) socket.on(event, fn);
    }

    /** Every socket listener of this path: added together, removed together at the hand-over. */
    private listeners(): Array<[string, Parameters<Socket['removeListener']>[1]]> {
      return [
        ['data', this.onData],
        ['end', this.onEnd],
        ['close', this.onClose],
        ['error', this.onError],
        ['timeout', this.onTimeout],
        ['drain', this.onDrain],
      ];
    }

    private readonly onData = (chunk: Buffer): void => {
      clearTimeout(this.wait);
      this.wait = undefined;
      if (this.body && !this.handing) {
        const rest = this.fill(chunk);
        if (!rest) {
          // All of it was copied into the body: the socket's read is freed now rather than left
          // to count as V8 external memory (which triggers a scavenge every ~64 MB of it).
          const whole = wholeBuffer(chunk);
          if (whole) freeNow(whole);
          return;
        }
        chunk = rest;
      }
      if (!this.buf) this.recvStart = process.hrtime.bigint();
      this.buf = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
      this.take();
    };

    /** Starts reading a large body, admitted at once; false when the budget refuses it. */
    private startBody(r: LargeHead, buf: Buffer): boolean {
      let ticket: BudgetTicket | undefined;
      try {
        ticket = opts.budget?.admit(r.bodyLength);
      } catch {
        // Refused: Node's path reads the body to its end and answers the budget's error.
        return false;
      }
      this.body = {
        req: { ...r.head, body: Buffer.allocUnsafe(r.bodyLength) },
        headBytes: Buffer.from(buf.subarray(0, r.headLength)),
        filled: 0,
        ...(ticket && { ticket }),
        since: Date.now(),
      };
      return true;
    }

    /**
     * Copies `chunk` into the body being read. Returns what follows the body once it is whole
     * (served then), or undefined while it is not (waiting a while for more, then Node's).
     */
    private fill(chunk: Buffer): Buffer | undefined {
      const b = this.body!;
      const data = b.req.body;
      const n = Math.min(chunk.byteLength, data.byteLength - b.filled);
      chunk.copy(data, b.filled, 0, n);
      b.filled += n;
      if (b.filled < data.byteLength) {
        const left = LARGE_WAIT_MS - (Date.now() - b.since);
        this.wait = setTimeout(() => this.handOver(), Math.max(0, Math.min(PARTIAL_WAIT_MS, left)));
        return undefined;
      }
      this.body = undefined;
      this.serve(b.req, b.ticket);
      return n < chunk.byteLength ? chunk.subarray(n) : undefined;
    }

    /** Serves every whole request buffered; hands over at the first that is not for here. */
    private take(): void {
      while (this.buf && !this.handing) {
        if (this.blocked()) {
          this.held = true;
          this.socket.pause();
          return;
        }
        const r = parseFastRequest(this.buf, Math.min(opts.maxInputSize, MAX_LARGE_BODY));
        if (r === 'other' || closing) {
          this.handOver();
          return;
        }
        if (r === 'partial') {
          this.wait = setTimeout(() => this.handOver(), PARTIAL_WAIT_MS);
          return;
        }
        if ('bodyLength' in r) {
          if (!this.startBody(r, this.buf)) {
            this.handOver();
            return;
          }
          // What arrived with the head goes into the body; what follows a whole one stays buffered.
          this.buf = this.fill(this.buf.subarray(r.headLength));
          if (this.buf) this.recvStart = process.hrtime.bigint();
          continue;
        }
        this.buf = r.length === this.buf.byteLength ? undefined : this.buf.subarray(r.length);
        this.serve(r.req);
        if (this.buf) this.recvStart = process.hrtime.bigint();
      }
    }

    private blocked(): boolean {
      return this.queue.length >= MAX_PIPELINED || this.socket.writableNeedDrain;
    }

    /** Reading again once the answers have room (a paused socket's unread requests are then taken). */
    private readonly onDrain = (): void => {
      if (!this.held || this.handing || this.blocked()) return;
      this.held = false;
      this.socket.resume();
      this.take();
    };

    /** Runs one request; `ticket`: its body's admission, taken already (a large body's, at its head). */
    private serve(req: Parsed, ticket?: BudgetTicket): void {
      const p: Pending = { cancellation: new Cancellation(), ticket };
      this.queue.push(p);
      const id = ++ids;
      const recvStart = this.recvStart;
      let inferenceId: string | undefined;
      // Everything below, the trace's sampling included, fails into the error answer, never into the socket's event.
      const failed = (err: Error & { statusCode?: number }): void => {
        const a = errorAnswer(err, log, { requestId: `fast-${id.toString(36)}`, inferenceId, method: 'POST', url: req.url });
        this.ready(p, [withHead(this.head(a.status, [['content-type', a.contentType]], a.body.byteLength), a.body)]);
      };
      let answer: Promise<InferAnswer>;
      try {
        const trace = core.startTrace(req.model);
        if (trace) {
          p.trace = trace;
          trace.stamp('HTTP_RECV_START', recvStart);
          trace.stamp('HTTP_RECV_END', process.hrtime.bigint());
        }
        if (opts.budget && !p.ticket) p.ticket = opts.budget.admit(req.body.byteLength);
        answer = answerInfer(core, opts, {
          model: req.model,
          version: req.version,
          headers: req.headers,
          rawHeaders: req.rawHeaders,
          body: req.body,
          cancellation: p.cancellation,
          ...(trace && { trace }),
          onId: (i) => {
            inferenceId = i;
          },
        });
      } catch (e) {
        answer = Promise.reject(e);
      }
      // One continuation for the answer (an async wrapper around it would add two more turns).
      answer.then((a) => {
        let bytes: Buffer[];
        try {
          const head = this.head(200, a.headers, a.total);
          bytes = !a.streamed && a.parts.length === 1 ? [withHead(head, a.parts[0]!)] : [Buffer.from(head, 'latin1'), ...a.parts];
        } catch (e) {
          failed(e as Error);
          return;
        }
        if (a.streamed) p.written = () => freeSent(a.sent);
        this.ready(p, bytes);
      }, failed);
    }

    /** The response head as Node and fastify write it (their header order and names). */
    private head(status: number, headers: ReadonlyArray<readonly [string, string | number]>, length: number): string {
      const accepting = core.isAccepting();
      let h = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
      for (const [k, v] of headers) h += `${k}: ${v}\r\n`;
      // While shutting down, responses close their keep-alive connections (server.ts's onSend).
      if (!accepting) h += 'connection: close\r\n';
      h += `content-length: ${length}\r\nDate: ${httpDate()}\r\n`;
      return accepting ? `${h}Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(opts.keepAliveMs / 1000)}\r\n\r\n` : `${h}\r\n`;
    }

    private ready(p: Pending, bytes: Buffer[]): void {
      p.bytes = bytes;
      this.flush();
    }

    /** Writes the answers that are ready, in order; then hands over or closes if due. */
    private flush(): void {
      const socket = this.socket;
      while (this.queue.length && this.queue[0]!.bytes) {
        const p = this.queue.shift()!;
        if (socket.destroyed) {
          this.settle(p);
          continue;
        }
        p.trace?.stamp('HTTP_SEND_START', process.hrtime.bigint());
        const bytes = p.bytes!;
        if (bytes.length > 1) socket.cork();
        for (let i = 0; i < bytes.length - 1; i++) socket.write(bytes[i]!);
        socket.write(bytes[bytes.length - 1]!, () => {
          p.trace?.stamp('HTTP_SEND_END', process.hrtime.bigint());
          this.settle(p);
        });
        if (bytes.length > 1) socket.uncork();
        if (!core.isAccepting()) this.ended = true;
      }
      this.onDrain();
      if (this.queue.length) return;
      this.stopProbes?.();
      if (this.ended) {
        this.finish();
        return;
      }
      if (this.handing) this.handOver();
    }

    /** An answer is out (or its client gone): its trace ends, its bytes are let go. */
    private settle(p: Pending): void {
      p.written?.();
      p.written = undefined;
      p.ticket?.release();
      p.trace?.end();
      p.trace = undefined;
    }

    /** Node's HTTP server takes the connection, with what is buffered, once the answers begun here are out. */
    private handOver(): void {
      this.handing = true;
      clearTimeout(this.wait);
      this.wait = undefined;
      if (this.queue.length) {
        // Read no more until then: the next bytes are Node's.
        this.socket.pause();
        return;
      }
      if (!connections.delete(this)) return;
      const socket = this.socket;
      for (const [event, fn] of this.listeners()) socket.removeListener(event, fn);
      socket.setTimeout(0);
      if (socket.destroyed) {
        this.dropBody();
        return;
      }
      for (const l of nodeListeners) l.call(server, socket);
      // Node's parser reads the socket itself from now on; what was read here goes to it first,
      // before this turn of the event loop ends (so before any later bytes).
      const b = this.body;
      if (b) {
        // A large body begun here: Node reads it anew (its parser copies what it is given), with
        // its admission: its head and what came of it so far; this copy is let go at once.
        const ticket = b.ticket;
        if (ticket) {
          b.ticket = undefined;
          carried.set(socket, ticket);
          // Released with the connection if Node's route never takes it.
          socket.once('close', () => {
            carried.get(socket)?.release();
            carried.delete(socket);
          });
        }
        socket.emit('data', b.headBytes);
        if (b.filled) socket.emit('data', b.req.body.subarray(0, b.filled));
        this.dropBody();
      }
      const rest = this.buf;
      this.buf = undefined;
      if (rest) socket.emit('data', rest);
      if (this.ended) socket.emit('end');
      socket.resume();
    }

    private readonly onEnd = (): void => {
      this.ended = true;
      if (((this.buf || this.body) && !this.handing) || (this.handing && !this.queue.length)) {
        this.handOver();
        return;
      }
      if (!this.queue.length) {
        this.finish();
        return;
      }
      // A half-closed client may still read its answers; one that left is found by writing to it.
      this.stopProbes = probeAfterEnd(
        () => this.queue.length > 0 && !this.socket.destroyed,
        () => this.socket.write('HTTP/1.1 100 Continue\r\n\r\n'),
      );
    };

    private readonly onClose = (): void => {
      connections.delete(this);
      clearTimeout(this.wait);
      this.stopProbes?.();
      // Requests still queued or running are cancelled, as Node's route cancels on the response's close.
      for (const p of this.queue) {
        p.cancellation.cancel();
        this.settle(p);
      }
      this.queue.length = 0;
      this.buf = undefined;
      this.dropBody();
    };

    /** A large body being read is given up: its admission released, its buffer freed. */
    private dropBody(): void {
      const b = this.body;
      if (!b) return;
      this.body = undefined;
      b.ticket?.release();
      freeNow(b.req.body.buffer);
    }

    private readonly onError = (): void => {
      this.socket.destroy();
    };

    private readonly onTimeout = (): void => {
      if (!this.queue.length && !this.buf && !this.body) this.socket.destroy();
    };

    /** Ends the connection once what was written is out (as Node does after `Connection: close`). */
    private finish(): void {
      const socket = this.socket;
      if (socket.destroyed || socket.writableEnded) return;
      socket.end();
      socket.once('finish', () => socket.destroy());
    }

    /** Shutdown: an idle connection closes now (as Node's closeIdleConnections), a busy one after its answers. */
    close(): void {
      if (this.handing) return;
      if (!this.queue.length && !this.buf && !this.body) {
        connections.delete(this);
        this.socket.destroy();
      } else this.ended = true;
    }
  }

  server.on('connection', (socket: Socket) => {
    if (closing) {
      for (const l of nodeListeners) l.call(server, socket);
      return;
    }
    new FastConnection(socket);
  });
  app.addHook('preClose', (done) => {
    closing = true;
    for (const c of [...connections]) c.close();
    done();
  });
}
