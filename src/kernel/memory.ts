// Giving a large buffer's memory back at once. V8 frees an ArrayBuffer's memory only when a
// collection finds it unreachable, and an idle thread may not collect for a long time: one 2 GB
// request would leave its buffers resident after it was answered. An ArrayBuffer transferred
// into a MessagePort whose other end is closed is detached here and its memory released within
// a tick (measured: 512 MiB back at once; node 20).
import { MessageChannel } from 'node:worker_threads';

// A port whose other end is closed. Once the event loop has processed that close (before the
// first request in practice: a server or worker does I/O after loading this module), a transfer
// into it releases the memory at once, even on a thread that then blocks (a worker in
// Atomics.wait); before, it is released when the event loop next turns.
const { port1: sink, port2 } = new MessageChannel();
port2.close();
sink.unref();

/**
 * The memory `view` spans whole, when it is an ArrayBuffer of its own (not a slice of Buffer's
 * pool, not shared): memory that may be freed, adopted or marked as a response's alone.
 */
export function wholeBuffer(view: Uint8Array): ArrayBuffer | undefined {
  const b = view.buffer;
  return b instanceof ArrayBuffer && view.byteOffset === 0 && view.byteLength === b.byteLength ? b : undefined;
}

/**
 * Frees `buffer`'s memory now: it is detached (every view of it becomes empty). Only for memory
 * nothing reads any more. A buffer that cannot be transferred is left to the collector.
 */
export function freeNow(buffer: ArrayBufferLike): void {
  if (!(buffer instanceof ArrayBuffer) || buffer.byteLength === 0) return;
  try {
    sink.postMessage(null, [buffer]);
  } catch {
    // not transferable (a pooled Buffer's memory, a wasm memory): the collector frees it
  }
}

// Memory that holds one response's outputs and that nothing else keeps (a Python model's outputs,
// read for that one response): the front end that sends the response frees it once the bytes are
// written, so that large responses leave no garbage behind. Without it, each 1 MiB response is
// external memory V8 only reclaims by a full collection, one every few dozen requests.
const sole = new WeakSet<ArrayBuffer>();

/** Marks `buffer` as one response's alone (see freeSent). */
export function soleResponseMemory(buffer: ArrayBufferLike): void {
  if (buffer instanceof ArrayBuffer) sole.add(buffer);
}

/** Something other than the response keeps views of `buffer` now (an ensemble, a sequence's state): the collector frees it. */
export function keepMemory(buffer: ArrayBufferLike): void {
  if (buffer instanceof ArrayBuffer) sole.delete(buffer);
}

/** A response's parts have been written: the memory among them that was the response's alone is freed. */
export function freeSent(parts: readonly Uint8Array[]): void {
  for (const p of parts) {
    const b = p.buffer;
    if (b instanceof ArrayBuffer && sole.delete(b)) freeNow(b);
  }
}
