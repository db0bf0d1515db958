// HPACK (RFC 7541) for the lean HTTP/2 path (lean_session.ts): a decoder with the static and
// dynamic tables and Huffman-coded strings, as any HTTP/2 client may send them, and an encoder
// that writes literals only ("without indexing", no Huffman): the server's few response header
// blocks are built once and reused, so its table would buy nothing.

/** RFC 7541 Appendix A: the static table (index 1..61). */
const STATIC: readonly (readonly [string, string])[] = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];

/**
 * RFC 7541 Appendix B: the Huffman code's length in bits for each symbol (0..255, then EOS at
 * 256), one base-32 digit each. The code is canonical (each code is the previous one plus one,
 * shifted left as the length grows, symbols of one length in order), so the lengths determine it.
 */
const HUFFMAN_LENGTHS =
  'dnsssssssoussussssssssusssssssss6aacd68baa8b8666555666666678f6cad67777777777777777777777878djde6f56565666577666567655677777fbedskmkkmmmnmnnnnnonoomnonnnnlmnmnnomlkmmnnlnmmolmnnllmlnmnnkmmmnmmnqqkjmnmpqqqrrqopjlqrrqrollqqsrrrkoklmllnmmppooqnqrqqrrrrrsrrrrrqu';
const EOS = 256;

/** The decoding tree: node i's children are tree[2i] (bit 0) and tree[2i+1] (bit 1); a leaf is -1 - symbol; 0 = none. */
const TREE = buildTree();

function buildTree(): Int32Array {
  const lengths = [...HUFFMAN_LENGTHS].map((c) => Number.parseInt(c, 32));
  const order = lengths.map((_, s) => s).sort((a, b) => lengths[a]! - lengths[b]! || a - b);
  const tree = new Int32Array(2 * 2 * 257);
  let nodes = 1;
  let code = 0;
  let prev = lengths[order[0]!]!;
  order.forEach((s, i) => {
    const len = lengths[s]!;
    if (i > 0) {
      code = (code + 1) * 2 ** (len - prev);
      prev = len;
    }
    let node = 0;
    for (let b = len - 1; b >= 0; b--) {
      const slot = 2 * node + (Math.floor(code / 2 ** b) & 1);
      if (b === 0) tree[slot] = -1 - s;
      else {
        if (tree[slot] === 0) tree[slot] = nodes++;
        node = tree[slot]!;
      }
    }
  });
  return tree;
}

export class HpackError extends Error {}

/** Decodes a Huffman-coded string (RFC 7541 §5.2): padding is up to 7 one-bits, EOS is an error. */
export function huffmanDecode(src: Uint8Array, start: number, end: number): string {
  // The shortest code is 5 bits: at most 8/5 symbols per octet.
  const out = Buffer.allocUnsafe(Math.ceil(((end - start) * 8) / 5));
  let n = 0;
  let node = 0;
  let depth = 0;
  let ones = true;
  for (let i = start; i < end; i++) {
    const byte = src[i]!;
    for (let b = 7; b >= 0; b--) {
      const bit = (byte >> b) & 1;
      const next = TREE[2 * node + bit]!;
      if (next < 0) {
        const sym = -1 - next;
        if (sym === EOS) throw new HpackError('Huffman string contains EOS');
        out[n++] = sym;
        node = 0;
        depth = 0;
        ones = true;
      } else if (next === 0) {
        throw new HpackError('invalid Huffman code');
      } else {
        node = next;
        depth++;
        ones &&= bit === 1;
      }
    }
  }
  if (depth > 7 || !ones) throw new HpackError('invalid Huffman padding');
  return out.toString('latin1', 0, n);
}

/** One header field as the decoder gives it: names lower-case as HTTP/2 requires, values as latin1. */
export type HeaderField = readonly [name: string, value: string];

/** Per-entry overhead of RFC 7541 §4.1. */
const ENTRY_OVERHEAD = 32;

/** A connection's decoding context: the dynamic table, bounded by the size the server allows. */
export class HpackDecoder {
  /** Newest first. */
  private readonly table: HeaderField[] = [];
  private size = 0;
  private limit: number;

  constructor(
    /** SETTINGS_HEADER_TABLE_SIZE the server announced: the most a size update may ask for. */
    private readonly maxLimit = 4096,
    /** The most octets of names and values (plus 32 per field) one block may decode to. */
    private readonly maxListSize = 65536,
  ) {
    this.limit = maxLimit;
  }

  /** The fields of one complete header block. */
  decode(block: Uint8Array): HeaderField[] {
    const fields: HeaderField[] = [];
    let listSize = 0;
    let at = 0;
    let fieldSeen = false;
    const int = (prefixBits: number): number => {
      const mask = (1 << prefixBits) - 1;
      let v = block[at++]! & mask;
      if (v < mask) return v;
      let shift = 0;
      for (;;) {
        if (at >= block.length) throw new HpackError('truncated integer');
        const b = block[at++]!;
        v += (b & 0x7f) * 2 ** shift;
        shift += 7;
        if ((b & 0x80) === 0) break;
        if (shift > 28) throw new HpackError('integer too large');
      }
      return v;
    };
    const str = (): string => {
      if (at >= block.length) throw new HpackError('truncated string');
      const huffman = (block[at]! & 0x80) !== 0;
      const len = int(7);
      if (at + len > block.length) throw new HpackError('truncated string');
      const s = huffman ? huffmanDecode(block, at, at + len) : latin1(block, at, at + len);
      at += len;
      return s;
    };
    while (at < block.length) {
      const b = block[at]!;
      let field: HeaderField;
      if (b & 0x80) {
        const index = int(7);
        field = this.entry(index);
      } else if ((b & 0xe0) === 0x20) {
        // Dynamic table size update: only before the first field of a block (§4.2).
        if (fieldSeen) throw new HpackError('table size update after a header field');
        const size = int(5);
        if (size > this.maxLimit) throw new HpackError('table size update above the allowed size');
        this.limit = size;
        this.evict(0);
        continue;
      } else {
        const indexed = (b & 0xc0) === 0x40;
        const index = int(indexed ? 6 : 4);
        const name = index === 0 ? str() : this.entry(index)[0];
        field = [name, str()];
        if (indexed) this.insert(field);
      }
      fieldSeen = true;
      listSize += field[0].length + field[1].length + ENTRY_OVERHEAD;
      if (listSize > this.maxListSize) throw new HpackError('header list too large');
      fields.push(field);
    }
    return fields;
  }

  private entry(index: number): HeaderField {
    if (index === 0) throw new HpackError('index 0');
    if (index <= STATIC.length) return STATIC[index - 1]!;
    const e = this.table[index - STATIC.length - 1];
    if (!e) throw new HpackError(`index ${index} is not in the table`);
    return e;
  }

  private insert(field: HeaderField): void {
    const size = field[0].length + field[1].length + ENTRY_OVERHEAD;
    this.evict(size);
    // An entry larger than the table empties it and is not added (§4.4).
    if (size > this.limit) return;
    this.table.unshift(field);
    this.size += size;
  }

  private evict(room: number): void {
    while (this.size + room > this.limit && this.table.length > 0) {
      const e = this.table.pop()!;
      this.size -= e[0].length + e[1].length + ENTRY_OVERHEAD;
    }
  }
}

function latin1(src: Uint8Array, start: number, end: number): string {
  if (end - start < 64) {
    let s = '';
    for (let i = start; i < end; i++) s += String.fromCharCode(src[i]!);
    return s;
  }
  return Buffer.from(src.buffer, src.byteOffset + start, end - start).toString('latin1');
}

/**
 * A header block of literal fields "without indexing" (§6.2.2), names and values as raw
 * octets: what any decoder reads, and nothing it must remember.
 */
export function encodeHeaders(fields: readonly HeaderField[]): Buffer {
  const parts: number[] = [];
  const int = (v: number, prefixBits: number, first: number): void => {
    const mask = (1 << prefixBits) - 1;
    if (v < mask) {
      parts.push(first | v);
      return;
    }
    parts.push(first | mask);
    v -= mask;
    while (v >= 0x80) {
      parts.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    parts.push(v);
  };
  const chunks: Buffer[] = [];
  for (const [name, value] of fields) {
    parts.length = 0;
    const staticName = STATIC.findIndex(([n]) => n === name) + 1;
    int(staticName, 4, 0x00);
    if (staticName === 0) {
      int(Buffer.byteLength(name, 'latin1'), 7, 0x00);
      chunks.push(Buffer.from(parts), Buffer.from(name, 'latin1'));
      parts.length = 0;
    }
    int(Buffer.byteLength(value, 'latin1'), 7, 0x00);
    chunks.push(Buffer.from(parts), Buffer.from(value, 'latin1'));
  }
  return Buffer.concat(chunks);
}

/** Fields as a header object (Node's shape): a name given more than once gets an array of its values. */
export function headerRecord(fields: readonly HeaderField[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of fields) {
    const had = out[name];
    if (had === undefined) out[name] = value;
    else if (Array.isArray(had)) had.push(value);
    else out[name] = [had, value];
  }
  return out;
}
