// Unary ModelInfer: the one implementation (`modelInfer`), and the transport that serves it on
// grpc-js' own HTTP/2 sessions without grpc-js' per-call layer (issue 14). grpc-js collects a
// message's DATA chunks and joins them, and copies the encoded response to put the frame prefix in
// front; here the message is copied into one allocation as it arrives (and handed to the core as
// the request's own memory), and the response goes out in parts, large raw outputs as their own
// bytes. Only uncompressed calls with a well-formed deadline are taken: every other stream (other
// methods, ModelStreamInfer, compressed messages, anything unusual) goes to grpc-js (its messages
// gathered and timed by receive_timeout.ts), which serves a compressed ModelInfer through the same
// `modelInfer`. Statuses, texts, headers and
// trailers are grpc-js' (server-interceptors.js), so a client cannot tell the two paths apart.
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import type { CoreApi } from '../../core/api.js';
import type { BudgetTicket, ByteBudget } from '../../kernel/byte_budget.js';
import { Cancellation } from '../../kernel/cancel.js';
import { asServalError, grpcStatus, isServerFault, ServalError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/log.js';
import { freeNow, freeSent } from '../../kernel/memory.js';
import { addForwarded } from '../header_forward.js';
import type { ModelInferResponse } from './generated/inference/ModelInferResponse.js';
import { decodeGrpcInfer, EMPTY_FINAL_PARAM, encodeGrpcInfer } from './infer_codec.js';
import { readInferRequest, type WireInferRequest, writeInferResponseParts } from './infer_wire.js';
import { nativeHeaderList, respondInOneWrite, writeParts } from './one_write.js';
import { endTimedOut, gatherMessages, MessageClock, type ReceiveLimits } from './receive_timeout.js';
import { grpcInferTrace, grpcTraceSending } from './trace_logging.js';

export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

/** Triton's answer (UNSUPPORTED: gRPC UNIMPLEMENTED) to a unary ModelInfer for a decoupled model. */
export const DECOUPLED_REFUSAL = "ModelInfer RPC doesn't support models with decoupled transaction policy";

const EMPTY = new Uint8Array(0);

/** What a call gives the run besides its message. */
export interface ModelInferCall {
  cancellation: Cancellation;
  /** The received message's memory, when it is the request's alone (see InferRequest.ownMemory). */
  ownMemory?: ArrayBuffer;
  /** The message's bytes, admitted against the in-flight budget before it was read; released here. */
  ticket?: BudgetTicket;
  /** Headers forwarded as request parameters (--grpc-header-forward-pattern), added after the request's own. */
  forwarded?: Record<string, string>;
}

/** Runs one ModelInfer and encodes its response with `encode`; rejects with the error to answer. */
export type ModelInferRun = <T>(r: WireInferRequest, call: ModelInferCall, encode: (res: ModelInferResponse) => T) => Promise<T>;

/** The body of ModelInfer, whichever transport received the message. */
export function modelInfer(core: CoreApi, budget: ByteBudget | undefined): ModelInferRun {
  return async (r, call, encode) => {
    if (r.wireError) {
      call.ticket?.release();
      throw r.wireError;
    }
    // Triton checks the model's transaction policy before it reads the request any further.
    if (core.isDecoupled(r.model_name, r.model_version)) {
      call.ticket?.release();
      throw ServalError.unsupported(DECOUPLED_REFUSAL);
    }
    // A transport that read the message into memory unadmitted: the budget refuses holding it any longer.
    let ticket = call.ticket;
    if (!ticket) {
      let held = 0;
      for (const raw of r.raw_input_contents) held += raw.byteLength;
      ticket = budget?.admit(held);
    }
    const trace = grpcInferTrace(core, r.model_name);
    try {
      const req = decodeGrpcInfer(r);
      // Only a stream has empty final responses to enable; a unary call takes the flag and drops it (as Triton).
      delete req.parameters[EMPTY_FINAL_PARAM];
      addForwarded(req.parameters, call.forwarded);
      req.cancellation = call.cancellation;
      if (call.ownMemory) req.ownMemory = call.ownMemory;
      if (trace) req.trace = trace;
      const res = await core.infer(req);
      // Answered: the request's tensors (views of the received message) are let go, unread, before
      // the response is encoded, so a large request's memory can be freed meanwhile.
      r.raw_input_contents = [];
      for (const inp of req.inputs) inp.data = EMPTY;
      if (!trace) return encode(encodeGrpcInfer(res));
      trace.stamp('INFER_RESPONSE_COMPLETE', process.hrtime.bigint());
      const encoded = encode(encodeGrpcInfer(res));
      grpcTraceSending(trace);
      return encoded;
    } catch (e) {
      trace?.end();
      throw e;
    } finally {
      ticket?.release();
    }
  };
}

/**
 * The gRPC status for an error a handler threw, through the one status table; server faults
 * (INTERNAL, unexpected errors) are logged with the method and the inference request's id.
 */
export function grpcFault(log: Logger, method: string, requestId: unknown, e: unknown): { code: number; details: string } {
  const err = asServalError(e);
  if (isServerFault(e)) {
    log.error('grpc request failed', {
      method,
      request_id: typeof requestId === 'string' ? requestId : undefined,
      error: e instanceof Error ? (e.stack ?? e.message) : String(e),
    });
  }
  return { code: grpcStatus(err.code), details: err.message };
}

// ---- the transport ----

/** grpc-timeout as grpc-js reads it; anything else (grpc-js answers INTERNAL) is left to grpc-js. */
const TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

// grpc-js' response headers for a unary call, and its trailers (both transports send these).
export const RESPONSE_HEADERS = {
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
  'grpc-encoding': 'identity',
};
export const OK_TRAILERS = { 'grpc-status': grpc.status.OK, 'grpc-message': 'OK' };
const OK_TRAILER_LIST = nativeHeaderList(OK_TRAILERS);

/** A status with no message, as grpc-js sends it: the headers of a trailers-only response. */
export function trailersOnly(code: number, details: string): Record<string, string | number> {
  return { ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-status': code, 'grpc-message': encodeURI(details) };
}

type StreamHandler = (
  this: GrpcServerInternals,
  extraInterceptors: unknown,
  stream: ServerHttp2Stream,
  headers: IncomingHttpHeaders,
) => void;

/** The grpc-js 1.14 internals this uses: the per-stream dispatchers and the idle-timeout hook. */
interface GrpcServerInternals {
  _streamHandler?: StreamHandler;
  _channelzHandler?: StreamHandler;
  onStreamOpened?: (stream: ServerHttp2Stream) => void;
}

export interface UnaryInferOptions {
  run: ModelInferRun;
  log: Logger;
  /** grpc.max_receive_message_length / max_send_message_length of the server. */
  maxMessage: number;
  /** --grpc-header-forward-pattern: the metadata a call forwards as request parameters. */
  forward?: (metadata: grpc.Metadata) => Record<string, string> | undefined;
  /** --grpc-restricted-protocol's check for ModelInfer (restricted.ts grpcRefusal); none: unrestricted. */
  refusal?: (metadata: grpc.Metadata) => string | undefined;
  /**
   * The in-flight byte budget: a message is admitted by the length its prefix gives, before any
   * of it is read (as an HTTP body by its Content-Length), so a refused one costs no memory.
   */
  budget?: ByteBudget;
  /** Per-message receive limits, for this transport's messages and those grpc-js reads (receive_timeout.ts). */
  limits?: ReceiveLimits;
}

/**
 * Serves unary ModelInfer calls of `server` (before it is bound): its stream dispatchers are
 * wrapped so a call this transport takes never reaches grpc-js' call layer. False (and everything
 * left to grpc-js) when this grpc-js has not the dispatchers it knows.
 */
export function serveUnaryInfer(server: grpc.Server, opts: UnaryInferOptions): boolean {
  const internals = server as unknown as GrpcServerInternals;
  const names = ['_streamHandler', '_channelzHandler'] as const;
  if (names.some((n) => typeof internals[n] !== 'function')) {
    opts.log.warn('grpc-js has no stream dispatchers to wrap: ModelInfer goes through grpc-js');
    return false;
  }
  for (const name of names) {
    const original = internals[name]!;
    internals[name] = function (this: GrpcServerInternals, extraInterceptors, stream, headers) {
      if (!takes(headers)) {
        gatherMessages(stream, { limits: opts.limits, maxMessage: opts.maxMessage });
        original.call(this, extraInterceptors, stream, headers);
        return;
      }
      // What grpc-js does for every stream: an error listener (a broken stream also closes, which
      // cancels the call) and the idle-timeout count of open streams.
      stream.once('error', () => {});
      this.onStreamOpened?.(stream);
      const call = new UnaryInferCall(new NodeUnaryStream(stream), headers, opts);
      // After an answer, what the client still sends is read and dropped (as grpc-js does).
      stream.on('data', (chunk: Buffer) => call.data(chunk));
      stream.once('end', () => call.end());
      stream.once('close', () => call.close());
    };
  }
  return true;
}

/** Whether a stream with these headers is a call this transport serves (else grpc-js does). */
export function takes(headers: IncomingHttpHeaders): boolean {
  if (headers[':path'] !== MODEL_INFER_PATH) return false;
  const type = headers['content-type'];
  if (typeof type !== 'string' || !type.startsWith('application/grpc')) return false;
  const encoding = headers['grpc-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return false;
  const timeout = headers['grpc-timeout'];
  return timeout === undefined || (typeof timeout === 'string' && TIMEOUT.test(timeout));
}

/** What a unary call needs of its HTTP/2 stream, whichever HTTP/2 implementation carries it. */
export interface UnaryStream {
  /** The stream is closed or reset: nothing can be sent. */
  gone(): boolean;
  /** A status with no message: a trailers-only response. */
  fail(code: number, details: string): void;
  /** The response headers, `parts` as DATA, then the OK trailers; `written` once written or dropped. */
  respond(parts: readonly Uint8Array[], written: () => void): void;
  /** A receive limit passed: DEADLINE_EXCEEDED with `details`, then RST_STREAM NO_ERROR (receive_timeout.ts). */
  timedOut(details: string): void;
}

/** A unary call on one of Node's HTTP/2 streams (grpc-js' sessions). */
class NodeUnaryStream implements UnaryStream {
  constructor(private readonly stream: ServerHttp2Stream) {}

  gone(): boolean {
    return this.stream.destroyed || this.stream.closed;
  }

  fail(code: number, details: string): void {
    try {
      this.stream.respond(trailersOnly(code, details), { endStream: true });
    } catch {
      // The stream ended meanwhile: there is no one to answer.
    }
  }

  respond(parts: readonly Uint8Array[], written: () => void): void {
    const stream = this.stream;
    try {
      if (respondInOneWrite(stream, RESPONSE_HEADERS, parts, OK_TRAILER_LIST, written)) return;
      stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
      stream.once('wantTrailers', () => {
        try {
          stream.sendTrailers(OK_TRAILERS);
        } catch {
          // Reset by the client after the last byte: nothing left to tell it.
        }
      });
      writeParts(stream, parts, written);
      stream.end();
    } catch {
      // The stream ended meanwhile.
    }
  }

  timedOut(details: string): void {
    endTimedOut(this.stream, details);
  }
}

/**
 * One call: reads the message into one allocation, runs it, answers it; every end is handled
 * once. Its transport feeds it the stream's bytes (`data`), the client's end (`end`) and the
 * stream's close or reset (`close`).
 */
export class UnaryInferCall {
  private readonly prefix = Buffer.allocUnsafe(5);
  private prefixGot = 0;
  private message: Buffer | undefined;
  private got = 0;
  /** Whether a message has been read whole (and what follows would be a second one). */
  private complete = false;
  /** The status (or the response) has gone out, or the stream is gone: nothing more is sent. */
  private answered = false;
  /** The core is working on the request: an end before its answer cancels it. */
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly cancellation = new Cancellation();
  /** The message's admission against the budget, until the run takes it over. */
  private ticket: BudgetTicket | undefined;
  private readonly clock: MessageClock | undefined;
  private readonly forwarded: Record<string, string> | undefined;

  constructor(
    private readonly stream: UnaryStream,
    headers: IncomingHttpHeaders,
    private readonly opts: UnaryInferOptions,
  ) {
    if (opts.limits) this.clock = new MessageClock(opts.limits, (details) => this.timedOut(details));
    const timeout = headers['grpc-timeout'];
    const m = typeof timeout === 'string' ? TIMEOUT.exec(timeout) : null;
    if (m) {
      const ms = Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!;
      // Beyond setTimeout's range (about 24.8 days) there is no deadline to keep.
      if (ms < 2 ** 31) this.timer = setTimeout(() => this.expire(), ms | 0);
    }
    const metadata = opts.refusal || opts.forward ? grpc.Metadata.fromHttp2Headers(headers) : undefined;
    this.forwarded = metadata && opts.forward?.(metadata);
    const details = metadata && opts.refusal?.(metadata);
    if (details !== undefined) this.fail(grpc.status.UNAVAILABLE, details);
  }

  data(chunk: Buffer): void {
    if (this.answered) return;
    let at = 0;
    while (at < chunk.byteLength) {
      if (this.message === undefined || this.complete) {
        const n = Math.min(5 - this.prefixGot, chunk.byteLength - at);
        chunk.copy(this.prefix, this.prefixGot, at, at + n);
        this.prefixGot += n;
        at += n;
        if (this.prefixGot < 5) break;
        this.prefixGot = 0;
        // The flag byte is not read: with identity encoding grpc-js takes a message as it is.
        const length = this.prefix.readUInt32BE(1);
        const max = this.opts.maxMessage;
        if (length > max) {
          this.fail(grpc.status.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs ${max})`);
          return;
        }
        if (this.message) {
          this.fail(grpc.status.UNIMPLEMENTED, `Received a second request message for server streaming method ${MODEL_INFER_PATH}`);
          return;
        }
        try {
          this.ticket = this.opts.budget?.admit(length);
        } catch (e) {
          const { code, details } = grpcFault(this.opts.log, MODEL_INFER_PATH, undefined, e);
          this.fail(code, details);
          return;
        }
        try {
          // Its own ArrayBuffer (not a slice of the pool): it can be handed over whole.
          this.message = Buffer.allocUnsafeSlow(length);
        } catch (e) {
          // Out of memory: the call is refused, as grpc-js refuses a message it cannot join.
          this.fail(grpc.status.RESOURCE_EXHAUSTED, e instanceof Error ? e.message : String(e));
          return;
        }
        this.complete = length === 0;
      } else {
        const n = Math.min(this.message.byteLength - this.got, chunk.byteLength - at);
        chunk.copy(this.message, this.got, at, at + n);
        this.got += n;
        at += n;
        this.complete = this.got === this.message.byteLength;
      }
    }
    if (!this.clock) return;
    if (this.prefixGot > 0) this.clock.progress(this.prefixGot, undefined);
    else if (this.message && !this.complete) this.clock.progress(this.got, this.message.byteLength);
    else this.clock.stop();
  }

  /** A receive limit passed: the message is dropped, and the stream ended (receive_timeout.ts). */
  private timedOut(details: string): void {
    if (this.answered) return;
    this.finish();
    this.stream.timedOut(details);
  }

  end(): void {
    if (this.answered) return;
    const message = this.message;
    if (!message || !this.complete) {
      this.fail(grpc.status.UNIMPLEMENTED, `Received no request message for server streaming method ${MODEL_INFER_PATH}`);
      return;
    }
    this.message = undefined;
    const r = readInferRequest(message);
    this.running = true;
    // Nothing here reads the request's tensors once the core has it: its memory may be taken over.
    const call: ModelInferCall = { cancellation: this.cancellation, ownMemory: message.buffer as ArrayBuffer, ticket: this.ticket };
    if (this.forwarded) call.forwarded = this.forwarded;
    this.ticket = undefined;
    this.opts.run(r, call, writeInferResponseParts).then(
      (out) => {
        this.running = false;
        this.respond(out.parts, out.size);
      },
      (e: unknown) => {
        this.running = false;
        const { code, details } = grpcFault(this.opts.log, MODEL_INFER_PATH, r.id, e);
        this.fail(code, details);
      },
    );
  }

  private expire(): void {
    this.timer = undefined;
    this.fail(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded');
  }

  close(): void {
    // Reset or closed by the client before the answer (or after a deadline): the request is dropped.
    this.finish();
  }

  /** No more is sent or read for this call; a request the core still works on is cancelled. */
  private finish(): void {
    this.answered = true;
    // A message not handed to the core (incomplete, or refused) is nobody's: its memory goes at
    // once rather than at the next collection, which an idle server may not run for long.
    if (this.message) freeNow(this.message.buffer);
    this.message = undefined;
    this.clock?.stop();
    this.ticket?.release(); // admitted but never run
    this.ticket = undefined;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running) this.cancellation.cancel();
  }

  /** A status with no message: a trailers-only response, as grpc-js sends it. */
  private fail(code: number, details: string): void {
    if (this.answered) return;
    this.finish();
    if (!this.stream.gone()) this.stream.fail(code, details);
  }

  private respond(parts: Uint8Array[], size: number): void {
    if (this.answered) return;
    const max = this.opts.maxMessage;
    if (size > max) {
      this.fail(grpc.status.RESOURCE_EXHAUSTED, `Sent message larger than max (${size + 5} vs. ${max})`);
      return;
    }
    this.finish();
    // Memory that was the response's alone goes once the last part is written (or dropped
    // with the stream), not at some later full collection.
    if (!this.stream.gone()) this.stream.respond(parts, () => freeSent(parts));
  }
}
