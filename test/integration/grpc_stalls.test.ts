// Stalled gRPC messages (issue 25): a request message whose declared length does not arrive in time
// ends its stream with DEADLINE_EXCEEDED and a text naming the limit, on the unary transport
// (unary_infer.ts) and on streams grpc-js reads (ModelStreamInfer, compressed ModelInfer); a stream
// idle between messages stays open; a message that trickles in within the limits is served. And
// what a message that never completes held — its budget admission and its memory — is given back
// within seconds when the client goes away or the limit ends it (measured by the server's VmRSS).
import { readdirSync, readFileSync } from 'node:fs';
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type GrpcClient, grpcClient, packageDefinition, status } from '../helpers/grpc.js';
import { openInferStream } from '../helpers/grpc_stream.js';
import { CLI } from '../helpers/paths.js';
import { type ServerHandle, startServer } from '../helpers/server.js';

const repo = inject('modelRepository');
const INFER = '/inference.GRPCInferenceService/ModelInfer';
const STREAM = '/inference.GRPCInferenceService/ModelStreamInfer';
const MESSAGE_SECS = 3;
const IDLE_SECS = 1;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function serialize(method: 'ModelInfer' | 'ModelStreamInfer', req: Record<string, unknown>): Buffer {
  const svc = packageDefinition()['inference.GRPCInferenceService'] as Record<string, { requestSerialize(r: unknown): Buffer }>;
  return svc[method]!.requestSerialize(req);
}

/** The length prefix of a gRPC message of `length` bytes (uncompressed). */
function prefix(length: number): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(length, 1);
  return head;
}

function simpleRequest(id: string): Record<string, unknown> {
  const a = Buffer.alloc(64);
  const b = Buffer.alloc(64);
  for (let i = 0; i < 16; i++) {
    a.writeInt32LE(i, i * 4);
    b.writeInt32LE(1, i * 4);
  }
  return {
    model_name: 'simple',
    id,
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
    ],
    raw_input_contents: [a, b],
  };
}

interface Ended {
  /** Headers of the response (a trailers-only response carries the status here). */
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders | undefined;
  data: Buffer;
  /** The RST_STREAM code the stream closed with (0: NO_ERROR or a normal end). */
  rstCode: number | undefined;
  /** Milliseconds from the call's start to the stream's close. */
  ms: number;
}

interface RawCall {
  req: http2.ClientHttp2Stream;
  session: http2.ClientHttp2Session;
  ended: Promise<Ended>;
  /** Writes `b`, waiting for the stream to take it (HTTP/2 flow control). */
  write(b: Buffer): Promise<void>;
}

/** A call over node:http2 with hand-written framing: what the test writes is what the server gets. */
function rawCall(port: number, path: string, extra: http2.OutgoingHttpHeaders = {}): RawCall {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extra });
  const start = performance.now();
  let headers: http2.IncomingHttpHeaders = {};
  let trailers: http2.IncomingHttpHeaders | undefined;
  const data: Buffer[] = [];
  req.on('response', (h) => (headers = h));
  req.on('trailers', (t) => (trailers = t));
  req.on('data', (c: Buffer) => data.push(c));
  req.on('error', () => {});
  const ended = new Promise<Ended>((resolve) =>
    req.once('close', () => resolve({ headers, trailers, data: Buffer.concat(data), rstCode: req.rstCode, ms: performance.now() - start })),
  );
  const write = (b: Buffer): Promise<void> =>
    new Promise((resolve) => {
      if (req.closed || req.destroyed) return resolve();
      if (req.write(b)) resolve();
      else {
        const done = (): void => {
          req.off('drain', done);
          req.off('close', done);
          resolve();
        };
        req.on('drain', done);
        req.on('close', done);
      }
    });
  return { req, session, ended, write };
}

function statusOf(e: Ended): { code: number; details: string } {
  const t = e.trailers ?? e.headers;
  return { code: Number(t['grpc-status']), details: decodeURI(String(t['grpc-message'] ?? '')) };
}

/** gRPC messages in a response body (flag byte and length dropped). */
function messages(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at + 5 <= body.length; ) {
    const n = body.readUInt32BE(at + 1);
    out.push(body.subarray(at + 5, at + 5 + n));
    at += 5 + n;
  }
  return out;
}

const IDLE_TEXT = (got: number, length: number) =>
  `Timed out receiving a request message: no data for ${IDLE_SECS} s with ${got} of its ${length} bytes received (--grpc-message-idle-timeout-secs)`;

describe('per-message receive limits', () => {
  let server: ServerHandle;
  let port: number;
  let client: GrpcClient;

  beforeAll(async () => {
    server = await startServer(repo, [
      '--model-control-mode',
      'explicit',
      '--load-model',
      'simple',
      '--grpc-message-receive-timeout-secs',
      String(MESSAGE_SECS),
      '--grpc-message-idle-timeout-secs',
      String(IDLE_SECS),
    ]);
    port = server.grpcPort!;
    client = grpcClient(server.grpcAddress);
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await server?.stop();
  });

  // The unary transport, ModelStreamInfer (grpc-js) and a compressed ModelInfer (grpc-js' unary path).
  const paths: [string, string, http2.OutgoingHttpHeaders][] = [
    ['unary ModelInfer', INFER, {}],
    ['ModelStreamInfer', STREAM, {}],
    ['compressed ModelInfer', INFER, { 'grpc-encoding': 'gzip' }],
  ];

  for (const [name, path, extra] of paths) {
    it(`${name}: a message that declares 100 MiB and stops after 1 KB ends with DEADLINE_EXCEEDED after the idle limit`, async () => {
      const call = rawCall(port, path, extra);
      try {
        await call.write(prefix(100 << 20));
        await call.write(Buffer.alloc(1024, 7));
        const e = await call.ended;
        expect(statusOf(e)).toEqual({ code: status.DEADLINE_EXCEEDED, details: IDLE_TEXT(1024, 100 << 20) });
        // Ended by the server (status, then RST_STREAM NO_ERROR), not left open.
        expect(e.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
        expect(e.ms).toBeGreaterThanOrEqual(IDLE_SECS * 1000 - 50);
        expect(e.ms).toBeLessThan(IDLE_SECS * 1000 + 1500);
      } finally {
        call.session.destroy();
      }
    });

    it(`${name}: a message that trickles without ever idling ends after the whole-message limit`, async () => {
      const call = rawCall(port, path, extra);
      try {
        await call.write(prefix(1 << 20));
        let sent = 0;
        let ended: Ended | undefined;
        void call.ended.then((e) => (ended = e));
        while (!ended && sent < 100) {
          await call.write(Buffer.alloc(10, 1));
          sent += 10;
          await sleep(300);
        }
        const e = await call.ended;
        const m =
          /^Timed out receiving a request message: (\d+) of its 1048576 bytes received in 3 s \(--grpc-message-receive-timeout-secs\)$/.exec(
            statusOf(e).details,
          );
        expect(statusOf(e).code).toBe(status.DEADLINE_EXCEEDED);
        expect(m, statusOf(e).details).not.toBeNull();
        expect(Number(m![1])).toBeGreaterThan(50);
        expect(e.ms).toBeGreaterThanOrEqual(MESSAGE_SECS * 1000 - 50);
        expect(e.ms).toBeLessThan(MESSAGE_SECS * 1000 + 1500);
      } finally {
        call.session.destroy();
      }
    });
  }

  it('a stream that already had responses ends with the status in its trailers, after those responses', async () => {
    const call = rawCall(port, STREAM);
    try {
      const msg = serialize('ModelStreamInfer', simpleRequest('answered'));
      const answered = new Promise<void>((resolve) => call.req.once('data', () => resolve()));
      await call.write(Buffer.concat([prefix(msg.length), msg]));
      await answered;
      await call.write(prefix(100 << 20));
      await call.write(Buffer.alloc(1024));
      const e = await call.ended;
      expect(e.headers[':status']).toBe(200);
      expect(e.trailers?.['grpc-status']).toBe(String(status.DEADLINE_EXCEEDED));
      expect(statusOf(e).details).toBe(IDLE_TEXT(1024, 100 << 20));
      const out = messages(e.data);
      expect(out).toHaveLength(1);
      expect(out[0]!.includes(Buffer.from('answered'))).toBe(true);
    } finally {
      call.session.destroy();
    }
  });

  it('an incomplete length prefix is timed too, and named as such', async () => {
    const call = rawCall(port, STREAM);
    try {
      await call.write(Buffer.from([0, 0]));
      const e = await call.ended;
      expect(statusOf(e)).toEqual({
        code: status.DEADLINE_EXCEEDED,
        details: `Timed out receiving a request message: no data for ${IDLE_SECS} s with 2 of the 5 bytes of its length prefix received (--grpc-message-idle-timeout-secs)`,
      });
    } finally {
      call.session.destroy();
    }
  });

  it('a message that trickles in within the limits is served, on the unary transport and on a stream', async () => {
    for (const [path, method] of [
      [INFER, 'ModelInfer'],
      [STREAM, 'ModelStreamInfer'],
    ] as const) {
      const msg = serialize(method, simpleRequest('trickled'));
      const framed = Buffer.concat([prefix(msg.length), msg]);
      const call = rawCall(port, path);
      try {
        // About 1.6 s in all (over the idle limit, under the message limit), 400 ms between pieces.
        const pieces = 5;
        const size = Math.ceil(framed.length / pieces);
        for (let i = 0; i < pieces; i++) {
          await call.write(framed.subarray(i * size, (i + 1) * size));
          if (i < pieces - 1) await sleep(400);
        }
        call.req.end();
        const e = await call.ended;
        expect(statusOf(e), path).toEqual({ code: status.OK, details: 'OK' });
        const out = messages(e.data);
        expect(out).toHaveLength(1);
        // The id comes back: the message arrived whole.
        expect(out[0]!.includes(Buffer.from('trickled'))).toBe(true);
      } finally {
        call.session.destroy();
      }
    }
  });

  it('a stream idle between complete messages stays open past both limits and still serves', async () => {
    const stream = openInferStream(server.grpcAddress);
    try {
      stream.send(simpleRequest('first'));
      const [first] = await stream.waitFor(1, 10_000);
      expect(first!.error_message).toBe('');
      await sleep((MESSAGE_SECS + 1) * 1000);
      stream.send(simpleRequest('second'));
      const [, second] = await stream.waitFor(2, 10_000);
      expect(second!.error_message).toBe('');
      expect(second!.infer_response?.id).toBe('second');
    } finally {
      stream.close();
    }
    // The same for the unary transport: headers, then nothing before the message.
    const call = rawCall(port, INFER);
    try {
      await sleep((IDLE_SECS + 1) * 1000);
      const msg = serialize('ModelInfer', simpleRequest('late'));
      await call.write(Buffer.concat([prefix(msg.length), msg]));
      call.req.end();
      expect(statusOf(await call.ended)).toEqual({ code: status.OK, details: 'OK' });
    } finally {
      call.session.destroy();
    }
  }, 30_000);

  it('other clients are served while messages stall, and the server answers afterwards', async () => {
    const stalled = [rawCall(port, INFER), rawCall(port, STREAM)];
    for (const s of stalled) {
      await s.write(prefix(50 << 20));
      await s.write(Buffer.alloc(100));
    }
    const res = await client.call('ModelInfer', simpleRequest('meanwhile'));
    expect(res.id).toBe('meanwhile');
    for (const s of stalled) {
      expect(statusOf(await s.ended).code).toBe(status.DEADLINE_EXCEEDED);
      s.session.destroy();
    }
    expect((await client.call('ModelInfer', simpleRequest('after'))).id).toBe('after');
  });
});

// ---- memory: what a message that never completes held comes back ----

/** The pid of the server started with `--id ID` (a child of this process). */
function serverPid(id: string): number {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args.includes(CLI) && args[args.indexOf('--id') + 1] === id) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no server process with --id ${id}`);
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) / 1024;
}

/** Polls until `cond` holds or `ms` pass; resolves with whether it held. */
async function within(ms: number, cond: () => boolean): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    if (cond()) return true;
    await sleep(100);
  }
  return cond();
}

describe('memory held by an incomplete message', () => {
  const ID = 'serval-grpc-stalls-rss';
  const DECLARED = 1_500_000_000;
  const SENT = 400_000_000;
  // Room for the stalled message's admission, not for it and the follow-up request besides.
  const BUDGET = DECLARED + 30_000_000;
  const FOLLOW_UP = 40_000_000;
  let server: ServerHandle;
  let pid: number;
  let client: GrpcClient;

  beforeAll(async () => {
    server = await startServer(repo, [
      '--id',
      ID,
      '--model-control-mode',
      'explicit',
      '--load-model',
      'identity_uint8',
      '--max-inflight-bytes',
      String(BUDGET),
      '--grpc-message-receive-timeout-secs',
      '30',
      '--grpc-message-idle-timeout-secs',
      String(2),
    ]);
    pid = serverPid(ID);
    client = grpcClient(server.grpcAddress);
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await server?.stop();
  });

  const followUp = (size: number) => {
    const data = Buffer.alloc(size, 3);
    return {
      model_name: 'identity_uint8',
      inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, size] }],
      raw_input_contents: [data],
    };
  };

  /** Sends `SENT` bytes of a message declaring `DECLARED` on `path`; resolves with the call once they are in. */
  async function stall(path: string): Promise<RawCall> {
    const call = rawCall(server.grpcPort!, path);
    await call.write(prefix(DECLARED));
    const piece = Buffer.alloc(1 << 20, 9);
    for (let sent = 0; sent < SENT; sent += piece.length) await call.write(piece);
    return call;
  }

  const cases: [string, string, 'close' | 'timeout'][] = [
    ['unary ModelInfer, client closes the connection', INFER, 'close'],
    ['unary ModelInfer, stalled until the idle limit', INFER, 'timeout'],
    ['ModelStreamInfer, client resets the stream', STREAM, 'close'],
    ['ModelStreamInfer, stalled until the idle limit', STREAM, 'timeout'],
  ];
  for (const [name, path, end] of cases) {
    it(`${name}: RSS returns within seconds and the budget is free again`, async () => {
      // The baseline once the previous case's follow-up request has settled.
      let before = rssMiB(pid);
      for (let i = 0; i < 20; i++) {
        await sleep(500);
        const now = rssMiB(pid);
        const stable = Math.abs(now - before) < 5;
        before = now;
        if (stable) break;
      }
      const call = await stall(path);
      // The server holds what arrived (the test measures something).
      expect(await within(5000, () => rssMiB(pid) > before + 300)).toBe(true);
      if (path === INFER) {
        // While the unary message is admitted, a request that needs the budget is refused.
        const e = await client.error('ModelInfer', followUp(FOLLOW_UP));
        expect(e.code).toBe(status.UNAVAILABLE);
        expect(e.details).toMatch(/^Server busy: /);
      }
      if (end === 'close') {
        if (path === INFER) call.session.destroy();
        else call.req.close(http2.constants.NGHTTP2_CANCEL);
      } else {
        expect(statusOf(await call.ended).code).toBe(status.DEADLINE_EXCEEDED);
      }
      const t0 = performance.now();
      const back = await within(5000, () => rssMiB(pid) < before + 100);
      expect(
        back,
        `RSS ${rssMiB(pid).toFixed(0)} MiB, ${before.toFixed(0)} MiB before, after ${(performance.now() - t0).toFixed(0)} ms`,
      ).toBe(true);
      call.session.destroy();
      // Admitted now: the stalled message's bytes are no longer held against the budget.
      const res = await client.call('ModelInfer', followUp(FOLLOW_UP), { deadlineMs: 60_000 });
      expect((res.raw_output_contents[0] as Buffer).length).toBe(FOLLOW_UP);
    }, 60_000);
  }
});
