// receive_timeout.ts on its own: gatherMessages hands grpc-js the same bytes in the same order
// however the client's data is cut into chunks (messages whole, or passed on untouched when over
// the limit), frees a message the stream leaves incomplete, and MessageClock's two limits.
import { EventEmitter } from 'node:events';
import type { ServerHttp2Stream } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { gatherMessages, MessageClock } from '../../src/frontends/grpc/receive_timeout.js';

/** A stand-in for the HTTP/2 stream: what gatherMessages passes on is recorded. */
function fakeStream(): { stream: ServerHttp2Stream; pushed: (Buffer | null)[]; emitter: EventEmitter } {
  const emitter = new EventEmitter();
  const pushed: (Buffer | null)[] = [];
  const stream = Object.assign(emitter, {
    readableLength: 0,
    push(chunk: Buffer | null): boolean {
      pushed.push(chunk === null ? null : Buffer.from(chunk));
      return true;
    },
  });
  return { stream: stream as unknown as ServerHttp2Stream, pushed, emitter };
}

function frame(body: Buffer, flag = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

/** A deterministic pseudo-random generator, so a failing cut can be reproduced. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('gatherMessages', () => {
  it('passes every message on, whole, whatever the chunking; complete ones in a chunk go as they are', () => {
    const random = rng(25);
    for (let round = 0; round < 200; round++) {
      const bodies = Array.from({ length: 1 + Math.floor(random() * 6) }, (_, i) =>
        Buffer.alloc(Math.floor(random() * (random() < 0.2 ? 70_000 : 300)), (round + i) & 0xff),
      );
      const wire = Buffer.concat(bodies.map((b, i) => frame(b, i % 2)));
      const { stream, pushed } = fakeStream();
      gatherMessages(stream, { maxMessage: 1 << 20 });
      for (let at = 0; at < wire.length; ) {
        const n = 1 + Math.floor(random() * (random() < 0.5 ? 8 : 20_000));
        stream.push(wire.subarray(at, at + n));
        at += n;
      }
      stream.push(null);
      expect(pushed.at(-1)).toBeNull();
      const out = pushed.slice(0, -1) as Buffer[];
      expect(Buffer.concat(out).equals(wire)).toBe(true);
      // No chunk ends inside a message: grpc-js never holds a partial one.
      for (let at = 0, i = 0; i < out.length; i++) {
        at += out[i]!.length;
        let boundary = 0;
        while (boundary < at) boundary += 5 + wire.readUInt32BE(boundary + 1);
        expect(boundary).toBe(at);
      }
    }
  });

  it('passes a message over the limit on untouched, from its prefix on, for grpc-js to refuse', () => {
    const { stream, pushed } = fakeStream();
    gatherMessages(stream, { maxMessage: 100 });
    const ok = frame(Buffer.alloc(10, 1));
    const big = frame(Buffer.alloc(300, 2));
    const wire = Buffer.concat([ok, big]);
    stream.push(wire.subarray(0, 17));
    stream.push(wire.subarray(17, 40));
    stream.push(wire.subarray(40));
    expect(Buffer.concat(pushed as Buffer[]).equals(wire)).toBe(true);
    expect(pushed[0]!.equals(ok)).toBe(true);
  });

  it('drops a message the client leaves incomplete: its memory is freed when the stream ends', () => {
    const { stream, pushed, emitter } = fakeStream();
    gatherMessages(stream, { maxMessage: 1 << 30 });
    const wire = frame(Buffer.alloc(1 << 20, 3));
    let held: ArrayBuffer | undefined;
    const alloc = Buffer.allocUnsafeSlow;
    // The gathered message's memory, to see it detached (freed) afterwards.
    Buffer.allocUnsafeSlow = (n: number) => {
      const b = alloc(n);
      held = b.buffer as ArrayBuffer;
      return b;
    };
    try {
      stream.push(wire.subarray(0, 4000));
    } finally {
      Buffer.allocUnsafeSlow = alloc;
    }
    expect(pushed).toEqual([]);
    expect(held?.byteLength).toBe(wire.length);
    emitter.emit('close');
    expect(held?.byteLength).toBe(0);
  });
});

describe('MessageClock', () => {
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('ends an idle message with the idle text, and a trickling one with the whole-message text', async () => {
    const texts: string[] = [];
    const idle = new MessageClock({ messageMs: 10_000, idleMs: 60 }, (t) => texts.push(t));
    idle.progress(1024, 4096);
    await wait(200);
    expect(texts).toEqual([
      'Timed out receiving a request message: no data for 0.06 s with 1024 of its 4096 bytes received (--grpc-message-idle-timeout-secs)',
    ]);
    const trickle = new MessageClock({ messageMs: 150, idleMs: 100 }, (t) => texts.push(t));
    for (let got = 1; texts.length < 2 && got < 40; got++) {
      trickle.progress(got, 4096);
      await wait(30);
    }
    expect(texts[1]).toMatch(
      /^Timed out receiving a request message: \d+ of its 4096 bytes received in 0.15 s \(--grpc-message-receive-timeout-secs\)$/,
    );
  });

  it('times nothing once stopped, while the server is behind, or with both limits 0', async () => {
    const texts: string[] = [];
    const stopped = new MessageClock({ messageMs: 50, idleMs: 50 }, (t) => texts.push(t));
    stopped.progress(1, 10);
    stopped.stop();
    let behind = true;
    const paused = new MessageClock(
      { messageMs: 50, idleMs: 50 },
      (t) => texts.push(t),
      () => behind,
    );
    paused.progress(1, 10);
    const off = new MessageClock({ messageMs: 0, idleMs: 0 }, (t) => texts.push(t));
    off.progress(1, 10);
    await wait(200);
    expect(texts).toEqual([]);
    // Caught up: the limits run again from then on.
    behind = false;
    await wait(200);
    expect(texts).toHaveLength(1);
    expect(texts[0]).toMatch(/^Timed out receiving a request message: no data for 0.05 s with 1 of its 10 bytes received/);
  });
});
