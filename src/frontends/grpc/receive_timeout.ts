// Per-message receive limits for gRPC (issue 25): a request message whose declared length does not
// arrive in time ends its stream with DEADLINE_EXCEEDED, so a client that declares a large message
// and stalls (or trickles) cannot hold a stream, its buffer and its budget admission indefinitely.
// Two limits, both counted only while a message is incomplete (a stream idle between messages is
// never timed): the whole message, from its first byte to its last, and the time without any byte.
// unary_infer.ts times the messages it reads itself; `gatherMessages` those grpc-js reads
// (ModelStreamInfer, compressed calls, every other method), taking the HTTP/2 stream's data
// before grpc-js does.
import http2, { type ServerHttp2Stream } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { freeNow } from '../../kernel/memory.js';

/** Defaults of --grpc-message-receive-timeout-secs and --grpc-message-idle-timeout-secs. */
export const DEFAULT_MESSAGE_RECEIVE_TIMEOUT_SECS = 900;
export const DEFAULT_MESSAGE_IDLE_TIMEOUT_SECS = 60;

export interface ReceiveLimits {
  /** Longest time from a message's first byte to its last, ms; 0 = none. */
  messageMs: number;
  /** Longest time without a byte while a message is incomplete, ms; 0 = none. */
  idleMs: number;
}

export const DEFAULT_RECEIVE_LIMITS: ReceiveLimits = {
  messageMs: DEFAULT_MESSAGE_RECEIVE_TIMEOUT_SECS * 1000,
  idleMs: DEFAULT_MESSAGE_IDLE_TIMEOUT_SECS * 1000,
};

const secs = (ms: number): string => `${ms / 1000} s`;

/** How much of the message is there: its prefix is counted apart, as its length is not known before it. */
function arrived(got: number, length: number | undefined): string {
  return length === undefined ? `${got} of the 5 bytes of its length prefix` : `${got} of its ${length} bytes`;
}

/**
 * Times the message being received on one stream. One timer per message that does not arrive in
 * the chunk it starts in (a small message costs nothing); every chunk only notes the time.
 */
export class MessageClock {
  private timer: NodeJS.Timeout | undefined;
  private started = 0;
  private last = 0;
  private got = 0;
  private length: number | undefined;

  constructor(
    private readonly limits: ReceiveLimits,
    /** Called once when a limit passes, with the status text. */
    private readonly expire: (details: string) => void,
    /** Whether the server itself has stopped reading (grpc-js pauses a stream): no limit runs then. */
    private readonly paused?: () => boolean,
  ) {}

  /** Bytes of an incomplete message have arrived: `got` of `length` (undefined: its prefix is incomplete). */
  progress(got: number, length: number | undefined): void {
    const now = performance.now();
    this.got = got;
    this.length = length;
    this.last = now;
    if (this.timer) return;
    this.started = now;
    this.arm(now);
  }

  /** The message is complete, or no more of it can come: nothing is timed until the next one starts. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(now: number): void {
    const { messageMs, idleMs } = this.limits;
    let at = messageMs > 0 ? this.started + messageMs : Number.POSITIVE_INFINITY;
    if (idleMs > 0) at = Math.min(at, this.last + idleMs);
    if (at === Number.POSITIVE_INFINITY) return;
    this.timer = setTimeout(() => this.check(), Math.max(1, Math.ceil(at - now)));
  }

  private check(): void {
    this.timer = undefined;
    const now = performance.now();
    const { messageMs, idleMs } = this.limits;
    if (this.paused?.()) {
      // Not the client's delay: both clocks start again.
      this.started = this.last = now;
    } else if (idleMs > 0 && now - this.last >= idleMs) {
      this.expire(
        `Timed out receiving a request message: no data for ${secs(idleMs)} with ${arrived(this.got, this.length)} received (--grpc-message-idle-timeout-secs)`,
      );
      return;
    } else if (messageMs > 0 && now - this.started >= messageMs) {
      this.expire(
        `Timed out receiving a request message: ${arrived(this.got, this.length)} received in ${secs(messageMs)} (--grpc-message-receive-timeout-secs)`,
      );
      return;
    }
    this.arm(now);
  }
}

/**
 * Ends a stream whose message timed out: the status (trailers-only, or trailers after what was
 * already sent), then RST_STREAM NO_ERROR, which tells a client still sending to stop (RFC 9113
 * §8.1). grpc-js, which may still hold the call, sends nothing more on it: a trailers-only stream
 * counts as closed at once; after headers, its writes and trailers are dropped until ours are out.
 */
export function endTimedOut(stream: ServerHttp2Stream, details: string): void {
  if (stream.destroyed || stream.closed) return;
  const status = { 'grpc-status': grpc.status.DEADLINE_EXCEEDED, 'grpc-message': encodeURI(details) };
  try {
    if (!stream.headersSent) {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto', ...status }, { endStream: true });
    } else if (!stream.writableEnded) {
      // grpc-js responds with waitForTrailers: the status goes in the trailers, sent once.
      const sendTrailers = stream.sendTrailers.bind(stream);
      let sent = false;
      stream.sendTrailers = (headers) => {
        if (sent) return;
        sent = true;
        sendTrailers(headers);
      };
      stream.write = ((_chunk: unknown, ...rest: unknown[]) => {
        const cb = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
        cb?.();
        return true;
      }) as typeof stream.write;
      stream.prependOnceListener('wantTrailers', () => {
        try {
          stream.sendTrailers(status);
        } catch {
          // reset meanwhile: no one to tell
        }
        // Not from inside this event: nghttp2 would send the reset ahead of the trailers.
        setImmediate(() => stream.close(http2.constants.NGHTTP2_NO_ERROR));
      });
      stream.end();
      // A client that reads nothing never gets to the trailers: reset it anyway.
      setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), 5000).unref();
      return;
    }
  } catch {
    // The stream ended meanwhile.
  }
  stream.close(http2.constants.NGHTTP2_NO_ERROR);
}

/**
 * Takes the data of a stream grpc-js reads (before grpc-js sees it) so that a message which does
 * not arrive in the chunk it starts in is gathered into one allocation of its own, handed on whole
 * once complete, timed meanwhile, and freed at once when the stream ends first. grpc-js would keep
 * such a message as views of the connection's 64 KiB read buffers, which go back only at a garbage
 * collection and then stay in the allocator: 400 MB of a stalled message stayed resident. Complete
 * messages in a chunk pass on as they are (views, no copy). A message above `maxMessage` passes on
 * untouched, so grpc-js refuses it with its own status and text.
 */
export function gatherMessages(stream: ServerHttp2Stream, opts: { limits?: ReceiveLimits; maxMessage: number }): void {
  const push = stream.push.bind(stream) as (chunk: Buffer | null) => boolean;
  const limits = opts.limits;
  const clock =
    limits && (limits.messageMs > 0 || limits.idleMs > 0)
      ? // Bytes handed on and not yet read mean the server is behind, not the client.
        new MessageClock(
          limits,
          (details) => timedOut(details),
          () => stream.readableLength > 0,
        )
      : undefined;
  /** The prefix of the message being gathered, while incomplete. */
  const head = Buffer.alloc(5);
  let headGot = 0;
  /** The message being gathered, with its prefix in front; `got` bytes of it are in. */
  let message: Buffer | undefined;
  let got = 0;
  /** Everything from here on goes to grpc-js as it comes (a message over the limit, or no memory for one). */
  let passing = false;

  const drop = (): void => {
    if (message) freeNow(message.buffer);
    message = undefined;
    headGot = 0;
    clock?.stop();
  };
  const timedOut = (details: string): void => {
    drop();
    passing = true;
    endTimedOut(stream, details);
  };
  stream.once('close', drop);

  /** Copies what `chunk` has of the message being gathered from `at`; the new position. */
  const gather = (chunk: Buffer, at: number): number => {
    if (!message) {
      const n = Math.min(5 - headGot, chunk.byteLength - at);
      chunk.copy(head, headGot, at, at + n);
      headGot += n;
      at += n;
      if (headGot < 5) return at;
      const length = head.readUInt32BE(1);
      if (length <= opts.maxMessage) {
        try {
          // Its own ArrayBuffer (not a slice of the pool): it can be freed whole.
          message = Buffer.allocUnsafeSlow(5 + length);
        } catch {
          // No memory for it: grpc-js gets it in pieces and refuses it when it cannot join them.
        }
      }
      if (!message) {
        passing = true;
        headGot = 0;
        push(Buffer.from(head));
        return at;
      }
      head.copy(message, 0);
      got = 5;
      headGot = 0;
    }
    const n = Math.min(message.byteLength - got, chunk.byteLength - at);
    chunk.copy(message, got, at, at + n);
    got += n;
    return at + n;
  };

  stream.push = (chunk: Buffer | null): boolean => {
    if (chunk === null || passing) {
      // The client's end: a message it left incomplete is never read (grpc-js answers as for none).
      if (chunk === null) drop();
      return push(chunk);
    }
    let ok = true;
    let at = 0;
    const n = chunk.byteLength;
    while (at < n) {
      if (message || headGot > 0) {
        at = gather(chunk, at);
        if (passing) return push(chunk.subarray(at));
        if (message && got === message.byteLength) {
          const whole = message;
          message = undefined;
          clock?.stop();
          ok = push(whole);
        }
        continue;
      }
      // At a message boundary: complete messages in this chunk go on as they are.
      let end = at;
      while (end + 5 <= n) {
        const next = end + 5 + chunk.readUInt32BE(end + 1);
        if (next > n) break;
        end = next;
      }
      if (end > at) ok = push(at === 0 && end === n ? chunk : chunk.subarray(at, end));
      at = end;
      if (at < n) at = gather(chunk, at);
      if (passing) return at < n ? push(chunk.subarray(at)) : ok;
    }
    if (clock) {
      if (message) clock.progress(got - 5, message.byteLength - 5);
      else if (headGot > 0) clock.progress(headGot, undefined);
    }
    return ok;
  };

  // Data Node took in before the stream reached grpc-js (a session can push a read's DATA
  // before its stream is dispatched) is taken back and passed through the above.
  // Once the client's end is in too, the message is all there: it is left as it is.
  const ended = (stream as unknown as { _readableState?: { ended?: boolean } })._readableState?.ended ?? true;
  if (stream.readableLength > 0 && !ended) {
    const early = stream.read() as Buffer | null;
    if (early) stream.push(early);
  }
}
