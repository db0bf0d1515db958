// gRPC ModelStreamInfer: any number of ModelInferRequests on one bidirectional stream, each
// answered in-band by ModelStreamInferResponses carrying the request's id; a failed request gets
// `error_message` and the stream goes on. Requests are decoded by the unary codec and go to
// core.inferStream (scheduler, dynamic batcher), several in flight at once. A model that is not
// decoupled answers each request once, in request order; a decoupled one answers zero or more
// times, written as the responses come (Triton's stream_infer_handler.cc).
// A client that opens the stream with the header `triton_grpc_error: true` gets Triton's other
// mode instead: the first request the core fails ends the stream with that error's status.
import type * as grpc from '@grpc/grpc-js';
import type { CoreApi } from '../../core/api.js';
import type { BudgetTicket, ByteBudget } from '../../kernel/byte_budget.js';
import { Cancellation } from '../../kernel/cancel.js';
import { IdTable } from '../../kernel/churn.js';
import { asServalError, grpcStatus, isServerFault, ServalError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/log.js';
import type { RequestTrace } from '../../kernel/trace.js';
import type { InferRequest, InferResponse } from '../../kernel/types.js';
import { addForwarded } from '../header_forward.js';
import { decodeGrpcInfer, encodeGrpcInfer, type GrpcInferRequest } from './infer_codec.js';
import { type WireInferRequest, writeStreamResponse } from './infer_wire.js';
import { grpcInferTrace } from './trace_logging.js';

/** Messages as infer_wire.ts reads them (never with wireError here); responses go out already encoded. */
export type StreamInferCall = grpc.ServerDuplexStream<WireInferRequest, Buffer>;

/** Triton's response parameter flagging the last response of a request. */
export const FINAL_RESPONSE_PARAM = 'triton_final_response';
/** Triton's request parameter asking for an empty final response (decoupled models). */
export const EMPTY_FINAL_PARAM = 'triton_enable_empty_final_response';
/**
 * Triton's stream-opening header: exactly `true` (Triton compares the string as is, so `True` or
 * `1` leave the default mode) makes errors end the stream with their gRPC status.
 */
export const GRPC_ERROR_HEADER = 'triton_grpc_error';

/** A request read off a stream, with the stream-only options Triton's front-end takes out of it. */
export interface StreamRequest {
  req: InferRequest;
  /** `triton_enable_empty_final_response`: only decoupled models ever send an empty final response. */
  emptyFinal: boolean;
}

export interface StreamInfer {
  /** The ModelStreamInfer method: a plain grpc-js duplex handler, so wrappers can guard it. */
  handler: grpc.handleBidiStreamingCall<WireInferRequest, Buffer>;
  /**
   * Shutdown: stop waiting for clients. Every open stream ends (status OK) as soon as the
   * responses of its in-flight requests are written, an idle one at once; otherwise an open
   * stream would hold grpc-js' tryShutdown until the client closed it.
   */
  drain(): void;
}

/** Decodes with the unary codec and takes out the stream-only parameter (Triton does not pass it on). */
export function decodeStreamRequest(msg: GrpcInferRequest): StreamRequest {
  const req = decodeGrpcInfer(msg);
  const v = req.parameters[EMPTY_FINAL_PARAM];
  if (v === undefined) return { req, emptyFinal: false };
  if (typeof v !== 'boolean') {
    throw ServalError.invalidArg(`invalid value type for '${EMPTY_FINAL_PARAM}' parameter, expected bool_param.`);
  }
  delete req.parameters[EMPTY_FINAL_PARAM];
  return { req, emptyFinal: v };
}

const finalParam = (final: boolean) => ({ [FINAL_RESPONSE_PARAM]: { bool_param: final } });

/** A successful response as Triton streams it: every one carries triton_final_response. */
function okMessage(res: InferResponse, final: boolean): Buffer {
  const infer_response = encodeGrpcInfer(res);
  infer_response.parameters = { ...infer_response.parameters, ...finalParam(final) };
  return writeStreamResponse({ error_message: '', infer_response });
}

/** What the request named: Triton copies these (as sent) into the responses it makes up itself. */
interface Named {
  id: string;
  model: string;
  version: string;
}

/**
 * A decoupled model's final flag sent alone, when the request asked for it: Triton sends an empty
 * response with the request's id, model name and version (as the request gave them), flagged final.
 */
function emptyFinalMessage(n: Named): Buffer {
  return writeStreamResponse({
    error_message: '',
    infer_response: { id: n.id, model_name: n.model, model_version: n.version, parameters: finalParam(true) },
  });
}

/**
 * A failed request. Refused before the core took it in (unreadable, unknown model, invalid inputs,
 * a full queue): Triton clears infer_response and puts back only the id. Failed after (the model's
 * error, a cancel, a timeout): Triton's response callback names the request as the empty final
 * response does, and flags whether more responses follow.
 */
function errorMessage(n: Named, message: string, admitted: boolean, final: boolean): Buffer {
  if (!admitted) return writeStreamResponse({ error_message: message, infer_response: { id: n.id } });
  return writeStreamResponse({
    error_message: message,
    infer_response: { id: n.id, model_name: n.model, model_version: n.version, parameters: finalParam(final) },
  });
}

/**
 * A request of a model that is not decoupled: its place in the stream's response order. Its
 * messages leave once every slot before it is done; `trace` when the trace extension sampled it.
 */
interface Slot {
  messages: Buffer[];
  done: boolean;
  trace: RequestTrace | undefined;
}

/** Where one request's answers go: in its slot (request order) or straight to the client (decoupled). */
interface Replies {
  /** A message to send; `final`: the request's last. */
  send(message: Buffer | undefined, final: boolean): void;
}

const now = (): bigint => process.hrtime.bigint();

/** One open stream. */
class InferStream {
  /**
   * Responses of non-decoupled requests leave in the order the requests arrived, as Triton
   * writes them: a slot per request, written once it and every slot before it are filled.
   */
  private readonly order: Slot[] = [];
  /** Requests the core holds (until their final answer), cancelled together when the client goes away. */
  private readonly inflight = new IdTable<Cancellation>();
  private lastId = 0;
  private readEnded = false;
  private draining = false;
  private closed = false;
  /** The client opened the stream with `triton_grpc_error: true`. */
  private readonly grpcErrors: boolean;
  /** The stream's metadata forwarded into every request's parameters (--grpc-header-forward-pattern). */
  private readonly forwarded: Record<string, string> | undefined;

  constructor(
    private readonly call: StreamInferCall,
    private readonly core: CoreApi,
    private readonly log: Logger,
    private readonly onClosed: (s: InferStream) => void,
    private readonly budget?: ByteBudget,
    forward?: (metadata: grpc.Metadata) => Record<string, string> | undefined,
  ) {
    // Read once, when the stream opens, as Triton does.
    this.grpcErrors = call.metadata.get(GRPC_ERROR_HEADER)[0] === 'true';
    this.forwarded = forward?.(call.metadata);
    call.on('data', (msg: WireInferRequest) => this.onRequest(msg));
    // Half-close: answer what is in flight, then end the stream.
    call.on('end', () => {
      this.readEnded = true;
      this.maybeEnd();
    });
    // grpc-js emits 'cancelled' after a normal end too; by then nothing is in flight.
    call.on('cancelled', () => this.abort());
    call.on('error', () => this.abort());
  }

  drain(): void {
    this.draining = true;
    this.maybeEnd();
  }

  private onRequest(msg: WireInferRequest): void {
    if (this.closed) return;
    const named: Named = { id: msg.id ?? '', model: msg.model_name ?? '', version: msg.model_version ?? '' };
    // Triton looks the model's transaction policy up first: a decoupled model's answers (its
    // refusals too) are written as they come, any other request's in request order.
    let decoupled = false;
    try {
      decoupled = this.core.isDecoupled(named.model, named.version);
    } catch {
      // An unknown model: the core refuses the request below, in-band, as any other refusal.
    }
    const trace = grpcInferTrace(this.core, named.model);
    const replies = decoupled ? this.direct(trace) : this.ordered(trace);
    let done = false;
    let ticket: BudgetTicket | undefined;
    // Whether the core took the request in before it failed (see errorMessage).
    let admitted = false;
    let responded = false;
    const id = ++this.lastId;
    const finish = (): void => {
      done = true;
      this.inflight.delete(id);
      ticket?.release();
    };
    const fail = (e: unknown, final: boolean): void => {
      if (done) return;
      if (final) finish();
      const err = asServalError(e);
      if (isServerFault(e)) {
        this.log.error('grpc request failed', {
          method: this.call.getPath(),
          request_id: named.id,
          error: e instanceof Error ? (e.stack ?? e.message) : String(e),
        });
      }
      if (admitted && this.grpcErrors && !this.closed) {
        trace?.end();
        this.fail(err);
        return;
      }
      replies.send(errorMessage(named, err.message, admitted, final), final);
    };

    let decoded: StreamRequest;
    try {
      decoded = decodeStreamRequest(msg);
    } catch (e) {
      fail(e, true);
      return;
    }
    const { req, emptyFinal } = decoded;
    addForwarded(req.parameters, this.forwarded);
    // Each request of the stream holds its tensors' bytes against the in-flight budget until its final answer.
    try {
      let held = 0;
      for (const raw of msg.raw_input_contents ?? []) held += raw.byteLength;
      ticket = this.budget?.admit(held);
    } catch (e) {
      fail(e, true);
      return;
    }
    const cancellation = new Cancellation();
    req.cancellation = cancellation;
    if (trace) req.trace = trace;
    req.admitted = () => {
      admitted = true;
    };
    this.inflight.set(id, cancellation);
    const first = (): void => {
      if (responded) return;
      responded = true;
      trace?.stamp('INFER_RESPONSE_COMPLETE', now());
    };
    try {
      this.core.inferStream(req, {
        response: (res, final) => {
          if (done) return;
          if (final) finish();
          // A request that has had a response was taken in, whether or not the core said so.
          admitted = true;
          first();
          if (res) replies.send(okMessage(res, final), final);
          // The final flag alone: an empty response only for a decoupled model's request that asked for one.
          else replies.send(final && decoupled && emptyFinal ? emptyFinalMessage(named) : undefined, final);
        },
        error: (e, final) => {
          if (done) return;
          // Triton stamps it on the first response callback; a refusal never reaches one.
          if (admitted) first();
          fail(e, final);
        },
      });
    } catch (e) {
      // The core answers through the sink; a CoreApi that throws still gets this request answered.
      fail(e, true);
    }
  }

  /** A non-decoupled request's replies: into its slot, written in request order. */
  private ordered(trace: RequestTrace | undefined): Replies {
    const slot: Slot = { messages: [], done: false, trace };
    this.order.push(slot);
    return {
      send: (message, final) => {
        if (message) slot.messages.push(message);
        slot.done ||= final;
        // On a stream the client left nothing is written; the trace still ends with the request.
        if (this.closed) {
          if (final) trace?.end();
        } else this.flush();
      },
    };
  }

  /** A decoupled request's replies: each written as it comes, as Triton writes them. */
  private direct(trace: RequestTrace | undefined): Replies {
    return {
      send: (message, final) => {
        if (message && !this.closed) this.write(message, trace);
        if (!final) return;
        trace?.end();
        this.maybeEnd();
      },
    };
  }

  private write(message: Buffer, trace: RequestTrace | undefined): void {
    trace?.stamp('GRPC_SEND_START', now());
    this.call.write(message);
    trace?.stamp('GRPC_SEND_END', now());
  }

  private flush(): void {
    if (this.closed) return;
    for (let head = this.order[0]; head; head = this.order[0]) {
      for (const m of head.messages.splice(0)) this.write(m, head.trace);
      if (!head.done) break;
      this.order.shift();
      head.trace?.end();
    }
    this.maybeEnd();
  }

  private maybeEnd(): void {
    if (this.closed || !(this.readEnded || this.draining)) return;
    if (this.inflight.size > 0 || this.order.length > 0) return;
    this.closed = true;
    this.onClosed(this);
    this.call.end();
  }

  /**
   * triton_grpc_error mode: the first failure ends the stream at once with its status, as Triton
   * finishes the call from the failed request's callback: responses not yet written (even ones
   * waiting behind an earlier request) are dropped, the requests still in the core are cancelled,
   * and requests read after it are not processed.
   */
  private fail(err: ServalError): void {
    this.abort();
    // grpc-js ends the call with an error's code and details (its own 'error' listener); ours
    // finds the stream already closed.
    this.call.emit('error', Object.assign(new Error(err.message), { code: grpcStatus(err.code), details: err.message }));
  }

  /**
   * The client cancelled or the call failed: drop what is still queued and cancel every request
   * the core still answers (decoupled ones mid-way too); nothing more is written. Each request
   * gives its budget back and ends its trace when its final answer comes.
   */
  private abort(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClosed(this);
    // Answered but unsent responses are dropped; their traces still end (the rest end as they settle).
    for (const slot of this.order) if (slot.done) slot.trace?.end();
    this.order.length = 0;
    for (const c of this.inflight.values()) c.cancel();
  }
}

export function streamInfer(
  core: CoreApi,
  log: Logger,
  budget?: ByteBudget,
  forward?: (metadata: grpc.Metadata) => Record<string, string> | undefined,
): StreamInfer {
  const open = new Set<InferStream>();
  let draining = false;
  return {
    handler: (call) => {
      const s = new InferStream(call, core, log, (closed) => open.delete(closed), budget, forward);
      open.add(s);
      if (draining) s.drain();
    },
    drain: () => {
      draining = true;
      for (const s of [...open]) s.drain();
    },
  };
}
