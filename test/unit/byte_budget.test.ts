// The in-flight byte budget (src/kernel/byte_budget.ts) and how HTTP bodies are read against it
// (readBody in src/frontends/http/body.ts): admitted by Content-Length before any byte is kept,
// grown chunk by chunk without one, refused bodies read to their end and dropped.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readBody } from '../../src/frontends/http/body.js';
import { ByteBudget, defaultInflightBytes, memoryLimit } from '../../src/kernel/byte_budget.js';
import { ServalError } from '../../src/kernel/errors.js';

function refusal(fn: () => unknown): ServalError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ServalError);
    return e as ServalError;
  }
  throw new Error('expected a refusal');
}

describe('ByteBudget', () => {
  it('counts admitted bytes until they are released, once', () => {
    const b = new ByteBudget(100);
    const t1 = b.admit(60);
    const t2 = b.admit(40);
    expect(b.inFlight).toBe(100);
    t1.release();
    t1.release();
    expect(b.inFlight).toBe(40);
    t2.release();
    expect(b.inFlight).toBe(0);
  });

  it('refuses a request that does not fit next to the others with UNAVAILABLE, and admits it once they are done', () => {
    const b = new ByteBudget(100);
    const held = b.admit(70);
    const err = refusal(() => b.admit(31));
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.message).toMatch(/^Server busy: 70 bytes of other requests are in flight/);
    expect(err.message).toContain('31 bytes');
    expect(err.message).toContain('--max-inflight-bytes');
    // The refusal took nothing.
    expect(b.inFlight).toBe(70);
    expect(b.admit(30).bytes).toBe(30);
    held.release();
    expect(() => b.admit(31)).not.toThrow();
  });

  it('says when a request is larger than the whole budget', () => {
    const b = new ByteBudget(100);
    const err = refusal(() => b.admit(101));
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.message).toBe(
      "Server busy: the request's 101 bytes exceed the in-flight byte budget of 100 bytes. Use --max-inflight-bytes to increase the budget.",
    );
  });

  it('grows a ticket as a body arrives and releases all it holds', () => {
    const b = new ByteBudget(100);
    const t = b.admit(0);
    t.grow(50);
    t.grow(50);
    expect(t.bytes).toBe(100);
    const err = refusal(() => t.grow(1));
    expect(err.message).toContain("the request's 101 bytes exceed");
    expect(t.bytes).toBe(100);
    t.release();
    expect(b.inFlight).toBe(0);
    // Growing a released ticket holds nothing.
    t.grow(10);
    expect(b.inFlight).toBe(0);
  });

  it('with limit 0 admits everything and still counts it', () => {
    const b = new ByteBudget(0);
    const t = b.admit(Number.MAX_SAFE_INTEGER / 2);
    expect(b.inFlight).toBe(Number.MAX_SAFE_INTEGER / 2);
    t.release();
    expect(b.inFlight).toBe(0);
  });

  it('defaults to a quarter of the memory limit', () => {
    expect(memoryLimit()).toBeGreaterThan(0);
    expect(defaultInflightBytes()).toBe(Math.floor(memoryLimit() / 4));
  });
});

/** Feeds `chunks` through readBody; resolves with its error or body and what the budget held meanwhile. */
function read(
  chunks: Buffer[],
  headers: Record<string, string>,
  limit: number,
  budget?: ByteBudget,
): Promise<{ err: Error | null; body?: Buffer; heldAtEnd: number; ticketBytes: number[] }> {
  const stream = new PassThrough();
  const ticketBytes: number[] = [];
  return new Promise((resolve) => {
    let heldAtEnd = -1;
    stream.on('end', () => (heldAtEnd = budget?.inFlight ?? 0));
    readBody(
      stream,
      headers,
      limit,
      (err, body) => resolve({ err, body, heldAtEnd, ticketBytes }),
      budget &&
        ((n) => {
          ticketBytes.push(n);
          return budget.admit(n);
        }),
    );
    for (const c of chunks) stream.write(c);
    stream.end();
  });
}

describe('readBody with a budget', () => {
  const chunks = [Buffer.from('hello '), Buffer.from('large '), Buffer.from('world')];
  const whole = Buffer.concat(chunks);

  it('admits a body by its Content-Length before reading and returns it whole', async () => {
    const budget = new ByteBudget(1000);
    const r = await read(chunks, { 'content-length': String(whole.length) }, 1000, budget);
    expect(r.err).toBeNull();
    expect(r.body).toEqual(whole);
    expect(r.ticketBytes).toEqual([whole.length]);
    expect(budget.inFlight).toBe(whole.length);
  });

  it('grows the admission chunk by chunk without Content-Length', async () => {
    const budget = new ByteBudget(1000);
    const r = await read(chunks, {}, 1000, budget);
    expect(r.err).toBeNull();
    expect(r.body).toEqual(whole);
    expect(r.ticketBytes).toEqual([0]);
    expect(budget.inFlight).toBe(whole.length);
  });

  it('refuses a body over the budget by its Content-Length, reads it to the end and holds nothing', async () => {
    const budget = new ByteBudget(10);
    const r = await read(chunks, { 'content-length': String(whole.length) }, 1000, budget);
    expect((r.err as ServalError).code).toBe('UNAVAILABLE');
    expect(r.err?.message).toMatch(/^Server busy/);
    expect(r.body).toBeUndefined();
    expect(budget.inFlight).toBe(0);
  });

  it('refuses a chunked body once it outgrows the budget and releases what it held', async () => {
    const budget = new ByteBudget(15);
    const other = budget.admit(5);
    const r = await read(chunks, {}, 1000, budget);
    expect((r.err as ServalError).code).toBe('UNAVAILABLE');
    expect(r.err?.message).toContain("5 bytes of other requests are in flight and this request's 12 bytes");
    expect(budget.inFlight).toBe(5);
    other.release();
  });

  it('still answers an oversized body with the size-limit error, not the budget one', async () => {
    const budget = new ByteBudget(1000);
    const r = await read(chunks, { 'content-length': String(whole.length) }, 8, budget);
    expect((r.err as ServalError).code).toBe('INVALID_ARG');
    expect(r.err?.message).toContain('exceeds the maximum allowed value of 8 bytes');
    expect(budget.inFlight).toBe(0);
  });

  it('returns a body shorter than its Content-Length as what arrived', async () => {
    const r = await read(chunks, { 'content-length': String(whole.length + 5) }, 1000);
    expect(r.err).toBeNull();
    expect(r.body).toEqual(whole);
  });
});
