// Stalled and half-closed HTTP requests (docs/reliability.md), over raw loopback sockets: a body
// that stops or trickles is refused with 408 and its connection closed, its admission against the
// in-flight byte budget released and its memory given back (RSS of a spawned server); a client
// that sends its whole request and then shuts down its sending side still gets its answer.
import { readFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { ByteBudget } from '../../src/kernel/byte_budget.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { identityTestModel, SIMPLE_TEST_MODEL, startTestCore, type TestCore } from '../helpers/test_core.js';

const IDLE_MS = 1000;
const TOTAL_MS = 2500;
const BUDGET = (1 << 30) + (1 << 20);
const SLOW = identityTestModel('slow', 'INT32', [4], 0, { delayMs: 300 });

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Exchange {
  /** Everything the server sent before it closed (or before the deadline). */
  raw: string;
  /** Whether the server closed the connection (FIN or reset) before the deadline. */
  closed: boolean;
  /** ms from connecting to the close. */
  closedAfterMs: number;
  status?: number;
  headers: Record<string, string>;
  body: string;
}

/** A raw connection: what the test writes, and what the server sent until it closed the connection. */
function connect(port: number, deadlineMs = 10_000) {
  const socket = net.connect({ port, host: '127.0.0.1' });
  const start = Date.now();
  let raw = '';
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (raw += d));
  socket.on('error', () => undefined);
  const result = new Promise<Exchange>((resolve) => {
    const timer = setTimeout(() => resolve(parse(raw, false, Date.now() - start)), deadlineMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(parse(raw, true, Date.now() - start));
    });
  });
  return {
    socket,
    write: (data: string | Buffer) => new Promise<void>((r) => socket.write(data, () => r())),
    result,
  };
}

function parse(whole: string, closed: boolean, closedAfterMs: number): Exchange {
  // Interim responses come before the final one: a half-closed client is probed with 100 Continue
  // while its request is unanswered (frontends/http/half_close.ts); nothing else is sent early.
  let raw = whole;
  while (raw.startsWith('HTTP/1.1 1')) {
    expect(raw.startsWith('HTTP/1.1 100 Continue\r\n\r\n'), raw).toBe(true);
    raw = raw.slice('HTTP/1.1 100 Continue\r\n\r\n'.length);
  }
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return { raw, closed, closedAfterMs, headers: {}, body: '' };
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  let body = raw.slice(end + 4);
  if (headers['transfer-encoding'] === 'chunked') {
    let out = '';
    for (let at = 0; ; ) {
      const eol = body.indexOf('\r\n', at);
      const n = Number.parseInt(body.slice(at, eol), 16);
      if (!(n > 0)) break;
      out += body.slice(eol + 2, eol + 2 + n);
      at = eol + 2 + n + 2;
    }
    body = out;
  }
  return { raw, closed, closedAfterMs, status: Number(statusLine!.split(' ')[1]), headers, body };
}

const head = (method: string, path: string, headers: Record<string, string | number>): string =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

function expectTimedOut(r: Exchange, what: 'idle' | 'total', received: string): void {
  expect(r.status, r.raw).toBe(408);
  expect(r.headers.connection).toBe('close');
  const text =
    what === 'idle'
      ? `request body timed out: no data for ${IDLE_MS / 1000} s (--http-body-idle-timeout-secs); ${received}`
      : `request body timed out: not complete after ${TOTAL_MS / 1000} s (--http-body-timeout-secs); ${received}`;
  expect(JSON.parse(r.body)).toEqual({ error: text });
  expect(r.closed).toBe(true);
}

const SIMPLE_INFER = JSON.stringify({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
  ],
});

describe('in process (short limits: idle 1 s, total 2.5 s)', () => {
  let t: TestCore;
  let app: FastifyInstance;
  let port: number;
  const budget = new ByteBudget(BUDGET);

  beforeAll(async () => {
    t = await startTestCore([SIMPLE_TEST_MODEL, SLOW]);
    app = buildHttpServer(t.core, t.log, {
      maxInputSize: 2 ** 31,
      budget,
      bodyTimeouts: { idleMs: IDLE_MS, totalMs: TOTAL_MS },
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await app?.close();
    await t?.close();
  });

  it('Content-Length 100 with 5 bytes sent: 408 naming the idle limit, the connection closed, the budget released', async () => {
    const c = connect(port);
    await c.write(`${head('POST', '/v2/models/simple/infer', { 'content-length': 100 })}{"inp`);
    await expect.poll(() => budget.inFlight).toBe(100);
    const r = await c.result;
    expectTimedOut(r, 'idle', '5 of 100 (Content-Length) bytes received');
    // The infer route's error type, as for every other error it answers.
    expect(r.headers['content-type']).toBe('text/plain');
    expect(r.closedAfterMs).toBeGreaterThanOrEqual(IDLE_MS - 50);
    expect(r.closedAfterMs).toBeLessThan(TOTAL_MS);
    expect(budget.inFlight).toBe(0);
  });

  it('a body trickling slower than the idle limit allows is refused', async () => {
    const c = connect(port);
    await c.write(`${head('POST', '/v2/models/simple/infer', { 'content-length': 50 })}{`);
    await sleep(IDLE_MS / 2);
    await c.write('"');
    await sleep(IDLE_MS * 1.5);
    c.socket.write('i');
    const r = await c.result;
    expectTimedOut(r, 'idle', '2 of 50 (Content-Length) bytes received');
    expect(budget.inFlight).toBe(0);
  });

  it('a body trickling within the idle limit but past the total limit is refused', async () => {
    const c = connect(port);
    await c.write(`${head('POST', '/v2/models/simple/infer', { 'transfer-encoding': 'chunked' })}`);
    let sent = 0;
    const trickle = setInterval(() => {
      if (c.socket.destroyed) return;
      c.socket.write('1\r\n \r\n');
      sent++;
    }, IDLE_MS / 4);
    const r = await c.result;
    clearInterval(trickle);
    expect(sent).toBeGreaterThan(4);
    expect(r.status, r.raw).toBe(408);
    expect(JSON.parse(r.body).error).toMatch(
      /^request body timed out: not complete after 2\.5 s \(--http-body-timeout-secs\); \d+ of an unknown number of bytes received$/,
    );
    expect(r.closed).toBe(true);
    expect(budget.inFlight).toBe(0);
  });

  it('the same limits on every route that reads a body, compressed bodies included', async () => {
    const routes: [string, Record<string, string>][] = [
      ['/v2/repository/models/simple/load', {}],
      ['/v2/systemsharedmemory/region/r/register', {}],
      ['/v2/models/simple/generate', {}],
      ['/v2/models/simple/generate_stream', {}],
      ['/v2/models/simple/infer', { 'content-encoding': 'gzip' }],
      ['/v2/trace/setting', {}],
      ['/v2/no/such/route', {}],
    ];
    const results = await Promise.all(
      routes.map(async ([path, headers]) => {
        const c = connect(port);
        await c.write(`${head('POST', path, { ...headers, 'content-length': 10 })}{`);
        return c.result;
      }),
    );
    for (const r of results) expectTimedOut(r, 'idle', '1 of 10 (Content-Length) bytes received');
    expect(budget.inFlight).toBe(0);
  });

  it('a huge declared body whose client closes mid-way releases its admission at once', async () => {
    const c = connect(port);
    await c.write(`${head('POST', '/v2/models/simple/infer', { 'content-length': 1 << 30 })}${'x'.repeat(100)}`);
    await expect.poll(() => budget.inFlight).toBe(1 << 30);
    // While it holds the budget, a request that needs more than what is left is refused.
    const refused = await fetch(`http://127.0.0.1:${port}/v2/models/simple/infer`, { method: 'POST', body: SIMPLE_INFER.padEnd(2 << 20) });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: string }).error).toMatch(/^Server busy: /);
    c.socket.destroy();
    await expect.poll(() => budget.inFlight, { timeout: IDLE_MS / 2 }).toBe(0);
    const ok = await fetch(`http://127.0.0.1:${port}/v2/models/simple/infer`, { method: 'POST', body: SIMPLE_INFER.padEnd(2 << 20) });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
  });

  it('a client that half-closes mid-body gets no answer and releases its admission', async () => {
    const c = connect(port);
    await c.write(`${head('POST', '/v2/models/simple/infer', { 'content-length': 1000 })}{"inputs"`);
    await expect.poll(() => budget.inFlight).toBe(1000);
    c.socket.end();
    const r = await c.result;
    expect(r.closed).toBe(true);
    expect(r.closedAfterMs).toBeLessThan(IDLE_MS);
    expect(r.status === undefined || r.status === 400, r.raw).toBe(true);
    expect(budget.inFlight).toBe(0);
  });

  it('a whole infer POST, then shutdown of the client side: the full response, then the close', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [4], data: [7, -1, 0, 42] }] });
    const c = connect(port);
    await c.write(`${head('POST', '/v2/models/slow/infer', { 'content-type': 'application/json', 'content-length': body.length })}${body}`);
    c.socket.end();
    const r = await c.result;
    expect(r.status, r.raw).toBe(200);
    expect(JSON.parse(r.body)).toEqual({
      model_name: 'slow',
      model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [4], data: [7, -1, 0, 42] }],
    });
    expect(r.closed).toBe(true);
    expect(budget.inFlight).toBe(0);
  });

  it('a half-closed generate (one response) is answered too', async () => {
    const body = JSON.stringify({ INPUT0: [1, 2, 3, 4] });
    const c = connect(port);
    await c.write(`${head('POST', '/v2/models/slow/generate', { 'content-length': body.length })}${body}`);
    c.socket.end();
    const r = await c.result;
    expect(r.status, r.raw).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ model_name: 'slow', model_version: '1', OUTPUT0: [1, 2, 3, 4] });
  });

  it('a half-closed health GET gets its 200', async () => {
    const c = connect(port);
    await c.write(head('GET', '/v2/health/ready', {}));
    c.socket.end();
    const r = await c.result;
    expect(r.status, r.raw).toBe(200);
    expect(r.closed).toBe(true);
  });

  it('generate_stream: the end of the client side is taken as the client going away (closed, no events)', async () => {
    const body = JSON.stringify({ INPUT0: [1, 2, 3, 4] });
    const c = connect(port);
    await c.write(`${head('POST', '/v2/models/slow/generate_stream', { 'content-length': body.length })}${body}`);
    c.socket.end();
    const r = await c.result;
    expect(r.closed).toBe(true);
    expect(r.raw).not.toContain('data: ');
  });

  it('keeps serving keep-alive connections after all this', async () => {
    const c = connect(port, 1500);
    for (let i = 0; i < 2; i++) {
      await c.write(head('GET', '/v2/health/live', {}));
      await sleep(100);
    }
    const r = await c.result;
    expect(r.closed).toBe(false);
    expect(r.raw.match(/HTTP\/1\.1 200 OK/g)).toHaveLength(2);
    c.socket.destroy();
  });
});

/** The server's resident memory (VmRSS), in bytes. */
function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

describe('a spawned server: memory of a stalled or abandoned body comes back', () => {
  let server: ServerHandle;
  const MB = 1 << 20;
  const SENT = 300 * MB;

  beforeAll(async () => {
    server = await startServer(inject('modelRepository'), [
      '--model-control-mode',
      'explicit',
      '--load-model',
      'simple',
      '--http-max-input-size',
      String(2 ** 31),
      '--http-body-idle-timeout-secs',
      '2',
    ]);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });

  /** Sends 300 MB of a declared 1 GiB body; then `after` (stall or close); RSS must fall back near where it was. */
  async function abandon(after: 'stall' | 'close'): Promise<Exchange> {
    const before = rss(server.pid);
    const c = connect(server.httpPort, 20_000);
    await c.write(head('POST', '/v2/models/simple/infer', { 'content-length': 1 << 30 }));
    const chunk = Buffer.alloc(4 * MB, 'x');
    for (let sent = 0; sent < SENT; sent += chunk.length) await c.write(chunk);
    // The server holds what it received (else this test would prove nothing).
    await expect.poll(() => rss(server.pid) - before, { timeout: 5000 }).toBeGreaterThan(SENT * 0.8);
    if (after === 'close') c.socket.destroy();
    await expect.poll(() => rss(server.pid) - before, { timeout: 6000, interval: 100 }).toBeLessThan(60 * MB);
    return c.result;
  }

  it('stalled: 408 after the idle limit, and the memory is back', async () => {
    const r = await abandon('stall');
    expect(r.status, r.raw.slice(0, 500)).toBe(408);
    expect(JSON.parse(r.body).error).toBe(
      `request body timed out: no data for 2 s (--http-body-idle-timeout-secs); ${SENT} of ${1 << 30} (Content-Length) bytes received`,
    );
    expect(r.closed).toBe(true);
  });

  it('closed mid-body: the memory is back', async () => {
    await abandon('close');
    // And the server serves on.
    const res = await fetch(`${server.url}/v2/models/simple/infer`, { method: 'POST', body: SIMPLE_INFER });
    expect(res.status).toBe(200);
  });
});
