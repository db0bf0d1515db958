// The lean gRPC path (src/frontends/grpc/lean_grpc.ts, h2/): HPACK against RFC 7541's examples,
// and connections to a real gRPC port in-process (fake core): which streams it serves and which
// reach grpc-js, flow control both ways, frames a client may split or pad, PING, protocol
// errors, bytes that are not HTTP/2, and shutdown.
import http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeHeaders, HpackDecoder, HpackError, huffmanDecode } from '../../src/frontends/grpc/h2/hpack.js';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { MODEL_INFER_PATH } from '../../src/frontends/grpc/unary_infer.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';
import { grpcClient, packageDefinition } from '../helpers/grpc.js';
import { H2_PREFACE, h2Frame } from '../helpers/h2.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('HPACK', () => {
  it('decodes RFC 7541 C.4 (Huffman-coded requests sharing one dynamic table)', () => {
    const d = new HpackDecoder();
    expect(d.decode(hex('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
    ]);
    expect(d.decode(hex('8286 84be 5886 a8eb 1064 9cbf'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
      ['cache-control', 'no-cache'],
    ]);
    expect(d.decode(hex('8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'https'],
      [':path', '/index.html'],
      [':authority', 'www.example.com'],
      ['custom-key', 'custom-value'],
    ]);
  });

  it('decodes RFC 7541 C.3.1 (literals) and evicts the oldest entries when the table shrinks', () => {
    const d = new HpackDecoder();
    expect(d.decode(hex('8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
    ]);
    // Index 62 is the entry just added; a size update to 0 empties the table.
    expect(d.decode(hex('be'))).toEqual([[':authority', 'www.example.com']]);
    expect(() => d.decode(hex('20 be'))).toThrow(HpackError);
    // Above the size the server allows: an error.
    expect(() => new HpackDecoder(4096).decode(hex('3fe21f'))).toThrow(HpackError);
  });

  it('refuses bad Huffman padding, EOS, unknown indices and truncated strings', () => {
    // 'a' is 00011 (5 bits): padded with zeros instead of ones.
    expect(() => huffmanDecode(hex('18'), 0, 1)).toThrow(HpackError);
    expect(huffmanDecode(hex('1f'), 0, 1)).toBe('a');
    expect(() => huffmanDecode(hex('ffffffff'), 0, 4)).toThrow(HpackError);
    expect(() => new HpackDecoder().decode(hex('ff00'))).toThrow(HpackError);
    expect(() => new HpackDecoder().decode(hex('0005 61'))).toThrow(HpackError);
  });

  it('encodes literals any decoder reads back, long values and names of the static table included', () => {
    const fields: [string, string][] = [
      [':status', '200'],
      ['content-type', 'application/grpc+proto'],
      ['x-long', 'v'.repeat(300)],
      ['grpc-message', 'a%20b'],
    ];
    const block = encodeHeaders(fields);
    expect(new HpackDecoder().decode(block)).toEqual(fields);
  });
});

// ---- connections ----

const ModelInfer = (
  packageDefinition()['inference.GRPCInferenceService'] as Record<
    string,
    { requestSerialize(r: unknown): Buffer; responseDeserialize(b: Buffer): { raw_output_contents: Buffer[]; id: string } }
  >
).ModelInfer!;

function echoCore() {
  const core = fakeCore();
  const base = core.infer.bind(core);
  core.infer = (req: InferRequest): Promise<InferResponse> => {
    if (req.modelName === 'hang') {
      core.requests.push(req);
      return new Promise(() => {});
    }
    if (req.modelName !== 'echo') return base(req);
    return Promise.resolve({
      modelName: 'echo',
      modelVersion: '1',
      id: req.id,
      outputs: req.inputs.map((inp, i) => ({ name: `OUTPUT${i}`, datatype: 'UINT8', shape: inp.shape, data: Buffer.from(inp.data) })),
    });
  };
  return core;
}

function inferMessage(raw: Buffer, id = 'lean'): Buffer {
  const msg = ModelInfer.requestSerialize({
    model_name: 'echo',
    id,
    inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, raw.length] }],
    raw_input_contents: [raw],
  });
  const head = Buffer.alloc(5);
  head.writeUInt32BE(msg.length, 1);
  return Buffer.concat([head, msg]);
}

/** The sessions Node's server (grpc-js) made on the listening port and on grpc-js' in-process listener. */
function sessionCounts(g: GrpcServer): { listening: number; injected: number } {
  const listeners = (g.server as unknown as { http2Servers: Map<http2.Http2Server, unknown> }).http2Servers;
  const counts = { listening: 0, injected: 0 };
  for (const l of listeners.keys()) {
    l.on('session', () => {
      if ((l as unknown as net.Server).listening) counts.listening++;
      else counts.injected++;
    });
  }
  return counts;
}

interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

/** A raw HTTP/2 client: sends bytes, collects the server's frames. */
async function rawConnection(
  port: number,
): Promise<{ socket: net.Socket; frames: Frame[]; closed: Promise<void>; until(p: (f: Frame[]) => boolean): Promise<void> }> {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  const frames: Frame[] = [];
  let buf = Buffer.alloc(0);
  socket.on('data', (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
    while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
      const len = buf.readUIntBE(0, 3);
      frames.push({ type: buf[3]!, flags: buf[4]!, id: buf.readUInt32BE(5) & 0x7fffffff, payload: buf.subarray(9, 9 + len) });
      buf = buf.subarray(9 + len);
    }
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  const until = async (p: (f: Frame[]) => boolean): Promise<void> => {
    for (let i = 0; i < 300 && !p(frames); i++) await new Promise((r) => setTimeout(r, 10));
    if (!p(frames)) throw new Error(`frames never matched: ${JSON.stringify(frames.map((f) => [f.type, f.flags, f.id]))}`);
  };
  return { socket, frames, closed, until };
}

const SETTINGS = h2Frame(4, 0, 0, Buffer.alloc(0));

describe('lean gRPC connections', () => {
  const core = echoCore();
  let g: GrpcServer;
  let counts: { listening: number; injected: number };

  beforeAll(async () => {
    g = await startGrpcServer(core, capturedLogger().log, '127.0.0.1', 0);
    counts = sessionCounts(g);
  });
  afterAll(() => g?.server.forceShutdown());

  it('serves ModelInfer on the connection itself and passes every other call to grpc-js, on the same connection', async () => {
    const client = grpcClient(`127.0.0.1:${g.port}`);
    try {
      const raw = Buffer.from('abc');
      const res = await client.call<{ raw_output_contents: Buffer[] }>('ModelInfer', {
        model_name: 'echo',
        inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 3] }],
        raw_input_contents: [raw],
      });
      expect(res.raw_output_contents[0]!.equals(raw)).toBe(true);
      expect(counts).toEqual({ listening: 0, injected: 0 });
      const live = await client.call<{ live: boolean }>('ServerLive', {});
      expect(live.live).toBe(true);
      // grpc-js served it, on its in-process listener: the client's connection never reached Node's server.
      expect(counts).toEqual({ listening: 0, injected: 1 });
    } finally {
      client.close();
    }
  });

  it('sends a large answer within the client’s flow-control windows, and takes a large request', async () => {
    const session = http2.connect(`http://127.0.0.1:${g.port}`, { settings: { initialWindowSize: 1000 } });
    try {
      const raw = Buffer.alloc(300_000);
      for (let i = 0; i < raw.length; i++) raw[i] = (i * 7) & 0xff;
      const reply = await new Promise<{ data: Buffer; trailers: http2.IncomingHttpHeaders }>((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': MODEL_INFER_PATH, 'content-type': 'application/grpc', te: 'trailers' });
        const data: Buffer[] = [];
        req.on('data', (c: Buffer) => data.push(c));
        req.on('trailers', (t) => resolve({ data: Buffer.concat(data), trailers: t }));
        req.on('error', reject);
        req.end(inferMessage(raw, 'windows'));
      });
      expect(reply.trailers['grpc-status']).toBe('0');
      const res = ModelInfer.responseDeserialize(reply.data.subarray(5));
      expect(res.id).toBe('windows');
      expect(res.raw_output_contents[0]!.equals(raw)).toBe(true);
    } finally {
      session.close();
    }
  });

  it('reads header blocks split into CONTINUATION frames, padded and prioritised frames, and a message across DATA frames', async () => {
    const c = await rawConnection(g.port);
    const block = encodeHeaders([
      [':method', 'POST'],
      [':scheme', 'http'],
      [':path', MODEL_INFER_PATH],
      [':authority', 'localhost'],
      ['content-type', 'application/grpc'],
      ['te', 'trailers'],
    ]);
    const body = inferMessage(Buffer.from('split'), 'frames');
    // HEADERS with PADDED and PRIORITY, then CONTINUATION; DATA padded, then DATA with END_STREAM.
    const first = Buffer.concat([Buffer.from([3]), Buffer.alloc(5), block.subarray(0, 10), Buffer.alloc(3)]);
    c.socket.write(
      Buffer.concat([
        H2_PREFACE,
        SETTINGS,
        h2Frame(1, 0x08 | 0x20, 1, first),
        h2Frame(9, 0x04, 1, block.subarray(10)),
        h2Frame(0, 0x08, 1, Buffer.concat([Buffer.from([2]), body.subarray(0, 7), Buffer.alloc(2)])),
        h2Frame(0, 0x01, 1, body.subarray(7)),
      ]),
    );
    await c.until((f) => f.some((x) => x.type === 1 && x.id === 1 && (x.flags & 1) === 1));
    const d = new HpackDecoder();
    const headerFrames = c.frames.filter((f) => f.type === 1 && f.id === 1);
    const head = Object.fromEntries(d.decode(headerFrames[0]!.payload));
    const trailers = Object.fromEntries(d.decode(headerFrames[1]!.payload));
    expect(head).toMatchObject({ ':status': '200', 'content-type': 'application/grpc+proto', 'grpc-encoding': 'identity' });
    expect(trailers).toEqual({ 'grpc-status': '0', 'grpc-message': 'OK' });
    const data = Buffer.concat(c.frames.filter((f) => f.type === 0 && f.id === 1).map((f) => f.payload));
    const res = ModelInfer.responseDeserialize(data.subarray(5));
    expect(res.id).toBe('frames');
    expect(res.raw_output_contents[0]!.toString()).toBe('split');
    c.socket.destroy();
  });

  it('answers PING with its payload, and ends the connection with GOAWAY PROTOCOL_ERROR on a frame that breaks the protocol', async () => {
    const c = await rawConnection(g.port);
    const payload = Buffer.from('12345678');
    c.socket.write(Buffer.concat([H2_PREFACE, SETTINGS, h2Frame(6, 0, 0, payload)]));
    await c.until((f) => f.some((x) => x.type === 6 && x.flags === 1));
    expect(c.frames.find((x) => x.type === 6)!.payload.equals(payload)).toBe(true);
    // Its own SETTINGS first, and the ACK of the client's.
    expect(c.frames[0]!.type).toBe(4);
    expect(c.frames.some((x) => x.type === 4 && x.flags === 1)).toBe(true);
    c.socket.write(h2Frame(0, 0, 0, Buffer.from('x')));
    await c.until((f) => f.some((x) => x.type === 7));
    expect(c.frames.find((x) => x.type === 7)!.payload.readUInt32BE(4)).toBe(1);
    await c.closed;
  });

  it('a client’s RST_STREAM cancels the request in the core', async () => {
    const c = await rawConnection(g.port);
    const block = encodeHeaders([
      [':method', 'POST'],
      [':scheme', 'http'],
      [':path', MODEL_INFER_PATH],
      ['content-type', 'application/grpc'],
    ]);
    const msg = ModelInfer.requestSerialize({ model_name: 'hang', id: 'h' });
    const head = Buffer.alloc(5);
    head.writeUInt32BE(msg.length, 1);
    const before = core.requests.length;
    c.socket.write(Buffer.concat([H2_PREFACE, SETTINGS, h2Frame(1, 0x04, 1, block), h2Frame(0, 1, 1, Buffer.concat([head, msg]))]));
    for (let i = 0; i < 200 && core.requests.length === before; i++) await new Promise((r) => setTimeout(r, 10));
    const req = core.requests.at(-1)!;
    expect(req.modelName).toBe('hang');
    expect(req.cancellation?.cancelled).toBe(false);
    const code = Buffer.alloc(4);
    code.writeUInt32BE(8, 0);
    c.socket.write(h2Frame(3, 0, 1, code));
    for (let i = 0; i < 200 && !req.cancellation?.cancelled; i++) await new Promise((r) => setTimeout(r, 10));
    expect(req.cancellation?.cancelled).toBe(true);
    c.socket.destroy();
  });

  it('bytes that are not HTTP/2 get the answer of Node’s server, as without the lean path', async () => {
    const ask = async (port: number): Promise<string> => {
      const s = net.connect(port, '127.0.0.1');
      const got: Buffer[] = [];
      s.on('data', (c: Buffer) => got.push(c));
      s.on('error', () => {});
      s.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      await new Promise((r) => s.once('close', r));
      // Its SETTINGS and GOAWAY frames (the WINDOW_UPDATE grpc-js' sessions send may or may not come first).
      const all = Buffer.concat(got);
      const frames: string[] = [];
      for (let at = 0; at + 9 <= all.length; at += 9 + all.readUIntBE(at, 3)) {
        if (all[at + 3] === 4 || all[at + 3] === 7) frames.push(all.subarray(at, at + 9 + all.readUIntBE(at, 3)).toString('hex'));
      }
      return frames.join(' ');
    };
    process.env.SERVAL_GRPC_LEAN = '0';
    const plain = await startGrpcServer(core, capturedLogger().log, '127.0.0.1', 0);
    delete process.env.SERVAL_GRPC_LEAN;
    try {
      const theirs = await ask(plain.port);
      expect(theirs.length).toBeGreaterThan(0);
      expect(await ask(g.port)).toBe(theirs);
    } finally {
      plain.server.forceShutdown();
    }
  });
});

describe('lean gRPC path off', () => {
  it('without a folder for its socket, grpc-js serves every connection, and says why', async () => {
    const tmp = process.env.TMPDIR;
    process.env.TMPDIR = '/nonexistent/serval-lean-test';
    const logged = capturedLogger();
    let g: GrpcServer | undefined;
    try {
      g = await startGrpcServer(echoCore(), logged.log, '127.0.0.1', 0);
    } finally {
      if (tmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = tmp;
    }
    const counts = sessionCounts(g);
    const client = grpcClient(`127.0.0.1:${g.port}`);
    try {
      const res = await client.call<{ raw_output_contents: Buffer[] }>('ModelInfer', {
        model_name: 'echo',
        inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 2] }],
        raw_input_contents: [Buffer.from('ok')],
      });
      expect(res.raw_output_contents[0]!.toString()).toBe('ok');
      expect(counts.listening).toBe(1);
      expect(logged.lines.some((l) => l.includes('grpc-js serves every connection'))).toBe(true);
    } finally {
      client.close();
      g.server.forceShutdown();
    }
  });
});

describe('lean gRPC shutdown', () => {
  it('sends GOAWAY to an idle connection and closes it; shutdown resolves', async () => {
    const g = await startGrpcServer(echoCore(), capturedLogger().log, '127.0.0.1', 0);
    const c = await rawConnection(g.port);
    c.socket.write(Buffer.concat([H2_PREFACE, SETTINGS]));
    await c.until((f) => f.some((x) => x.type === 4));
    await g.shutdown();
    await c.until((f) => f.some((x) => x.type === 7));
    expect(c.frames.find((x) => x.type === 7)!.payload.readUInt32BE(4)).toBe(0);
    await c.closed;
  });

  it('closes a connection that has sent nothing yet, which no one else knows of', async () => {
    const g = await startGrpcServer(echoCore(), capturedLogger().log, '127.0.0.1', 0);
    const s = net.connect(g.port, '127.0.0.1');
    s.on('error', () => {});
    await new Promise((r) => s.once('connect', r));
    const closed = new Promise((r) => s.once('close', r));
    await g.shutdown();
    await closed;
  });

  it('a grpc-js client sees no difference in the status of a refused call', async () => {
    const g = await startGrpcServer(echoCore(), capturedLogger().log, '127.0.0.1', 0);
    const client = grpcClient(`127.0.0.1:${g.port}`);
    try {
      await expect(client.call('ModelInfer', { model_name: 'nope' })).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    } finally {
      client.close();
      g.server.forceShutdown();
    }
  });
});
