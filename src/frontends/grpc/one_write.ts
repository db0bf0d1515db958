// A unary response in one socket write. Node's http2 sends a response's trailers at least one
// turn of the event loop after its data: a stream that will have trailers shuts its writable
// side only once its writes have completed, and sendTrailers() defers to setImmediate. The client
// gets the headers and data in one write and the trailers (grpc-status) in a second, and the call
// ends only with the second. Here, where this Node's stream internals are the ones this was
// written against (Node 20), the stream is shut down as soon as its data is queued, and the
// trailers are submitted from within nghttp2's own request for them, so headers, data and
// trailers leave together. Anywhere else the caller takes Node's public path.
//
// Shut that early, the stream is closed and destroyed before Node hears that its data was
// written, and Node's writable then builds an ERR_STREAM_DESTROYED (stack trace included) for
// the stream's end callbacks, which have nothing to tell: 5% of the main thread at 16 clients.
// The writable side is marked settled instead (its `errored` value, what Node hands those
// callbacks in place of a new error); nothing reads it, and the stream ends as before.
import type { ServerHttp2Stream } from 'node:http2';

interface Internals {
  handle: symbol;
  state: symbol;
}

/** What a one-write stream's end callbacks get (see above): it has no stack, and is built once. */
const SETTLED: Error = Object.assign(Object.create(Error.prototype) as Error, {
  name: 'Error',
  message: 'the unary response was written whole; the stream is done',
});

interface NativeStream {
  trailers(list: [string, number]): number;
  shutdown(req: object): number;
}

type ShutdownWrapClass = new () => { oncomplete?: () => void; handle?: unknown; callback?: () => void };

/** STREAM_FLAGS_HAS_TRAILERS of lib/internal/http2/core.js: a stream that waits for trailers. */
const HAS_TRAILERS = 0x20;

let probed = false;
let internals: Internals | undefined;
let ShutdownWrap: ShutdownWrapClass | undefined;

function probe(stream: ServerHttp2Stream): Internals | undefined {
  probed = true;
  if (process.versions.node.split('.')[0] !== '20') return undefined;
  try {
    const binding = (process as unknown as { binding(name: string): { ShutdownWrap?: ShutdownWrapClass } }).binding('stream_wrap');
    const syms = Object.getOwnPropertySymbols(stream);
    const handle = syms.find((s) => s.description === 'kHandle');
    const state = syms.find((s) => s.description === 'state');
    if (!binding.ShutdownWrap || !handle || !state) return undefined;
    const native = (stream as unknown as Record<symbol, Partial<NativeStream>>)[handle];
    const flags = (stream as unknown as Record<symbol, { flags?: unknown }>)[state]?.flags;
    if (typeof native?.trailers !== 'function' || typeof native.shutdown !== 'function' || typeof flags !== 'number') return undefined;
    const writable = (stream as unknown as { _writableState?: object })._writableState;
    if (!writable || typeof Object.getOwnPropertyDescriptor(Object.getPrototypeOf(writable), 'errored')?.set !== 'function')
      return undefined;
    ShutdownWrap = binding.ShutdownWrap;
    return { handle, state };
  } catch {
    return undefined;
  }
}

/** Writes `parts` as one corked batch (large ones from their own memory); `written` runs after the last. */
export function writeParts(stream: ServerHttp2Stream, parts: readonly Uint8Array[], written: () => void): void {
  stream.cork();
  const last = parts.length - 1;
  for (let i = 0; i < last; i++) stream.write(parts[i]);
  stream.write(parts[last], written);
  stream.uncork();
}

/** Trailers as Node's native stream takes them (mapToHeaders' output): name, value, index flags. */
export function nativeHeaderList(headers: Record<string, string | number>): [string, number] {
  const entries = Object.entries(headers);
  return [entries.map(([k, v]) => `${k}\0${v}\0\0`).join(''), entries.length];
}

/**
 * Responds on `stream` with `headers`, `parts` and the trailers `trailerList` (nativeHeaderList)
 * in one write; `written` runs when the parts have been written (or dropped with the stream).
 * False, having done nothing, where Node's internals are not as expected.
 */
export function respondInOneWrite(
  stream: ServerHttp2Stream,
  headers: Record<string, string | number>,
  parts: readonly Uint8Array[],
  trailerList: [string, number],
  written: () => void,
): boolean {
  if (!probed) internals = probe(stream);
  const k = internals;
  if (!k || !ShutdownWrap || parts.length === 0) return false;
  const native = (stream as unknown as Record<symbol, NativeStream | undefined>)[k.handle];
  const state = (stream as unknown as Record<symbol, { flags: number; shutdownWritableCalled?: boolean } | undefined>)[k.state];
  if (!native || !state) return false;
  stream.respond(headers, { waitForTrailers: true });
  // nghttp2 asks for the trailers while it packs the last DATA frame: submitted there, they go in
  // the same write (what Node's own sendTrailers would do a turn later, flags included).
  stream.once('wantTrailers', () => {
    state.flags &= ~HAS_TRAILERS;
    try {
      native.trailers(trailerList);
    } catch {
      // Reset by the client after the last byte: nothing left to tell it.
    }
  });
  writeParts(stream, parts, written);
  // Shut the writable side now, as Node does for a stream without trailers; Node's own shutdown
  // at end() then sees it done.
  state.shutdownWritableCalled = true;
  const req = new ShutdownWrap();
  req.oncomplete = () => {};
  req.callback = () => {};
  req.handle = native;
  native.shutdown(req);
  stream.end();
  (stream as unknown as { _writableState: { errored: Error | null } })._writableState.errored = SETTLED;
  return true;
}
