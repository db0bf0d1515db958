// V8's old-generation limit for a server process that moves large tensors.
//
// Each large request leaves about its size in socket-read ArrayBuffers (Node reads a body or an
// HTTP/2 message in 64 KiB pieces; the server copies them out). With V8's default growing factor
// the old generation's limit sits close above a small live heap (17 MB live, 27 MB limit), so
// once incremental marking runs, what is allocated meanwhile survives it, and the next cycle
// starts almost at once: measured on 1 MiB requests, a mark-compact every ~6 requests and 0.4
// of a core in V8's GC threads. A larger factor breaks that cycle (docs/benchmarks.md, the triton
// section's analysis). The flag is read at every limit computation, so it can be set at run time.
import v8 from 'node:v8';

/** The limit grows to (1 + this/100) × the live heap after a full collection. */
export const HEAP_GROWING_PERCENT = 200;

const FLAG = '--heap-growing-percent';

/**
 * Sets V8's heap growing factor unless the process was started with its own (node
 * --heap-growing-percent=N, on the command line or in NODE_OPTIONS). Returns the flag it set.
 */
export function tuneHeapGrowth(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions = process.env.NODE_OPTIONS ?? '',
): string | undefined {
  // V8 takes its flags with '-' or '_' between words.
  const given = (s: string): boolean => s.replaceAll('_', '-').startsWith(FLAG);
  if (execArgv.some(given) || nodeOptions.split(/\s+/).some(given)) return undefined;
  const flag = `${FLAG}=${HEAP_GROWING_PERCENT}`;
  v8.setFlagsFromString(flag);
  return flag;
}
