// The server's cache settings from tritonserver's flags: `--cache-config <cache>,<key>=<value>`
// (repeatable) and the deprecated `--response-cache-byte-size N` (= `--cache-config local,size=N`).

/** The configured cache: only Triton's `local` (in-process) cache exists in Serval. */
export interface CacheSettings {
  readonly name: 'local';
  /** Capacity in bytes. */
  readonly size: number;
}

/** Throws an Error with tritonserver's wording where it has one. Undefined: no cache. */
export function parseCacheSettings(entries: readonly string[], byteSize: number | undefined): CacheSettings | undefined {
  if (byteSize !== undefined && entries.length > 0) {
    throw new Error('Incompatible flags --response-cache-byte-size and --cache-config both provided. Please provide one or the other.');
  }
  if (byteSize !== undefined) return byteSize > 0 ? { name: 'local', size: byteSize } : undefined;
  const byCache = new Map<string, Map<string, string>>();
  for (const arg of entries) {
    const comma = arg.indexOf(',');
    if (comma <= 0) {
      throw new Error(`No cache specified. --cache-config option format is <cache name>,<setting>=<value>. Got ${arg}`);
    }
    const eq = arg.indexOf('=', comma + 1);
    if (eq < 0) throw new Error(`--cache-config option format is '<cache name>,<setting>=<value>'. Got ${arg}`);
    const name = arg.slice(0, comma);
    const key = arg.slice(comma + 1, eq);
    const value = arg.slice(eq + 1);
    const settings = byCache.get(name) ?? new Map<string, string>();
    settings.set(key, value);
    byCache.set(name, settings);
  }
  if (byCache.size === 0) return undefined;
  if (byCache.size > 1) {
    throw new Error(`multiple cache configurations are not supported (got ${[...byCache.keys()].join(', ')}); specify one cache`);
  }
  const [name, settings] = [...byCache][0]!;
  if (name !== 'local') throw new Error(`--cache-config: cache '${name}' is not available; Serval has the 'local' cache only`);
  for (const key of settings.keys()) {
    if (key !== 'size') throw new Error(`--cache-config: unknown setting '${key}' for the local cache (it takes size=BYTES)`);
  }
  const raw = settings.get('size');
  if (raw === undefined) throw new Error('--cache-config: the local cache needs size=BYTES');
  const size = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(size)) throw new Error(`--cache-config: size must be a non-negative integer number of bytes, got '${raw}'`);
  return size > 0 ? { name: 'local', size } : undefined;
}
