// HTTP request bodies: read into one Buffer with --http-max-input-size as the limit, and inflated
// (Content-Encoding gzip or deflate) with the same limit, as Triton applies it to the
// decompressed data too. Over the limit is Triton's 400 INVALID_ARG with its texts.
import { constants as bufferConstants } from 'node:buffer';
import type { IncomingHttpHeaders } from 'node:http';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { BudgetTicket } from '../../kernel/byte_budget.js';
import { ServalError } from '../../kernel/errors.js';

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);

const advice = 'Use --http-max-input-size to increase the limit.';

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

/**
 * Reads a request body into one Buffer: straight into a buffer of Content-Length bytes when the
 * header gives it (no list of chunks to join: the body is held once), else collected and joined.
 * An oversized body — or one the in-flight byte budget refuses (`budget`: admits the body's
 * bytes, before any is kept when Content-Length gives them) — is still read to its end, and
 * discarded, before the error goes out: a client that is still sending would otherwise see a
 * broken pipe instead of the error. Past a generous cap the connection is dropped.
 */
export function readBody(
  stream: NodeJS.ReadableStream & { destroy(): void },
  headers: IncomingHttpHeaders,
  limit: number,
  done: (err: Error | null, body?: Buffer) => void,
  budget?: (bytes: number) => BudgetTicket,
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
  let finished = false;
  const finish = (err: Error | null, body?: Buffer): void => {
    if (finished) return;
    finished = true;
    if (err) ticket?.release();
    done(err, body);
  };
  const discard = (): void => {
    whole = undefined;
    chunks = undefined;
  };
  stream.on('data', (chunk: Buffer) => {
    const start = size;
    size += chunk.byteLength;
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
    throw ServalError.invalidArg(`failed to parse the request JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw ServalError.invalidArg('the request JSON must be an object');
  return doc as Record<string, unknown>;
}
