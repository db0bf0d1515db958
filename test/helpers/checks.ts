// Shared assertions: "the server still answers a good request correctly", and the readiness
// answers of a server that serves `simple` (version 1 only).
import { expect } from 'vitest';
import type { GrpcClient } from './grpc.js';
import { decodeResponse, inferBinary, inferJson } from './http.js';
import { simpleJsonInputs } from './simple.js';
import { range, rawOf, rng, valuesOf } from './tensors.js';

let seed = 1;

function int32Pair(): { a: number[]; b: number[] } {
  const r = rng(seed++);
  const v = (): number => Math.floor(r() * 2000) - 1000;
  return { a: range(16, v), b: range(16, v) };
}

/** One JSON and one binary inference on `simple`, checked element by element. */
export async function expectSimpleWorks(url: string): Promise<void> {
  const { a, b } = int32Pair();
  const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs(a, b) });
  expect(res.status, res.text()).toBe(200);
  const doc = res.json();
  const out = Object.fromEntries(doc.outputs.map((o: { name: string; data: number[] }) => [o.name, o.data]));
  expect(out.OUTPUT0).toEqual(a.map((x, i) => x + b[i]!));
  expect(out.OUTPUT1).toEqual(a.map((x, i) => x - b[i]!));

  const bin = await inferBinary(
    url,
    'simple',
    [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', b) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
    ],
    { binaryOutput: true },
  );
  expect(bin.status, bin.text()).toBe(200);
  const d = decodeResponse(bin);
  const o0 = d.outputs.find((o) => o.name === 'OUTPUT0')!;
  expect(valuesOf('INT32', o0.raw!)).toEqual(b.map((x, i) => x + a[i]!));
}

/** ServerLive, ServerReady and ModelReady over gRPC: the server is ready, and so is `simple` version 1 (only). */
export async function expectGrpcReady(client: GrpcClient): Promise<void> {
  expect(await client.call('ServerLive', {})).toEqual({ live: true });
  expect(await client.call('ServerReady', {})).toEqual({ ready: true });
  expect(await client.call('ModelReady', { name: 'simple', version: '' })).toEqual({ ready: true });
  expect(await client.call('ModelReady', { name: 'simple', version: '1' })).toEqual({ ready: true });
  expect(await client.call('ModelReady', { name: 'simple', version: '3' })).toEqual({ ready: false });
  expect(await client.call('ModelReady', { name: 'nope', version: '' })).toEqual({ ready: false });
}
