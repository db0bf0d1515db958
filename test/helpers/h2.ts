// Raw HTTP/2 bytes for the tests and the fuzzer of the lean gRPC path (test/unit/grpc_lean.test.ts, test/fuzz/fuzz.ts).

/** The client connection preface (RFC 9113 §3.4). */
export const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** One frame: 9-byte header (length, type, flags, stream id) and its payload. */
export function h2Frame(type: number, flags: number, id: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}
