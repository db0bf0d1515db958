// The lean gRPC path: plain-text HTTP/2 connections to the gRPC port are read in JS
// (h2/session.ts) instead of by Node's http2, and their unary ModelInfer calls (those
// unary_infer.ts takes) are served right there by the same UnaryInferCall; every other stream
// goes on to grpc-js over a private Unix socket (h2/proxy.ts), so metadata, streaming,
// compressed calls, health and the rest behave exactly as before. TLS connections, and anything
// that does not begin with the HTTP/2 preface, go to Node's server as before.
// Off with SERVAL_GRPC_LEAN=0, and when the server has a maximum connection age (not done here).

import { mkdtempSync, rmSync } from 'node:fs';
import type http2 from 'node:http2';
import type { IncomingHttpHeaders } from 'node:http2';
import net, { type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { type GrpcKeepalive, PingPolicy } from './connection.js';
import { encodeHeaders, type HeaderField, headerRecord } from './h2/hpack.js';
import { StreamProxy } from './h2/proxy.js';
import { H2Error, H2Session, type H2Stream, PREFACE, type StreamHandler } from './h2/session.js';
import {
  OK_TRAILERS,
  RESPONSE_HEADERS,
  takes,
  trailersOnly,
  UnaryInferCall,
  type UnaryInferOptions,
  type UnaryStream,
} from './unary_infer.js';

/** A header object's fields, with Node's `date` (what Node's http2 adds to every response) when `date` is given. */
function fieldsOf(headers: Record<string, string | number>, date?: string): HeaderField[] {
  const fields: HeaderField[] = Object.entries(headers).map(([k, v]) => [k, String(v)]);
  if (date !== undefined) fields.push(['date', date]);
  return fields;
}

const OK_TRAILER_BLOCK = encodeHeaders(fieldsOf(OK_TRAILERS));

// The response headers of an answer carry the date: their block is built again once a second.
let headSecond = -1;
let headDate = '';
let headBlock: Buffer = Buffer.alloc(0);

/** Node's `date` header value now, and the answer's header block with it. */
function now(): { date: string; head: Buffer } {
  const second = Math.floor(Date.now() / 1000);
  if (second !== headSecond) {
    headSecond = second;
    headDate = new Date(second * 1000).toUTCString();
    headBlock = encodeHeaders(fieldsOf(RESPONSE_HEADERS, headDate));
  }
  return { date: headDate, head: headBlock };
}

/** A unary call on a lean connection's stream. */
class LeanUnaryStream implements UnaryStream {
  constructor(private readonly stream: H2Stream) {}

  gone(): boolean {
    return this.stream.gone;
  }

  fail(code: number, details: string): void {
    this.stream.respond(fieldsOf(trailersOnly(code, details), now().date), true);
  }

  respond(parts: readonly Uint8Array[], written: () => void): void {
    this.stream.answer(now().head, parts, OK_TRAILER_BLOCK, written);
  }

  timedOut(details: string): void {
    // The session follows the status with RST_STREAM NO_ERROR, so a client still sending stops
    // (as receive_timeout.ts endTimedOut does on grpc-js' streams).
    this.fail(grpc.status.DEADLINE_EXCEEDED, details);
  }
}

export interface LeanGrpcOptions extends UnaryInferOptions {
  keepalive?: GrpcKeepalive;
}

export interface LeanGrpc {
  /** GOAWAY to every lean connection; resolves once they have all closed. */
  shutdown(): Promise<void>;
}

/**
 * Takes over the plain-text listeners of `server` (after bindAsync). Undefined (nothing changed)
 * when off, or when grpc-js has no connection injector or no plain-text listener.
 */
export function serveLeanGrpc(server: grpc.Server, opts: LeanGrpcOptions): LeanGrpc | undefined {
  if (process.env.SERVAL_GRPC_LEAN === '0') return undefined;
  if (opts.keepalive?.maxConnectionAgeMs !== undefined) return undefined;
  const listeners = (server as unknown as { http2Servers?: Map<http2.Http2Server | http2.Http2SecureServer, unknown> }).http2Servers;
  const plain = [...(listeners?.keys() ?? [])].filter(
    (l) => (l as NetServer).listening && !('setSecureContext' in l) && l.listeners('connection').length === 1,
  );
  if (plain.length === 0 || typeof server.createConnectionInjector !== 'function') return undefined;
  // Streams passed on reach grpc-js over a Unix socket in a private folder: a real socket, so
  // Node's http2 reads it natively on both ends (its JS-stream adapter stalls large uploads).
  let dir: string;
  try {
    dir = mkdtempSync(path.join(tmpdir(), 'serval-grpc-'));
  } catch (e) {
    opts.log.warn("no folder for the lean gRPC path's socket: grpc-js serves every connection", { error: String(e) });
    return undefined;
  }
  const socketPath = path.join(dir, 'proxy.sock');
  // A Unix socket's path has a length limit (108 bytes on Linux).
  if (Buffer.byteLength(socketPath) > 100) {
    rmSync(dir, { recursive: true, force: true });
    opts.log.warn('the temporary folder path is too long for a Unix socket: grpc-js serves every connection', { path: socketPath });
    return undefined;
  }
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const internal = net.createServer((c) => injector.injectConnection(c));
  internal.on('error', (e) => opts.log.error('grpc proxy listener failed', { error: String(e) }));
  internal.listen(socketPath);
  internal.unref();
  const closeInternal = (): void => {
    internal.close();
    rmSync(dir, { recursive: true, force: true });
  };
  const connect = (): Duplex => net.connect(socketPath);
  const sessions = new Set<H2Session>();
  /** Connections that have sent nothing yet: no one else knows of them, so shutdown closes them here. */
  const silent = new Set<Socket>();
  let shuttingDown = false;
  const idle: (() => void)[] = [];

  const accept = (socket: Socket, node: (socket: Socket) => void): void => {
    silent.add(socket);
    socket.once('close', () => silent.delete(socket));
    socket.once('data', (first: Buffer) => {
      silent.delete(socket);
      const n = Math.min(first.length, PREFACE.length);
      if (shuttingDown || !first.subarray(0, n).equals(PREFACE.subarray(0, n))) {
        // Not HTTP/2 with prior knowledge: Node's server answers it as it always did.
        socket.pause();
        socket.unshift(first);
        node(socket);
        return;
      }
      const session = leanSession(socket, connect, opts, () => {
        sessions.delete(session);
        if (sessions.size === 0) for (const f of idle.splice(0)) f();
      });
      sessions.add(session);
      session.feed(first);
    });
  };

  for (const l of plain) {
    const node = l.listeners('connection')[0] as (socket: Socket) => void;
    l.removeAllListeners('connection');
    l.on('connection', (socket: Socket) => accept(socket, (s) => node.call(l, s)));
  }

  // grpc-js' forceShutdown ends its own sessions at once; lean connections end with them.
  const force = server.forceShutdown.bind(server);
  server.forceShutdown = () => {
    shuttingDown = true;
    for (const s of silent) s.destroy();
    for (const s of [...sessions]) s.destroy();
    force();
    closeInternal();
  };

  return {
    shutdown(): Promise<void> {
      shuttingDown = true;
      for (const s of silent) s.destroy();
      for (const s of [...sessions]) s.goaway(H2Error.NO_ERROR);
      const done = sessions.size === 0 ? Promise.resolve() : new Promise<void>((r) => idle.push(r));
      return done.then(closeInternal);
    },
  };
}

/** One lean connection: its router, its proxy, and gRPC's keepalive and ping policy. */
function leanSession(socket: Socket, connect: () => Duplex, opts: LeanGrpcOptions, onClosed: () => void): H2Session {
  const proxy = new StreamProxy(connect);
  const k = opts.keepalive;
  const pings = k && new PingPolicy(k);
  let keepaliveTimer: NodeJS.Timeout | undefined;
  let ackTimer: NodeJS.Timeout | undefined;

  const route = (stream: H2Stream, fields: readonly HeaderField[]): StreamHandler => {
    const headers = headerRecord(fields) as IncomingHttpHeaders;
    if (headers[':method'] !== 'POST' || !takes(headers)) return proxy.handler(stream, fields);
    const call = new UnaryInferCall(new LeanUnaryStream(stream), headers, opts);
    return {
      // UnaryInferCall copies every byte into the message it assembles.
      copies: true,
      data(chunk, release) {
        call.data(chunk);
        release();
      },
      end: () => call.end(),
      reset: () => call.close(),
      closed: () => call.close(),
    };
  };

  const session = new H2Session(socket, route, {
    closed() {
      if (keepaliveTimer) clearTimeout(keepaliveTimer);
      if (ackTimer) clearTimeout(ackTimer);
      proxy.destroy();
      onClosed();
    },
    fault(e) {
      opts.log.error('grpc connection failed', { error: e instanceof Error ? (e.stack ?? e.message) : String(e) });
    },
    streamOpened() {
      pings?.callStarted();
    },
    ping(s) {
      if (!pings?.tooMany(s.streams.size) || s.draining) return;
      // Open calls finish; new ones are refused.
      s.goaway(H2Error.ENHANCE_YOUR_CALM, 'too_many_pings', true);
      proxy.close();
    },
  });

  // Keepalive: a PING every timeMs; no ACK within timeoutMs closes the connection (grpc-js does the same on its sessions).
  if (k && k.timeMs > 0 && k.timeMs < 2 ** 31) {
    const arm = (): void => {
      keepaliveTimer = setTimeout(() => {
        session.ping();
        ackTimer = setTimeout(() => session.destroy(), Math.min(k.timeoutMs, 2 ** 31 - 1));
        ackTimer.unref();
      }, k.timeMs);
      keepaliveTimer.unref();
    };
    session.pingAcked = () => {
      if (ackTimer) clearTimeout(ackTimer);
      ackTimer = undefined;
      arm();
    };
    arm();
  }
  return session;
}
