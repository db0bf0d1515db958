// One HTTP inference exchange without its transport: what the fastify routes and the lean
// connection path (fast_infer.ts) both run, so the two answer byte for byte alike. And the one
// place that turns an error into the HTTP answer a client sees.
import type { IncomingHttpHeaders } from 'node:http';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { CoreApi } from '../../core/api.js';
import type { Cancellation } from '../../kernel/cancel.js';
import { httpStatus, isServerFault, ServalError } from '../../kernel/errors.js';
import { encodeJson } from '../../kernel/json.js';
import type { Logger } from '../../kernel/log.js';
import { freeSent, wholeBuffer } from '../../kernel/memory.js';
import type { RequestTrace } from '../../kernel/trace.js';
import { addForwarded, forwardedHttpHeaders, type HeaderPattern } from '../header_forward.js';
import { BodyTimeoutError, decompress } from './body.js';
import { decodeInferRequest, encodeInferResponse } from './infer_codec.js';

const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);

/** Responses at least this big go out as their chunks (JSON header, tensors) instead of one joined copy. */
export const STREAM_RESPONSE_BYTES = 1 << 20;
const EMPTY = new Uint8Array(0);

/** Picks gzip or deflate when the client accepts it (tritonclient's response compression). */
export function acceptedEncoding(header: string | string[] | undefined): 'gzip' | 'deflate' | undefined {
  if (header === undefined) return undefined;
  const accepted = new Map<string, number>();
  for (const part of String(header).toLowerCase().split(',')) {
    const [coding, ...params] = part.split(';').map((s) => s.trim());
    if (!coding) continue;
    const q = params.find((p) => p.startsWith('q='));
    accepted.set(coding, q ? Number(q.slice(2)) || 0 : 1);
  }
  const gz = accepted.get('gzip') ?? 0;
  const df = accepted.get('deflate') ?? 0;
  if (gz > 0 && gz >= df) return 'gzip';
  if (df > 0) return 'deflate';
  return undefined;
}

export interface InferExchange {
  model: string;
  version: string;
  headers: IncomingHttpHeaders;
  /** Name, value, name, value… as received (for --http-header-forward-pattern). */
  rawHeaders: readonly string[];
  body: Buffer;
  cancellation: Cancellation;
  trace?: RequestTrace;
  /** Told the request's `id` (for the log line of a fault). */
  onId?(id: string): void;
}

/** The answer: headers in the order they are written, and the body's parts. */
export interface InferAnswer {
  headers: Array<[string, string | number]>;
  /** One part, or the JSON header and each tensor of a large binary response (`streamed`). */
  parts: Buffer[];
  total: number;
  streamed: boolean;
  /** Memory that was the response's alone: freed once its parts are written (`freeSent`). */
  sent: Uint8Array[];
}

export interface InferExchangeOptions {
  maxInputSize: number;
  forwardPattern?: HeaderPattern;
}

/** Decodes, infers, encodes. Throws what the error answer reports. */
export async function answerInfer(core: CoreApi, opts: InferExchangeOptions, ex: InferExchange): Promise<InferAnswer> {
  // Triton's refusal (CheckTransactionPolicy), before the body is decoded: many responses have no place in one HTTP reply.
  if (core.isDecoupled(ex.model, ex.version)) {
    throw ServalError.unsupported("HTTP end point doesn't support models with decoupled transaction policy");
  }
  // No Content-Encoding (the usual case): no await, so no turn through the microtask queue for it.
  let raw: Buffer | undefined =
    ex.headers['content-encoding'] === undefined ? ex.body : await decompress(ex.headers, ex.body, opts.maxInputSize);
  const hdr = ex.headers['inference-header-content-length'];
  const headerLength = hdr === undefined ? undefined : Number(hdr);
  const decoded = decodeInferRequest(raw, headerLength, ex.model, ex.version);
  addForwarded(decoded.request.parameters, forwardedHttpHeaders(opts.forwardPattern, ex.rawHeaders as string[]));
  decoded.request.cancellation = ex.cancellation;
  if (ex.trace) decoded.request.trace = ex.trace;
  // The body is this request's alone and nothing below reads it once answered: its binary
  // tensors may be handed to the model's worker as they are.
  const own = wholeBuffer(raw);
  if (own) decoded.request.ownMemory = own;
  if (decoded.request.id) ex.onId?.(decoded.request.id);
  const result = await core.infer(decoded.request);
  // Answered: the tensors viewing the body are let go before the response is encoded, so a
  // large request's memory can be freed meanwhile (the caller drops its own reference).
  raw = undefined;
  for (const inp of decoded.request.inputs) inp.data = EMPTY;
  ex.trace?.stamp('INFER_RESPONSE_COMPLETE', process.hrtime.bigint());
  const encoded = encodeInferResponse(result, decoded);
  let total = 0;
  for (const c of encoded.chunks) total += c.byteLength;
  const enc = acceptedEncoding(ex.headers['accept-encoding']);
  // A large binary response goes out chunk by chunk: joining them would copy every tensor once more.
  const streamed = !enc && encoded.chunks.length > 1 && total >= STREAM_RESPONSE_BYTES;
  const view = (c: Uint8Array): Buffer => Buffer.from(c.buffer, c.byteOffset, c.byteLength);
  let parts = streamed || encoded.chunks.length === 1 ? encoded.chunks.map(view) : [Buffer.concat(encoded.chunks, total)];
  // Memory that was the response's alone goes once its bytes are out: at once when they were
  // copied into the body, else when the last part has been written.
  let sent = result.outputs.map((o) => o.data);
  if (!streamed) {
    freeSent(sent);
    sent = [];
  }
  const headers: InferAnswer['headers'] =
    encoded.headerLength !== undefined
      ? [
          ['inference-header-content-length', encoded.headerLength],
          ['content-type', 'application/octet-stream'],
        ]
      : [['content-type', 'application/json']];
  if (enc) {
    const body = parts[0]!;
    parts = [enc === 'gzip' ? await gzip(body) : await deflate(body)];
    total = parts[0]!.byteLength;
    headers.push(['content-encoding', enc]);
  }
  return { headers, parts, total, streamed, sent };
}

export interface ErrorAnswer {
  status: number;
  contentType: string;
  body: Buffer;
  /** The rest of the request may still come: the connection cannot carry another one. */
  close: boolean;
}

export interface FaultContext {
  requestId: string;
  inferenceId?: string;
  method: string;
  url: string;
}

/**
 * The one error path of the HTTP front end: ServalErrors map through the status table, fastify's
 * own errors (body too large, aborted upload) keep their status, anything else is a 500. Server
 * faults (INTERNAL, unexpected errors) are logged with the request id; refusals such as a full
 * queue (503) are the client's answer, not a fault, and stay out of the log.
 */
export function errorAnswer(err: Error & { statusCode?: number }, log: Logger, at: FaultContext): ErrorAnswer {
  let status: number;
  if (err instanceof ServalError) status = httpStatus(err.code);
  else status = err.statusCode && err.statusCode >= 400 ? err.statusCode : 500;
  if (status >= 500 && isServerFault(err)) {
    log.error('http request failed', {
      request_id: at.requestId,
      inference_id: at.inferenceId || undefined,
      method: at.method,
      url: at.url,
      status,
      error: err.stack ?? err.message,
    });
  }
  return {
    status,
    // Triton's types, byte for byte: its infer handler answers errors as text/plain (a JSON body
    // all the same), every other route as application/json; a Buffer keeps fastify from adding
    // "; charset=utf-8" (observed on tritonserver 2.51: docs/reference/README.md).
    contentType: at.url.endsWith('/infer') ? 'text/plain' : 'application/json',
    body: Buffer.from(encodeJson({ error: err.message })),
    close: err instanceof BodyTimeoutError,
  };
}
