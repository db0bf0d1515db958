// Triton's response cache (`--cache-config local,size=BYTES`): whole responses of models whose
// config says `response_cache { enable: true }`, keyed by a hash of the request, shared by all
// models, least recently used first out when the bytes run short.
import { createHash } from 'node:crypto';
import type { DataType } from '../kernel/datatypes.js';
import type { InferOutputTensor } from '../kernel/types.js';

/** A tensor as the key sees it: what makes two requests ask for the same thing. */
export interface KeyTensor {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/** One requested output and its classification count (0 = the tensor itself). */
export interface KeyOutput {
  readonly name: string;
  readonly classification: number;
}

/**
 * The cache key of a request: SHA-256 over the model, its version, every input (sorted by name:
 * the order a client lists them in does not change the answer) with datatype, shape and bytes,
 * and the requested outputs. Lengths are hashed with the bytes, so no two different requests
 * write the same stream. The tensor bytes go to the hash as they are (no per-element work).
 */
export function requestKey(model: string, version: number, inputs: readonly KeyTensor[], outputs: readonly KeyOutput[]): string {
  const h = createHash('sha256');
  const sorted = [...inputs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // The header (names, types, shapes, byte lengths) as one JSON string, then the raw bytes in order.
  h.update(
    JSON.stringify([
      model,
      version,
      sorted.map((t) => [t.name, t.datatype, t.shape, t.data.byteLength]),
      outputs.map((o) => [o.name, o.classification]),
    ]),
  );
  for (const t of sorted) h.update(t.data);
  return h.digest('base64');
}

/** A stored response: its outputs' descriptors and one owned buffer holding all their bytes. */
interface Entry {
  readonly outputs: readonly { name: string; datatype: DataType; shape: readonly number[]; offset: number; length: number }[];
  readonly data: Buffer;
  readonly bytes: number;
}

/** Bookkeeping bytes charged per entry on top of its tensors (key, descriptors, map slot). */
const ENTRY_OVERHEAD = 256;

export interface CacheCounters {
  entries: number;
  bytes: number;
  capacity: number;
  lookups: number;
  hits: number;
  misses: number;
  evictions: number;
  /** Inserts refused because the response alone is larger than the cache. */
  rejected: number;
}

export class ResponseCache {
  /** Map order is recency order: the first entry is the least recently used. */
  private readonly entries = new Map<string, Entry>();
  private used = 0;
  private readonly counters: CacheCounters;

  constructor(readonly capacity: number) {
    this.counters = { entries: 0, bytes: 0, capacity, lookups: 0, hits: 0, misses: 0, evictions: 0, rejected: 0 };
  }

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.used;
  }

  stats(): CacheCounters {
    return { ...this.counters, entries: this.entries.size, bytes: this.used };
  }

  /** The stored outputs for `key` (views of the stored bytes, never written to), or undefined. */
  lookup(key: string): InferOutputTensor[] | undefined {
    this.counters.lookups += 1;
    const e = this.entries.get(key);
    if (!e) {
      this.counters.misses += 1;
      return undefined;
    }
    this.counters.hits += 1;
    // Most recently used goes last.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.outputs.map((o) => ({
      name: o.name,
      datatype: o.datatype,
      shape: [...o.shape],
      data: e.data.subarray(o.offset, o.offset + o.length),
    }));
  }

  /**
   * Stores a copy of `outputs` under `key` (the response's buffers may be views of a batch's
   * buffer, which must not be kept alive, nor counted, by the cache), evicting the least recently
   * used entries until it fits. Returns false when the response alone is larger than the cache.
   */
  insert(key: string, outputs: readonly InferOutputTensor[]): boolean {
    if (this.entries.has(key)) return true;
    let total = 0;
    for (const o of outputs) total += o.data.byteLength;
    let bytes = total + ENTRY_OVERHEAD + key.length;
    for (const o of outputs) bytes += o.name.length + 8 * o.shape.length;
    if (bytes > this.capacity) {
      this.counters.rejected += 1;
      return false;
    }
    while (this.used + bytes > this.capacity) this.evictOldest();
    const data = Buffer.allocUnsafe(total);
    let offset = 0;
    const stored = outputs.map((o) => {
      data.set(o.data, offset);
      const d = { name: o.name, datatype: o.datatype, shape: [...o.shape], offset, length: o.data.byteLength };
      offset += o.data.byteLength;
      return d;
    });
    this.entries.set(key, { outputs: stored, data, bytes });
    this.used += bytes;
    return true;
  }

  private evictOldest(): void {
    const first = this.entries.entries().next();
    if (first.done) return;
    const [k, e] = first.value;
    this.entries.delete(k);
    this.used -= e.bytes;
    this.counters.evictions += 1;
  }
}
