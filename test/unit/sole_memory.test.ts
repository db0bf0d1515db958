// Output memory that is one response's alone (kernel/memory.ts: a Python model's outputs read for
// one request) is freed by whoever sends that response, once its bytes are out; memory nobody
// marked, or that something else keeps (an ensemble's later steps, a sequence's state), is not.
import { describe, expect, it } from 'vitest';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { freeSent, keepMemory, soleResponseMemory } from '../../src/kernel/memory.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';
import { splitBinaryResponse } from '../helpers/http.js';

const bytes = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff);

describe('freeSent', () => {
  it('frees only memory marked as one response’s, once, and not memory something else keeps', () => {
    const marked = bytes(1000, 1);
    const unmarked = bytes(1000, 2);
    const kept = bytes(1000, 3);
    soleResponseMemory(marked.buffer);
    soleResponseMemory(kept.buffer);
    keepMemory(kept.buffer);
    freeSent([marked, unmarked, kept]);
    expect(marked.buffer.byteLength).toBe(0);
    expect(unmarked.byteLength).toBe(1000);
    expect(kept.byteLength).toBe(1000);
    // Already freed: a second call is harmless.
    expect(() => freeSent([marked])).not.toThrow();
  });
});

describe('the HTTP infer route', () => {
  /** A core whose one model answers with two binary outputs of `n` bytes, their memory marked as the response's. */
  function soleCore(n: number) {
    const core = fakeCore();
    const answered: InferResponse[] = [];
    core.infer = (req: InferRequest): Promise<InferResponse> => {
      const outputs = [0, 1].map((i) => ({ name: `OUT${i}`, datatype: 'UINT8' as const, shape: [n], data: bytes(n, i) }));
      for (const o of outputs) soleResponseMemory(o.data.buffer);
      const res = { modelName: req.modelName, modelVersion: '1', id: req.id, outputs };
      answered.push(res);
      return Promise.resolve(res);
    };
    return { core, answered };
  }

  for (const [what, n] of [
    ['copied into the body: at once', 1000],
    ['streamed chunk by chunk: once written', 1 << 20],
  ] as const) {
    it(`frees the response’s own output memory when its bytes are ${what}`, async () => {
      const { core, answered } = soleCore(n);
      const app = buildHttpServer(core, capturedLogger().log, { maxInputSize: 1 << 20 });
      try {
        const res = await app.inject({
          method: 'POST',
          url: '/v2/models/m/infer',
          payload: JSON.stringify({ inputs: [], parameters: { binary_data_output: true } }),
          headers: { 'content-type': 'application/json' },
        });
        expect(res.statusCode, res.body).toBe(200);
        const { binary } = splitBinaryResponse(res.rawPayload, Number(res.headers['inference-header-content-length']));
        expect(Buffer.from(binary.get('OUT0')!).equals(Buffer.from(bytes(n, 0)))).toBe(true);
        expect(Buffer.from(binary.get('OUT1')!).equals(Buffer.from(bytes(n, 1)))).toBe(true);
        expect(answered[0]!.outputs.map((o) => o.data.buffer.byteLength)).toEqual([0, 0]);
      } finally {
        await app.close();
      }
    });
  }
});
