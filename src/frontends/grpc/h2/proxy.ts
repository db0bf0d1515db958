// The streams a lean connection (lean_grpc.ts) does not serve itself, served by grpc-js as
// before: each becomes a stream of an HTTP/2 connection to grpc-js (a private Unix socket whose
// connections go to grpc-js' connection injector), with the client's headers, data, end and resets passed one way and grpc-js'
// headers, data, trailers and resets the other. One such connection per lean connection, made
// when its first such stream comes. HTTP/2 state (HPACK tables, stream ids, flow control) is
// per connection, so a connection cannot change hands once read; streams can.
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import type { Duplex } from 'node:stream';
import { type HeaderField, headerRecord } from './hpack.js';
import { H2Error, type H2Stream, STREAM_WINDOW, type StreamHandler } from './session.js';

/** Opens a new connection to the HTTP/2 server that serves the proxied streams (grpc-js). */
export type Connect = () => Duplex;

/** Proxied data waiting for the client's flow-control credit beyond this pauses the grpc-js stream. */
const QUEUE_LIMIT = 1 << 20;

export class StreamProxy {
  private client: ClientHttp2Session | undefined;
  private closing = false;

  constructor(private readonly connect: Connect) {}

  private session(): ClientHttp2Session {
    if (this.client && !this.client.destroyed && !this.client.closed) return this.client;
    const client = http2.connect('http://127.0.0.1', {
      createConnection: this.connect,
      settings: { initialWindowSize: STREAM_WINDOW, enablePush: false },
    });
    client.on('error', () => {});
    client.on('close', () => {
      if (this.client === client) this.client = undefined;
    });
    this.client = client;
    return client;
  }

  /** The handler of a client stream passed on to grpc-js. */
  handler(stream: H2Stream, fields: readonly HeaderField[]): StreamHandler {
    let req: ClientHttp2Stream;
    try {
      if (this.closing) throw new Error('closing');
      req = this.session().request(headerRecord(fields), { endStream: false });
    } catch {
      // A header set Node refuses (connection-specific fields: malformed in HTTP/2), or no session.
      stream.reset(this.closing ? H2Error.REFUSED_STREAM : H2Error.PROTOCOL_ERROR);
      return { data: (_c, release) => release(), end() {}, reset() {} };
    }
    /** This side's end is sent or queued: grpc-js' close after it is no reset. */
    let finished = false;
    /**
     * Data that came before the response headers: Node can emit a read's DATA ahead of the
     * 'response' of the HEADERS before it (the headers' event waits a tick), so it waits for them.
     */
    let early: Buffer[] | undefined = [];
    req.on('response', (headers: IncomingHttpHeaders, flags: number) => {
      const endStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
      if (endStream) finished = true;
      stream.respond(toFields(headers), endStream);
      const before = early!;
      early = undefined;
      if (before.length > 0) stream.send(before);
    });
    req.on('data', (chunk: Buffer) => {
      if (early) early.push(chunk);
      else stream.send([chunk]);
      if (stream.queuedBytes > QUEUE_LIMIT) req.pause();
    });
    stream.onDrain = () => req.resume();
    /** The stream's end (trailers, or an empty block when it had none), once the response headers are out. */
    const endWith = (fields: HeaderField[]): void => {
      finished = true;
      if (early) req.once('response', () => stream.send([], fields));
      else stream.send([], fields);
    };
    req.on('trailers', (trailers: IncomingHttpHeaders) => endWith(toFields(trailers)));
    req.on('end', () => {
      if (!finished) endWith([]);
    });
    req.on('close', () => {
      if (!finished && !stream.gone) stream.reset(req.rstCode || H2Error.INTERNAL_ERROR);
    });
    req.on('error', () => {});
    return {
      data: (chunk, release) => {
        if (req.destroyed || req.writableEnded) {
          release();
          return;
        }
        // The client's credit comes back once grpc-js' side has taken the bytes.
        req.write(chunk, () => release());
      },
      end: () => {
        if (!req.destroyed) req.end();
      },
      reset: (code) => {
        finished = true;
        if (!req.destroyed) req.close(code);
      },
    };
  }

  /** No new streams; the open ones finish. */
  close(): void {
    this.closing = true;
    this.client?.close();
  }

  destroy(): void {
    this.closing = true;
    this.client?.destroy();
    this.client = undefined;
  }
}

function toFields(headers: IncomingHttpHeaders): HeaderField[] {
  const fields: HeaderField[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) fields.push([name, v]);
    else fields.push([name, String(value)]);
  }
  // Pseudo-headers first (RFC 9113 §8.3).
  return fields.sort((a, b) => Number(b[0].startsWith(':')) - Number(a[0].startsWith(':')));
}
