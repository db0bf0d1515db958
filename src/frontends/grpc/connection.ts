// gRPC connection settings as tritonserver names them: TLS (--grpc-use-ssl*, --grpc-*-cert/key),
// keepalive and connection age (grpc-js server options), and gRPC core's ping abuse policy, which
// grpc-js does not have (--grpc-http2-min-recv-ping-interval-without-data, --grpc-http2-max-ping-strikes).
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';

export interface GrpcTls {
  /** PEM files. */
  serverCert: string;
  serverKey: string;
  /** Client certificates are checked against this CA (mutual TLS); '' = none. */
  rootCert: string;
  /** --grpc-use-ssl-mutual: a client must present a certificate the root certificate signed. */
  mutual: boolean;
}

export interface GrpcKeepalive {
  /** Milliseconds between the server's keepalive pings (Triton's default 7200000). */
  timeMs: number;
  /** Milliseconds the server waits for a ping's acknowledgement before it closes the connection. */
  timeoutMs: number;
  /** Whether a client may ping a connection with no calls more often than every 2 hours. */
  permitWithoutCalls: boolean;
  /** A client ping sooner than this after the previous one is a strike (Triton's default 300000). */
  minRecvPingIntervalMs: number;
  /** Strikes tolerated before GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (0 = any number). */
  maxPingStrikes: number;
  /** Milliseconds a connection may live before GOAWAY; undefined = no limit. */
  maxConnectionAgeMs?: number;
  /** Milliseconds its calls then get to finish; undefined = no limit. */
  maxConnectionAgeGraceMs?: number;
}

function readPem(path: string, flag: string): Buffer {
  if (path === '') throw new Error(`--${flag} must name a PEM file when --grpc-use-ssl is true`);
  try {
    return readFileSync(path);
  } catch (e) {
    throw new Error(`--${flag}: cannot read '${path}': ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** The server's credentials: insecure without TLS; with it, the server's key pair and, for mutual TLS, the client CA. */
export function serverCredentials(tls: GrpcTls | undefined): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  const cert = readPem(tls.serverCert, 'grpc-server-cert');
  const key = readPem(tls.serverKey, 'grpc-server-key');
  const root = tls.mutual || tls.rootCert !== '' ? readPem(tls.rootCert, 'grpc-root-cert') : null;
  return grpc.ServerCredentials.createSsl(root, [{ private_key: key, cert_chain: cert }], tls.mutual);
}

/** The grpc-js options the keepalive settings map to (grpc-js reads the same names as gRPC core). */
export function keepaliveOptions(k: GrpcKeepalive | undefined): grpc.ServerOptions {
  if (!k) return {};
  return {
    'grpc.keepalive_time_ms': k.timeMs,
    'grpc.keepalive_timeout_ms': k.timeoutMs,
    ...(k.maxConnectionAgeMs !== undefined && { 'grpc.max_connection_age_ms': k.maxConnectionAgeMs }),
    ...(k.maxConnectionAgeGraceMs !== undefined && { 'grpc.max_connection_age_grace_ms': k.maxConnectionAgeGraceMs }),
  };
}

/** gRPC core's idle-connection ping interval when keepalive without calls is not permitted. */
const IDLE_PING_INTERVAL_MS = 2 * 60 * 60 * 1000;

/**
 * gRPC core's ping abuse policy for one connection: a client PING sooner than the allowed
 * interval after the previous one is a strike; more than maxPingStrikes strikes end the
 * connection with GOAWAY ENHANCE_YOUR_CALM and "too_many_pings", which gRPC clients read as a
 * request to ping less. The interval is minRecvPingIntervalMs while calls are open and 2 hours on
 * an idle connection unless permitWithoutCalls. Strikes start over when a call starts (gRPC core:
 * when the server sends headers or data, which every call makes it do). Used on grpc-js' sessions
 * (policePings) and on the lean path's connections (lean_grpc.ts).
 */
export class PingPolicy {
  private strikes = 0;
  private lastPing = Number.NEGATIVE_INFINITY;

  constructor(private readonly k: GrpcKeepalive) {}

  /** A call started: strikes start over. */
  callStarted(): void {
    this.strikes = 0;
    this.lastPing = Number.NEGATIVE_INFINITY;
  }

  /** A client PING arrived while `open` calls are open: whether it is a strike too many (GOAWAY due). */
  tooMany(open: number): boolean {
    const k = this.k;
    const now = performance.now();
    const interval = open === 0 && !k.permitWithoutCalls ? IDLE_PING_INTERVAL_MS : k.minRecvPingIntervalMs;
    const tooSoon = now < this.lastPing + interval;
    this.lastPing = now;
    if (!tooSoon) return false;
    this.strikes++;
    return k.maxPingStrikes !== 0 && this.strikes > k.maxPingStrikes;
  }
}

/** PingPolicy on one of Node's HTTP/2 sessions (grpc-js'). */
export function policePings(session: http2.ServerHttp2Session, k: GrpcKeepalive): void {
  const policy = new PingPolicy(k);
  let open = 0;
  session.on('stream', (stream: http2.ServerHttp2Stream) => {
    policy.callStarted();
    open++;
    stream.once('close', () => open--);
  });
  session.on('ping', () => {
    if (!policy.tooMany(open) || session.closed || session.destroyed) return;
    // Every stream is let finish (the highest id); new ones are refused.
    session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, ~(1 << 31), Buffer.from('too_many_pings'));
    session.close();
  });
}

/** Applies policePings to every session of the server's HTTP/2 listeners (after bindAsync). */
export function policeServerPings(server: grpc.Server, k: GrpcKeepalive | undefined): void {
  if (!k) return;
  const listeners = (server as unknown as { http2Servers?: Map<http2.Http2Server | http2.Http2SecureServer, unknown> }).http2Servers;
  for (const listener of listeners?.keys() ?? []) {
    listener.on('session', (session: http2.ServerHttp2Session) => policePings(session, k));
  }
}

/**
 * HTTP/2 flow-control windows of the server's sessions. Node's (and so grpc-js') default lets a
 * client send 64 KiB per stream and per connection before it must wait for the server's
 * WINDOW_UPDATE: a 1 MiB request waits for 16 of those round trips through the event loop (5 ms
 * of a 7 ms round trip measured with perf_analyzer). gRPC core servers grow their windows to
 * megabytes (BDP probing); these are fixed at that size. What a client may have in flight stays
 * bounded: a stream's window by STREAM_WINDOW, the connection's by CONNECTION_WINDOW.
 */
const STREAM_WINDOW = 8 << 20;
const CONNECTION_WINDOW = 16 << 20;
const FRAME_SIZE = 1 << 20;

export function widenFlowControl(server: grpc.Server): void {
  const listeners = (server as unknown as { http2Servers?: Map<http2.Http2Server | http2.Http2SecureServer, unknown> }).http2Servers;
  for (const listener of listeners?.keys() ?? []) {
    listener.on('session', (session: http2.ServerHttp2Session) => {
      const widen = (): void => {
        if (session.destroyed) return;
        session.setLocalWindowSize(CONNECTION_WINDOW);
        session.settings({ initialWindowSize: STREAM_WINDOW, maxFrameSize: FRAME_SIZE });
      };
      // The session's socket is connected once the session emits 'connect' (or already is).
      if (session.connecting) session.once('connect', widen);
      else widen();
    });
  }
}
