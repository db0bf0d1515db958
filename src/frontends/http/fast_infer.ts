// A lean path for the common HTTP/1.1 inference request. Node's HTTP server and fastify cost
// about 30 µs of CPU per request around an inference (request and response objects, streams,
// routing, hooks): on a 2-core machine as much as the model's own stub. Here each connection is
// first read as raw bytes: while its requests are plain `POST /v2/models/M[/versions/V]/infer`
// with a Content-Length body that has fully arrived (no compression, no Expect, no chunking),
// they are answered here, through the same exchange as the fastify route (infer_exchange.ts),
// with the same bytes on the wire. The first request that is anything else, or that does not
// arrive whole, hands the connection to Node's HTTP server for good: the bytes read so far are
// given to it as if just received, after every answer already begun here has been written.
import { type IncomingHttpHeaders, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { CoreApi } from '../../core/api.js';
import type { BudgetTicket, ByteBudget } from '../../kernel/byte_budget.js';
import { Cancellation } from '../../kernel/cancel.js';
import type { Logger } from '../../kernel/log.js';
import { freeSent } from '../../kernel/memory.js';
import type { RequestTrace } from '../../kernel/trace.js';
import { probeAfterEnd } from './half_close.js';
import { acceptedEncoding, answerInfer, errorAnswer, type InferExchangeOptions } from './infer_exchange.js';

export interface FastInferOptions extends InferExchangeOptions {
  budget?: ByteBudget;
  /** Node's keep-alive timeout, which an idle connection here gets too (ms). */
  keepAliveMs: number;
}

/** Node's limit on a request's head; a bigger one goes to Node, which answers 431. */
const MAX_HEAD = 16 << 10;
/** Bigger bodies go to Node's path, which reads them into one buffer of their size. */
const MAX_BODY = 64 << 10;
/** How long a request that arrived in part may wait here for the rest before Node takes over. */
const PARTIAL_WAIT_MS = 50;
/**
 * Requests of one connection in flight at once; past this, or while the socket's written answers
 * wait for the client to read them, the connection is not read (Node's server pauses alike).
 */
const MAX_PIPELINED = 32;
const INFER_LINE = /^POST (\/v2\/models\/([^/?#%\s]+)(?:\/versions\/([^/?#%\s]+))?\/infer) HTTP\/1\.1$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

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

/** Parses one request from the head of `buf`: the request and its length, 'partial', or 'other' (Node's). */
export function parseFastRequest(buf: Buffer): { req: Parsed; length: number } | 'partial' | 'other' {
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
    if (!TOKEN.test(name)) return 'other';
    const key = name.toLowerCase();
    if (headers[key] !== undefined) return 'other';
    const value = line.slice(colon + 1).trim();
    headers[key] = value;
    rawHeaders.push(name, value);
  }
  const declared = headers['content-length'];
  if (declared === undefined || !/^\d{1,15}$/.test(declared) || Number(declared) > MAX_BODY) return 'other';
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
  const length = end + 4 + Number(declared);
  if (buf.byteLength < length) return 'partial';
  return {
    req: { url: m[1]!, model: m[2]!, version: m[3] ?? '', headers, rawHeaders, body: buf.subarray(end + 4, length) },
    length,
  };
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
      if (!this.buf) this.recvStart = process.hrtime.bigint();
      this.buf = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
      clearTimeout(this.wait);
      this.wait = undefined;
      this.take();
    };

    /** Serves every whole request buffered; hands over at the first that is not for here. */
    private take(): void {
      while (this.buf && !this.handing) {
        if (this.blocked()) {
          this.held = true;
          this.socket.pause();
          return;
        }
        const r = parseFastRequest(this.buf);
        if (r === 'other' || closing) {
          this.handOver();
          return;
        }
        if (r === 'partial') {
          this.wait = setTimeout(() => this.handOver(), PARTIAL_WAIT_MS);
          return;
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

    private serve(req: Parsed): void {
      const p: Pending = { cancellation: new Cancellation() };
      this.queue.push(p);
      const requestId = `fast-${(++ids).toString(36)}`;
      const recvStart = this.recvStart;
      let inferenceId: string | undefined;
      // Everything below, the trace's sampling included, fails into the error answer, never into the socket's event.
      const run = async (): Promise<Buffer[]> => {
        const trace = core.startTrace(req.model);
        if (trace) {
          p.trace = trace;
          trace.stamp('HTTP_RECV_START', recvStart);
          trace.stamp('HTTP_RECV_END', process.hrtime.bigint());
        }
        if (opts.budget) p.ticket = opts.budget.admit(req.body.byteLength);
        const a = await answerInfer(core, opts, {
          model: req.model,
          version: req.version,
          headers: req.headers,
          rawHeaders: req.rawHeaders,
          body: req.body,
          cancellation: p.cancellation,
          ...(trace && { trace }),
          onId: (id) => {
            inferenceId = id;
          },
        });
        if (a.streamed) p.written = () => freeSent(a.sent);
        const head = this.head(200, a.headers, a.total);
        return !a.streamed && a.parts.length === 1 ? [withHead(head, a.parts[0]!)] : [Buffer.from(head, 'latin1'), ...a.parts];
      };
      run().then(
        (bytes) => this.ready(p, bytes),
        (err: Error & { statusCode?: number }) => {
          const a = errorAnswer(err, log, { requestId, inferenceId, method: 'POST', url: req.url });
          this.ready(p, [withHead(this.head(a.status, [['content-type', a.contentType]], a.body.byteLength), a.body)]);
        },
      );
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
      if (socket.destroyed) return;
      for (const l of nodeListeners) l.call(server, socket);
      // Node's parser reads the socket itself from now on; what was read here goes to it first,
      // before this turn of the event loop ends (so before any later bytes).
      const rest = this.buf;
      this.buf = undefined;
      if (rest) socket.emit('data', rest);
      if (this.ended) socket.emit('end');
      socket.resume();
    }

    private readonly onEnd = (): void => {
      this.ended = true;
      if ((this.buf && !this.handing) || (this.handing && !this.queue.length)) {
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
    };

    private readonly onError = (): void => {
      this.socket.destroy();
    };

    private readonly onTimeout = (): void => {
      if (!this.queue.length && !this.buf) this.socket.destroy();
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
      if (!this.queue.length && !this.buf) {
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
