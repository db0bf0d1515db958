// gRPC ModelStreamInfer: any number of ModelInferRequests on one bidirectional stream, each
// answered in-band by a ModelStreamInferResponse carrying the request's id; a failed request gets
// `error_message` and the stream goes on. Requests take the unary path: the same codec, then
// core.infer (scheduler, dynamic batcher), several in flight at once.
// A client that opens the stream with the header `triton_grpc_error: true` gets Triton's other
// mode instead: the first request the core fails ends the stream with that error's status.
import type * as grpc from '@grpc/grpc-js';
import type { CoreApi } from '../../core/api.js';
import type { BudgetTicket, ByteBudget } from '../../kernel/byte_budget.js';
import { Cancellation } from '../../kernel/cancel.js';
import { asServalError, grpcStatus, isServerFault, ServalError } from '../../kernel/errors.js';
import type { Logger } from '../../kernel/log.js';
import type { RequestTrace } from '../../kernel/trace.js';
import type { InferRequest, InferResponse } from '../../kernel/types.js';
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

/**
 * Where the responses of one request go. A model that is not decoupled answers exactly once,
 * final. A decoupled model (not served yet) would call `response` any number of times, the last
 * with `final`, or end with no response at all, which becomes an empty final response when the
 * request set `triton_enable_empty_final_response` (see `StreamRequest.emptyFinal`).
 */
export interface ResponseSink {
  response(res: InferResponse, final: boolean): void;
  /**
   * The request failed; nothing follows. `admitted`: it failed after the core took it in
   * (InferRequest.admitted), not as a refusal of the request as issued (unreadable, unknown model,
   * invalid inputs, a full queue), which Triton answers in-band in either mode.
   */
  error(e: unknown, admitted?: boolean): void;
}

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

/** A successful response as Triton streams it: every one carries triton_final_response. */
function okMessage(res: InferResponse, final: boolean): Buffer {
  const infer_response = encodeGrpcInfer(res);
  infer_response.parameters = { ...infer_response.parameters, [FINAL_RESPONSE_PARAM]: { bool_param: final } };
  return writeStreamResponse({ error_message: '', infer_response });
}

/** A failed request: Triton clears infer_response and puts back only the id, so the client knows which one failed. */
function errorMessage(id: string, message: string): Buffer {
  return writeStreamResponse({ error_message: message, infer_response: { id } });
}

/** A request's place in the stream's response order; `trace` when the trace extension sampled it. */
interface Slot {
  message: Buffer | undefined;
  trace: RequestTrace | undefined;
}

const now = (): bigint => process.hrtime.bigint();

/** One open stream. */
class InferStream {
  /**
   * Responses of non-decoupled requests leave in the order the requests arrived, as Triton
   * writes them: a slot per request, written once it and every slot before it are filled.
   */
  private readonly order: Slot[] = [];
  /** Requests the core holds, cancelled together when the client goes away. */
  private readonly inflight = new Set<Cancellation>();
  private readEnded = false;
  private draining = false;
  private closed = false;
  /** The client opened the stream with `triton_grpc_error: true`. */
  private readonly grpcErrors: boolean;

  constructor(
    private readonly call: StreamInferCall,
    private readonly core: CoreApi,
    private readonly log: Logger,
    private readonly onClosed: (s: InferStream) => void,
    private readonly budget?: ByteBudget,
  ) {
    // Read once, when the stream opens, as Triton does.
    this.grpcErrors = call.metadata.get(GRPC_ERROR_HEADER)[0] === 'true';
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
    const id = msg.id ?? '';
    const trace = grpcInferTrace(this.core, msg.model_name);
    const sink = this.orderedSink(id, trace);
    let decoded: StreamRequest;
    try {
      decoded = decodeStreamRequest(msg);
    } catch (e) {
      sink.error(e);
      return;
    }
    const { req } = decoded;
    // Each request of the stream holds its tensors' bytes against the in-flight budget until answered.
    let ticket: BudgetTicket | undefined;
    try {
      let held = 0;
      for (const raw of msg.raw_input_contents ?? []) held += raw.byteLength;
      ticket = this.budget?.admit(held);
    } catch (e) {
      sink.error(e);
      return;
    }
    const cancellation = new Cancellation();
    req.cancellation = cancellation;
    if (trace) req.trace = trace;
    // Whether the core took the request in before it failed (see ResponseSink.error).
    let admitted = false;
    req.admitted = () => {
      admitted = true;
    };
    let result: Promise<InferResponse>;
    try {
      result = this.core.infer(req);
    } catch (e) {
      // A CoreApi may throw rather than reject; either way it is this request's answer.
      ticket?.release();
      sink.error(e, admitted);
      return;
    }
    this.inflight.add(cancellation);
    result.then(
      (res) => {
        this.inflight.delete(cancellation);
        ticket?.release();
        sink.response(res, true);
      },
      (e: unknown) => {
        this.inflight.delete(cancellation);
        ticket?.release();
        sink.error(e, admitted);
      },
    );
  }

  private orderedSink(id: string, trace: RequestTrace | undefined): ResponseSink {
    const slot: Slot = { message: undefined, trace };
    this.order.push(slot);
    return {
      response: (res, final) => {
        trace?.stamp('INFER_RESPONSE_COMPLETE', now());
        slot.message = okMessage(res, final);
        this.settled(slot);
      },
      error: (e, admitted = false) => {
        const err = asServalError(e);
        if (isServerFault(e)) {
          this.log.error('grpc request failed', {
            method: this.call.getPath(),
            request_id: id,
            error: e instanceof Error ? (e.stack ?? e.message) : String(e),
          });
        }
        if (admitted && this.grpcErrors && !this.closed) {
          slot.trace?.end();
          this.fail(err);
          return;
        }
        slot.message = errorMessage(id, err.message);
        this.settled(slot);
      },
    };
  }

  /** A request has its answer: written in turn, or, on a stream the client left, only its trace ends. */
  private settled(slot: Slot): void {
    if (this.closed) slot.trace?.end();
    else this.flush();
  }

  private flush(): void {
    if (this.closed) return;
    for (let next = this.order[0]; next?.message !== undefined; next = this.order[0]) {
      this.order.shift();
      next.trace?.stamp('GRPC_SEND_START', now());
      this.call.write(next.message);
      if (next.trace) {
        next.trace.stamp('GRPC_SEND_END', now());
        next.trace.end();
      }
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

  /** The client cancelled or the call failed: drop what is still queued; nothing more is written. */
  private abort(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClosed(this);
    // Answered but unsent responses are dropped; their traces still end (the rest end as they settle).
    for (const slot of this.order) if (slot.message) slot.trace?.end();
    this.order.length = 0;
    for (const c of this.inflight) c.cancel();
  }
}

export function streamInfer(core: CoreApi, log: Logger, budget?: ByteBudget): StreamInfer {
  const open = new Set<InferStream>();
  let draining = false;
  return {
    handler: (call) => {
      const s = new InferStream(call, core, log, (closed) => open.delete(closed), budget);
      open.add(s);
      if (draining) s.drain();
    },
    drain: () => {
      draining = true;
      for (const s of [...open]) s.drain();
    },
  };
}
