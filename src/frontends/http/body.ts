// HTTP request bodies: read into one Buffer with --http-max-input-size as the limit, and inflated
// (Content-Encoding gzip or deflate) with the same limit, as Triton applies it to the
// decompressed data too. Over the limit is Triton's 400 INVALID_ARG with its texts. A body that
// stalls is timed out (--http-body-idle-timeout-secs, --http-body-timeout-secs): 408, and what
// was buffered and admitted is let go.
import { constants as bufferConstants } from 'node:buffer';
import type { IncomingHttpHeaders } from 'node:http';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { BudgetTicket } from '../../kernel/byte_budget.js';
import { ServalError } from '../../kernel/errors.js';
import { freeNow, wholeBuffer } from '../../kernel/memory.js';

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);

const advice = 'Use --http-max-input-size to increase the limit.';

/**
 * Triton's cap on the non-empty chunks of a `Transfer-Encoding: chunked` body (http_server.cc,
 * kMaxChunkedChunks): many tiny chunks cost memory per chunk, whatever the byte limit.
 */
export const MAX_CHUNKS = 1 << 16;
const tooManyChunks = (): ServalError =>
  ServalError.invalidArg(`Chunked request body exceeds maximum of ${MAX_CHUNKS} non-empty chunks. Send fewer or larger HTTP chunks.`);

/**
 * Triton's text for a body of `size` bytes over `limit`, by the kind of request the headers say
 * it is: a raw binary request (Inference-Header-Content-Length: 0) or a JSON one (no header).
 * A binary-extension body has no single text in Triton (it checks the JSON part and each input);
 * Serval limits the whole body and says so.
 */
function tooLarge(headers: IncomingHttpHeaders, size: number, limit: number): ServalError {
  const headerLength = headers['inference-header-content-length'];
  const max = `exceeds the maximum allowed value of ${limit} bytes. ${advice}`;
  if (headerLength === undefined) return ServalError.invalidArg(`Request JSON size of ${size} bytes ${max}`);
  if (String(headerLength).trim() === '0') return ServalError.invalidArg(`Raw input has a byte_size (${size} bytes) that ${max}`);
  return ServalError.invalidArg(`Request body size of ${size} bytes ${max}`);
}

/** How long a body may take: between two of its bytes, and in all (ms; 0 = no limit). */
export interface BodyTimeouts {
  idleMs: number;
  totalMs: number;
}

/**
 * A body that stalled: not a Triton status (Triton has no body timeout), so it is answered like
 * the transport errors fastify raises: HTTP 408 with the JSON error, then the connection closed
 * (its unread rest would otherwise be taken for the next request).
 */
export class BodyTimeoutError extends Error {
  readonly statusCode = 408;
}

/**
 * Reads a request body into one Buffer: straight into a buffer of Content-Length bytes when the
 * header gives it (no list of chunks to join: the body is held once), else collected and joined.
 * An oversized body — or one the in-flight byte budget refuses (`budget`: admits the body's
 * bytes, before any is kept when Content-Length gives them) — is still read to its end, and
 * discarded, before the error goes out: a client that is still sending would otherwise see a
 * broken pipe instead of the error. Past a generous cap the connection is dropped. A body that
 * stalls past `timeouts`, or whose connection ends before it does, fails at once: its buffer is
 * freed and its admission released then, not when the socket finally goes.
 */
export function readBody(
  stream: NodeJS.ReadableStream & { destroy(): void },
  headers: IncomingHttpHeaders,
  limit: number,
  done: (err: Error | null, body?: Buffer) => void,
  budget?: (bytes: number) => BudgetTicket,
  timeouts?: BodyTimeouts,
): void {
  const declared = headers['content-length'] === undefined ? Number.NaN : Number(headers['content-length']);
  const known = Number.isSafeInteger(declared) && declared >= 0 && declared <= limit;
  let refused: Error | undefined;
  let ticket: BudgetTicket | undefined;
  try {
    ticket = budget?.(known ? declared : 0);
  } catch (e) {
    refused = e as Error;
  }
  let whole = known && !refused ? Buffer.allocUnsafe(declared) : undefined;
  let chunks: Buffer[] | undefined = whole || refused ? undefined : [];
  let size = 0;
  // Node's HTTP parser hands each chunk's data on as (at least) one piece: pieces are counted.
  const chunked = /\bchunked\b/i.test(String(headers['transfer-encoding'] ?? ''));
  let pieces = 0;
  let finished = false;
  let idle: NodeJS.Timeout | undefined;
  let total: NodeJS.Timeout | undefined;
  const discard = (): void => {
    // A large Content-Length buffer is this body's own memory (a small one shares Buffer's
    // pool): given back now, not at the next collection.
    const own = whole && wholeBuffer(whole);
    if (own) freeNow(own);
    whole = undefined;
    chunks = undefined;
  };
  const finish = (err: Error | null, body?: Buffer): void => {
    if (finished) return;
    finished = true;
    clearTimeout(idle);
    clearTimeout(total);
    if (err) {
      discard();
      ticket?.release();
    }
    done(err, body);
  };
  const received = (): string =>
    `${size} of ${Number.isSafeInteger(declared) ? `${declared} (Content-Length)` : 'an unknown number of'} bytes received`;
  const timeout = (text: string): void => {
    finish(new BodyTimeoutError(`request body timed out: ${text}; ${received()}`));
  };
  if (timeouts && timeouts.idleMs > 0) {
    const secs = timeouts.idleMs / 1000;
    idle = setTimeout(() => timeout(`no data for ${secs} s (--http-body-idle-timeout-secs)`), timeouts.idleMs).unref();
  }
  if (timeouts && timeouts.totalMs > 0) {
    const secs = timeouts.totalMs / 1000;
    total = setTimeout(() => timeout(`not complete after ${secs} s (--http-body-timeout-secs)`), timeouts.totalMs).unref();
  }
  stream.on('data', (chunk: Buffer) => {
    if (finished) return;
    idle?.refresh();
    const start = size;
    size += chunk.byteLength;
    if (chunked && chunk.byteLength > 0 && ++pieces > MAX_CHUNKS && !refused) {
      // Refused; the rest is read and dropped, as an oversized body's is.
      refused = tooManyChunks();
      discard();
    }
    if (size > limit) discard();
    else if (whole) {
      if (size <= whole.byteLength) chunk.copy(whole, start);
      else {
        // More than Content-Length said (the HTTP parser does not allow it): keep it anyway.
        chunks = [whole.subarray(0, start), chunk];
        whole = undefined;
      }
    } else if (chunks) {
      try {
        ticket?.grow(chunk.byteLength);
        chunks.push(chunk);
      } catch (e) {
        refused = e as Error;
        discard();
      }
    }
    if (size > 4 * limit + 64 * 1024 * 1024) {
      stream.destroy();
      finish(tooLarge(headers, size, limit));
    }
  });
  stream.on('end', () => {
    if (size > limit) return finish(tooLarge(headers, size, limit));
    if (refused) return finish(refused);
    if (whole) return finish(null, size === whole.byteLength ? whole : whole.subarray(0, size));
    finish(null, Buffer.concat(chunks ?? [], size));
  });
  stream.on('error', (e: Error) => finish(Object.assign(e, { statusCode: 400 })));
  // A connection that ends mid-body may close the stream without an error first. Every request
  // closes, so the error (whose stack costs ~4% of an HTTP infer's main-thread time) is made only then.
  stream.on('close', () => {
    if (!finished) finish(Object.assign(new Error('the connection closed before the request body was complete'), { statusCode: 400 }));
  });
}

/**
 * Inflates a gzip or deflate body (Content-Encoding), refusing one that inflates past `limit`:
 * zlib stops as soon as its output passes the limit, so a small "bomb" costs at most `limit`
 * bytes of memory and the time to produce them, never its full inflated size.
 */
export async function decompress(headers: IncomingHttpHeaders, body: Buffer, limit: number): Promise<Buffer> {
  const enc = String(headers['content-encoding'] ?? '')
    .trim()
    .toLowerCase();
  if (!enc || enc === 'identity') return body;
  if (enc !== 'gzip' && enc !== 'deflate') throw ServalError.unsupported(`unsupported Content-Encoding '${enc}'; supported: gzip, deflate`);
  const over = (): ServalError =>
    ServalError.invalidArg(`Decompressed request body exceeds the maximum allowed value of ${limit} bytes. ${advice}`);
  let out: Buffer;
  try {
    // zlib takes 1 ≤ maxOutputLength ≤ the largest Buffer.
    const maxOutputLength = Math.min(Math.max(limit, 1), bufferConstants.MAX_LENGTH);
    out = await (enc === 'gzip' ? gunzip : inflate)(body, { maxOutputLength });
  } catch (e) {
    if ((e as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') throw over();
    throw ServalError.invalidArg(`failed to decompress the request body (Content-Encoding: ${enc}): ${(e as Error).message}`);
  }
  if (out.byteLength > limit) throw over();
  return out;
}

/** A JSON-object request body (repository, trace and logging extensions), decompressed first; empty = {}. */
export async function jsonObjectBody(
  headers: IncomingHttpHeaders,
  body: Buffer | undefined,
  limit: number,
): Promise<Record<string, unknown>> {
  const raw = await decompress(headers, body ?? Buffer.alloc(0), limit);
  if (raw.byteLength === 0) return {};
  let doc: unknown;
  try {
    doc = JSON.parse(raw.toString('utf8'));
  } catch (e) {
    throw ServalError.malformed(`failed to parse the request JSON buffer: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw ServalError.invalidArg('the request JSON must be an object');
  return doc as Record<string, unknown>;
}
