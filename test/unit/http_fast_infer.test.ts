// The lean HTTP/1.1 path for plain inference requests (src/frontends/http/fast_infer.ts): which
// requests it takes, that its answers are byte for byte those of the fastify route, pipelining in
// order, handing a connection to Node's server mid-way, partial requests, a client that leaves,
// and shutdown. Over real sockets (port 0) against a fake core.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseFastRequest } from '../../src/frontends/http/fast_infer.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { ByteBudget } from '../../src/kernel/byte_budget.js';
import type { Cancellation } from '../../src/kernel/cancel.js';
import type { DataType } from '../../src/kernel/datatypes.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';

/** A fake core whose model `echo` answers its inputs as outputs after `delay` ms (a parameter). */
function echoCore() {
  const core = fakeCore();
  const cancelled: InferRequest[] = [];
  // Each request's first input as it arrived (a request's own memory is let go after its answer).
  const seen: Uint8Array[] = [];
  const base = core.infer.bind(core);
  core.infer = (req: InferRequest): Promise<InferResponse> => {
    if (req.modelName !== 'echo') return base(req);
    core.requests.push(req);
    seen.push(Uint8Array.from(req.inputs[0]?.data ?? []));
    const delay = Number(req.parameters.delay ?? 0);
    return new Promise((resolve) => {
      const answer = () =>
        resolve({
          modelName: 'echo',
          modelVersion: '1',
          id: req.id,
          outputs: req.inputs.map((t) => ({
            name: `OUT_${t.name}`,
            datatype: t.datatype as DataType,
            shape: t.shape,
            data: Uint8Array.from(t.data),
          })),
        });
      const timer = setTimeout(answer, delay);
      (req.cancellation as Cancellation | undefined)?.onCancel(() => {
        clearTimeout(timer);
        cancelled.push(req);
      });
    });
  };
  core.isDecoupled = (name: string) => name.startsWith('decoupled_');
  return Object.assign(core, { cancelled, seen });
}

const servers: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  await Promise.allSettled(servers.splice(0).map((s) => s.close()));
});

async function start(fastInfer: boolean, core = echoCore(), budget?: ByteBudget) {
  const app = buildHttpServer(core, capturedLogger().log, { maxInputSize: 1 << 20, fastInfer, ...(budget && { budget }) });
  // Requests that went through fastify (the lean path's never do).
  const routed: string[] = [];
  app.addHook('onRequest', (req, _reply, done) => {
    routed.push(`${req.method} ${req.url}`);
    done();
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  servers.push(app);
  const port = (app.server.address() as net.AddressInfo).port;
  return { app, core, port, routed };
}

function inferRequest(model: string, body: string, extra = ''): string {
  return `POST /v2/models/${model}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

const BODY = JSON.stringify({
  id: 'r1',
  inputs: [{ name: 'A', datatype: 'INT32', shape: [2], data: [1, 2] }],
});
const binaryBody = (): { bytes: Buffer; header: string } => {
  const json = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'A', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } }],
      outputs: [{ name: 'OUT_A', parameters: { binary_data: true } }],
    }),
  );
  return {
    bytes: Buffer.concat([json, Buffer.from(new Float32Array([1.5, -2]).buffer)]),
    header: `Inference-Header-Content-Length: ${json.length}\r\n`,
  };
};

/** Splits HTTP responses out of `buf` (Content-Length bodies; 1xx heads alone). */
function responses(buf: Buffer): string[] {
  const out: string[] = [];
  let at = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', at);
    if (end < 0) return out;
    const head = buf.toString('latin1', at, end);
    const m = /content-length: (\d+)/i.exec(head);
    const len = m ? Number(m[1]) : 0;
    if (buf.length < end + 4 + len) return out;
    out.push(buf.toString('latin1', at, end + 4 + len));
    at = end + 4 + len;
  }
}

/** Sends `parts` (with `gapMs` between them) on one connection and resolves with the first `n` responses. */
function exchange(port: number, parts: Array<string | Buffer>, n: number, gapMs = 0): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    s.on('data', (d) => {
      got = Buffer.concat([got, d]);
      const r = responses(got).filter((x) => !x.startsWith('HTTP/1.1 100'));
      if (r.length >= n) {
        s.destroy();
        resolve(r);
      }
    });
    s.on('error', reject);
    s.on('close', () => reject(new Error(`closed after ${responses(got).length} responses: ${got.toString('latin1')}`)));
    let i = 0;
    const next = () => {
      s.write(parts[i++]!);
      if (i < parts.length) setTimeout(next, gapMs);
    };
    next();
  });
}

const withoutDate = (r: string): string => r.replace(/^Date: .*$/m, 'Date: -');

describe('which requests the lean path takes', () => {
  const take = (text: string | Buffer) => parseFastRequest(Buffer.isBuffer(text) ? text : Buffer.from(text, 'latin1'));

  it('parses a plain inference request, with a version, its headers as received and its body', () => {
    const r = take(`POST /v2/models/m1/versions/3/infer HTTP/1.1\r\nHost: a\r\nX-Trace-Id: 7\r\nContent-Length: 4\r\n\r\nabcdPOST`);
    if (r === 'other' || r === 'partial' || !('req' in r)) throw new Error(`not a whole request: ${JSON.stringify(r)}`);
    const { req, length } = r;
    expect([req.model, req.version, req.url, req.body.toString()]).toEqual(['m1', '3', '/v2/models/m1/versions/3/infer', 'abcd']);
    expect(req.headers['x-trace-id']).toBe('7');
    expect(req.rawHeaders).toEqual(['Host', 'a', 'X-Trace-Id', '7', 'Content-Length', '4']);
    expect(length).toBe(
      Buffer.byteLength(`POST /v2/models/m1/versions/3/infer HTTP/1.1\r\nHost: a\r\nX-Trace-Id: 7\r\nContent-Length: 4\r\n\r\nabcd`),
    );
  });

  it('gives the head of a body over 64 KiB, up to the largest input, for its body to be read on its own', () => {
    const head = `POST /v2/models/m/infer HTTP/1.1\r\nHost: a\r\nContent-Length: ${(64 << 10) + 1}\r\n\r\n`;
    const r = parseFastRequest(Buffer.from(`${head}abc`, 'latin1'), 1 << 20);
    expect(r).toEqual({
      head: {
        url: '/v2/models/m/infer',
        model: 'm',
        version: '',
        headers: { host: 'a', 'content-length': '65537' },
        rawHeaders: ['Host', 'a', 'Content-Length', '65537'],
      },
      headLength: head.length,
      bodyLength: (64 << 10) + 1,
    });
    // Over the largest input: Node's path answers Triton's error.
    expect(parseFastRequest(Buffer.from(head, 'latin1'), 64 << 10)).toBe('other');
  });

  it('waits for the rest of a request that has not all arrived', () => {
    expect(take('POST /v2/models/m/infer HTTP/1.1\r\nContent-Le')).toBe('partial');
    expect(take('POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc')).toBe('partial');
  });

  it.each([
    ['another route', 'GET /v2/models/m HTTP/1.1\r\n\r\n'],
    ['HTTP/1.0', 'POST /v2/models/m/infer HTTP/1.0\r\nContent-Length: 0\r\n\r\n'],
    ['a query string', 'POST /v2/models/m/infer?x=1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n'],
    ['a percent-encoded name', 'POST /v2/models/m%20x/infer HTTP/1.1\r\nContent-Length: 0\r\n\r\n'],
    ['no Content-Length', 'POST /v2/models/m/infer HTTP/1.1\r\n\r\n'],
    ['chunked', 'POST /v2/models/m/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n'],
    ['Expect', 'POST /v2/models/m/infer HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n'],
    ['a compressed body', 'POST /v2/models/m/infer HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n'],
    ['a compressed answer', 'POST /v2/models/m/infer HTTP/1.1\r\nAccept-Encoding: gzip\r\nContent-Length: 0\r\n\r\n'],
    ['Connection: close', 'POST /v2/models/m/infer HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'],
    ['a repeated header', 'POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n'],
    ['a folded header', 'POST /v2/models/m/infer HTTP/1.1\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n'],
    ['a body over 64 KiB (no larger one allowed)', `POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: ${(64 << 10) + 1}\r\n\r\n`],
    ['a head over 16 KiB', `POST /v2/models/m/infer HTTP/1.1\r\nX: ${'a'.repeat(17 << 10)}`],
  ])('leaves %s to Node', (_what, text) => {
    expect(take(text)).toBe('other');
  });
});

describe('the lean path on the wire', () => {
  it('answers byte for byte as the fastify route: JSON, binary, errors, a decoupled model', async () => {
    const fast = await start(true);
    const slow = await start(false);
    const bin = binaryBody();
    const cases: Array<string | Buffer> = [
      inferRequest('echo', BODY),
      Buffer.concat([
        Buffer.from(inferRequest('echo', '', bin.header).replace(/Content-Length: 0/, `Content-Length: ${bin.bytes.length}`)),
        bin.bytes,
      ]),
      inferRequest('echo', '{"inputs": ['),
      inferRequest('missing', BODY),
      inferRequest('decoupled_2', BODY),
      inferRequest('internal', BODY),
    ];
    for (const c of cases) {
      const [a] = await exchange(fast.port, [c], 1);
      const [b] = await exchange(slow.port, [c], 1);
      expect(withoutDate(a!)).toBe(withoutDate(b!));
    }
    expect(fast.routed).toEqual([]);
    expect(slow.routed).toHaveLength(cases.length);
    // The requests reached the core the same way (parameters, ids, inputs).
    const strip = (r: InferRequest) => ({ ...r, cancellation: undefined, ownMemory: undefined });
    expect(fast.core.requests.map(strip)).toEqual(slow.core.requests.map(strip));
  });

  it('answers pipelined requests in their order, whichever finishes first', async () => {
    const { port } = await start(true);
    const slowFirst = inferRequest(
      'echo',
      JSON.stringify({ id: 'first', parameters: { delay: 60 }, inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [1] }] }),
    );
    const quick = inferRequest('echo', JSON.stringify({ id: 'second', inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [2] }] }));
    const r = await exchange(port, [slowFirst + quick], 2);
    expect(r.map((x) => /"id":"(\w+)"/.exec(x)?.[1])).toEqual(['first', 'second']);
  });

  it('keeps at most 32 requests of a connection in flight, and answers all of a long pipeline in order', async () => {
    const core = echoCore();
    let inFlight = 0;
    let most = 0;
    const echo = core.infer;
    core.infer = async (req) => {
      most = Math.max(most, ++inFlight);
      try {
        return await echo(req);
      } finally {
        inFlight--;
      }
    };
    const { port } = await start(true, core);
    const reqs = Array.from({ length: 100 }, (_, i) =>
      inferRequest(
        'echo',
        JSON.stringify({ id: `n${i}`, parameters: { delay: 5 }, inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [i] }] }),
      ),
    );
    const r = await exchange(port, [reqs.join('')], 100);
    expect(r.map((x) => /"id":"(\w+)"/.exec(x)?.[1])).toEqual(reqs.map((_, i) => `n${i}`));
    expect(most).toBe(32);
  });

  it('hands the connection to Node at the first other request, in order, also mid-pipeline', async () => {
    const { port, routed } = await start(true);
    const get = 'GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n';
    const delayed = inferRequest(
      'echo',
      JSON.stringify({ id: 'a', parameters: { delay: 40 }, inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [1] }] }),
    );
    const r = await exchange(port, [delayed + get + inferRequest('echo', BODY)], 3);
    expect(r[0]).toMatch(/"id":"a"/);
    expect(r[1]).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*\{"ready":true\}$/);
    expect(r[2]).toMatch(/"id":"r1"/);
    // Node's server served what came after the lean path's first request.
    expect(routed).toEqual(['GET /v2/health/ready', 'POST /v2/models/echo/infer']);
    // Then one at a time on the same connection.
    const r2 = await exchange(port, [inferRequest('echo', BODY), get, inferRequest('echo', BODY)], 3, 20);
    expect(r2.map((x) => x.split('\r\n')[0])).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
  });

  it('takes a request that arrives in pieces, and leaves one that stalls to Node', async () => {
    const { port, core, routed } = await start(true);
    const req = inferRequest('echo', BODY);
    const split = [req.slice(0, 30), req.slice(30, 90), req.slice(90)];
    expect((await exchange(port, split, 1, 5))[0]).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(routed).toEqual([]);
    // 200 ms between the pieces: past the lean path's wait, Node's server reads the rest.
    expect((await exchange(port, split, 1, 200))[0]).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(routed).toEqual(['POST /v2/models/echo/infer']);
    expect(core.requests).toHaveLength(2);
  });

  it('reads a body over 64 KiB into one buffer as it arrives: answers as the fastify route, pipelined or in pieces', async () => {
    const fast = await start(true);
    const slow = await start(false);
    const values = new Float32Array(40_000).map((_, i) => i * 0.5 - 7);
    const json = Buffer.from(
      JSON.stringify({
        id: 'big',
        inputs: [{ name: 'A', datatype: 'FP32', shape: [values.length], parameters: { binary_data_size: values.byteLength } }],
        outputs: [{ name: 'OUT_A', parameters: { binary_data: true } }],
      }),
    );
    const body = Buffer.concat([json, Buffer.from(values.buffer)]);
    const big = Buffer.concat([
      Buffer.from(
        `POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: ${json.length}\r\nContent-Length: ${body.length}\r\n\r\n`,
      ),
      body,
    ]);
    const [a] = await exchange(fast.port, [big], 1);
    const [b] = await exchange(slow.port, [big], 1);
    expect(withoutDate(a!)).toBe(withoutDate(b!));
    expect(fast.core.seen[0]).toEqual(new Uint8Array(values.buffer));
    // After a small request, and followed by one, all in one write; then in pieces with short gaps.
    const small = inferRequest('echo', BODY);
    const r = await exchange(fast.port, [Buffer.concat([Buffer.from(small), big, Buffer.from(small)])], 3);
    expect(r.map((x) => /"id":"(\w+)"/.exec(x)?.[1])).toEqual(['r1', 'big', 'r1']);
    const pieces = [big.subarray(0, 40), big.subarray(40, 100_000), big.subarray(100_000), Buffer.from(small)];
    const r2 = await exchange(fast.port, pieces, 2, 5);
    expect(withoutDate(r2[0]!)).toBe(withoutDate(b!));
    expect(fast.routed).toEqual([]);
    expect(fast.core.seen.map((d) => d.byteLength)).toEqual([160_000, 8, 160_000, 8, 160_000, 8]);
  });

  it('leaves a large body that stalls, or that the byte budget refuses, to Node, which answers it', async () => {
    const { port, core, routed } = await start(true);
    const values = new Uint8Array(100_000).map((_, i) => i % 251);
    const body = JSON.stringify({ id: 'slow', inputs: [{ name: 'A', datatype: 'UINT8', shape: [values.length], data: [...values] }] });
    const req = inferRequest('echo', body);
    // A pause of 200 ms mid-body: past the lean path's wait.
    const r = await exchange(port, [req.slice(0, 150_000), req.slice(150_000)], 1, 200);
    expect(r[0]).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*"id":"slow"/);
    expect(routed).toEqual(['POST /v2/models/echo/infer']);
    expect(core.seen[0]).toEqual(values);

    // A budget smaller than the body: the same refusal as Node's path gives.
    const budgeted = await start(true, echoCore(), new ByteBudget(100_000));
    const plain = await start(false, echoCore(), new ByteBudget(100_000));
    const [x] = await exchange(budgeted.port, [req], 1);
    const [y] = await exchange(plain.port, [req], 1);
    expect(x).toMatch(/^HTTP\/1\.1 503 Service Unavailable[\s\S]*exceed the in-flight byte budget of 100000 bytes/);
    expect(withoutDate(x!)).toBe(withoutDate(y!));
    expect(budgeted.routed).toEqual(['POST /v2/models/echo/infer']);
  });

  it('hands a stalled large body to Node with its admission: what would not fit beside it is refused meanwhile', async () => {
    const budget = new ByteBudget(300_000);
    const { port, routed } = await start(true, echoCore(), budget);
    const values = new Uint8Array(50_000).map((_, i) => i % 7);
    const req = inferRequest(
      'echo',
      JSON.stringify({ id: 'held', inputs: [{ name: 'A', datatype: 'UINT8', shape: [values.length], data: [...values] }] }),
    );
    const bodyLength = Number(/Content-Length: (\d+)/.exec(req)![1]);
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (d) => {
      got += d.toString('latin1');
    });
    s.write(req.slice(0, 60_000));
    // Past the lean path's wait: Node's route reads the body now, still admitted.
    await new Promise((r) => setTimeout(r, 200));
    expect(routed).toEqual(['POST /v2/models/echo/infer']);
    expect(budget.inFlight).toBe(bodyLength);
    const other = inferRequest(
      'echo',
      JSON.stringify({ inputs: [{ name: 'A', datatype: 'UINT8', shape: [1], data: ['x'.repeat(200_000)] }] }),
    );
    const [refused] = await exchange(port, [other], 1);
    expect(refused).toMatch(/^HTTP\/1\.1 503 [\s\S]*bytes of other requests are in flight/);
    s.write(req.slice(60_000));
    for (let i = 0; i < 100 && !/"id":"held"/.test(got); i++) await new Promise((r) => setTimeout(r, 10));
    expect(got).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*"id":"held"/);
    s.destroy();
    for (let i = 0; i < 100 && budget.inFlight > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(budget.inFlight).toBe(0);
  });

  it('cancels the requests of a client that leaves before its answers', async () => {
    const { port, core } = await start(true);
    const s = net.connect(port, '127.0.0.1');
    s.write(
      inferRequest(
        'echo',
        JSON.stringify({ parameters: { delay: 10_000 }, inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [1] }] }),
      ),
    );
    await new Promise((r) => setTimeout(r, 50));
    expect(core.requests).toHaveLength(1);
    s.destroy();
    // Its end looks like a half-close until a write draws a reset (the probes, 50 ms apart).
    for (let i = 0; i < 50 && core.cancelled.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(core.cancelled).toHaveLength(1);
  });

  it('answers a client that shut its sending side, then closes', async () => {
    const { port } = await start(true);
    const got = await new Promise<string>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      let text = '';
      s.on('data', (d) => {
        text += d.toString('latin1');
      });
      s.on('end', () => resolve(text));
      s.end(
        inferRequest(
          'echo',
          JSON.stringify({ parameters: { delay: 20 }, inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [1] }] }),
        ),
      );
    });
    expect(got).toMatch(/^HTTP\/1\.1 200 OK/);
  });

  it('closes an idle connection at shutdown, and a busy one after its answer, marked Connection: close', async () => {
    const core = echoCore();
    let accepting = true;
    core.isAccepting = () => accepting;
    const { app, port } = await start(true, core);
    const idle = net.connect(port, '127.0.0.1');
    await exchange(port, [inferRequest('echo', BODY)], 1);
    const busy = net.connect(port, '127.0.0.1');
    let text = '';
    busy.on('data', (d) => {
      text += d.toString('latin1');
    });
    const busyClosed = new Promise((r) => busy.on('close', r));
    const idleClosed = new Promise((r) => idle.on('close', r));
    busy.write(
      inferRequest(
        'echo',
        JSON.stringify({ parameters: { delay: 80 }, inputs: [{ name: 'A', datatype: 'INT32', shape: [1], data: [1] }] }),
      ),
    );
    await new Promise((r) => setTimeout(r, 30));
    accepting = false;
    const closed = app.close();
    await Promise.all([closed, busyClosed, idleClosed]);
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*connection: close\r\n/);
    expect(text).not.toMatch(/Keep-Alive/);
  });
});
