// --http-header-forward-pattern / --grpc-header-forward-pattern: request headers (gRPC metadata)
// whose name matches become string request parameters the model sees, as Triton forwards them.
// Triton matches with RE2 case-insensitively, anywhere in the name (`my_header.*` also takes
// `x-my_header`); a pattern that starts with `(?-i)` is case-sensitive (Triton's own test uses it).
import type * as grpc from '@grpc/grpc-js';

export type HeaderPattern = RegExp | undefined;

/** The pattern of `flag`, or undefined for '' (nothing forwarded); throws naming the flag when it does not compile. */
export function headerPattern(source: string, flag: string): HeaderPattern {
  if (source === '') return undefined;
  // JavaScript (Node 20) has no inline flags: the leading ones RE2 users write are read here.
  let flags = 'i';
  let body = source;
  const inline = /^\(\?(-?)i\)/.exec(source);
  if (inline) {
    flags = inline[1] === '-' ? '' : 'i';
    body = source.slice(inline[0].length);
  }
  try {
    return new RegExp(body, flags);
  } catch (e) {
    throw new Error(`--${flag}: invalid regular expression '${source}': ${(e as Error).message}`);
  }
}

/**
 * HTTP: every header whose name matches, with the name as the client sent it (Node's rawHeaders
 * keep its case; Triton's HTTP server does too), in arrival order; a repeated header's last value.
 */
export function forwardedHttpHeaders(pattern: HeaderPattern, rawHeaders: readonly string[]): Record<string, string> | undefined {
  if (!pattern) return undefined;
  const out: Record<string, string> = {};
  let any = false;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (!pattern.test(name)) continue;
    out[name] = rawHeaders[i + 1]!;
    any = true;
  }
  return any ? out : undefined;
}

/**
 * What gRPC's server hands Triton as the client's metadata: not the HTTP/2 pseudo-headers,
 * content-type, te or the grpc-* transport headers (user-agent is there).
 */
function isTransportHeader(key: string): boolean {
  return key.startsWith(':') || key.startsWith('grpc-') || key === 'content-type' || key === 'te';
}

/** gRPC: every metadata key (lower case, as gRPC sends them) that matches; `-bin` values as their bytes' text. */
export function forwardedMetadata(pattern: HeaderPattern, metadata: grpc.Metadata): Record<string, string> | undefined {
  if (!pattern) return undefined;
  const out: Record<string, string> = {};
  let any = false;
  for (const [key, value] of Object.entries(metadata.getMap())) {
    if (isTransportHeader(key) || !pattern.test(key)) continue;
    out[key] = typeof value === 'string' ? value : value.toString('utf8');
    any = true;
  }
  return any ? out : undefined;
}

/** Request parameters the server reads as the request's fields (model/validate.ts, sequence_params.ts). */
const FIELD_PARAMETERS = new Set(['priority', 'timeout', 'sequence_id', 'sequence_start', 'sequence_end']);

/**
 * Adds forwarded headers to a request's parameters. Triton adds them after reading the request's
 * fields, so a header can neither replace a parameter the request carries nor set its priority,
 * timeout or sequence: such headers are left out here.
 */
export function addForwarded(params: Record<string, unknown>, forwarded: Record<string, string> | undefined): void {
  if (!forwarded) return;
  for (const [k, v] of Object.entries(forwarded)) {
    if (!(k in params) && !FIELD_PARAMETERS.has(k)) params[k] = v;
  }
}
