// Large requests end to end on identity_uint8 (ONNX Runtime): byte-exact round trips above the
// size where an instance arena serves one execution only (channel.ts LARGE_ARENA) mixed with
// small ones on the same instance, over HTTP binary and gRPC; and the in-flight byte budget
// (--max-inflight-bytes): a request over it is refused with 503 / UNAVAILABLE while a request
// that is still uploading holds its bytes, and other clients keep being served.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { openInferStream } from '../helpers/grpc_stream.js';
import { request, splitBinaryResponse } from '../helpers/http.js';
import { type ServerHandle, startServer } from '../helpers/server.js';

const repo = inject('modelRepository');
const MODEL = 'identity_uint8';
const BUDGET = 50_000_000;
let server: ServerHandle;
let grpc: GrpcClient;

beforeAll(async () => {
  server = await startServer(repo, [
    '--model-control-mode',
    'explicit',
    '--load-model',
    MODEL,
    '--http-max-input-size',
    String(128 << 20),
    '--max-inflight-bytes',
    String(BUDGET),
  ]);
  grpc = grpcClient(server.grpcAddress);
}, 120_000);

afterAll(async () => {
  grpc?.close();
  await server?.stop();
});

/** A payload whose every byte depends on its position and on `seed`, so a misplaced or stale byte shows. */
function payload(size: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(size + 4);
  for (let i = 0; i < size; i += 4) b.writeUInt32LE((Math.imul(i + 1, 2654435761) ^ seed) >>> 0, i);
  return b.subarray(0, size);
}

function binaryHeader(size: number): Buffer {
  return Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, size], parameters: { binary_data_size: size } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }),
  );
}

async function httpInfer(data: Buffer): Promise<{ status: number; text: string; out?: Buffer }> {
  const header = binaryHeader(data.length);
  const res = await request(server.url, 'POST', `/v2/models/${MODEL}/infer`, {
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': header.length },
    body: Buffer.concat([header, data]),
    timeoutMs: 60_000,
  });
  if (res.status !== 200) return { status: res.status, text: res.text() };
  const { binary } = splitBinaryResponse(res.body, Number(res.headers['inference-header-content-length']));
  return { status: 200, text: '', out: binary.get('OUTPUT0') };
}

const grpcRequest = (data: Buffer) => ({
  model_name: MODEL,
  inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, data.length] }],
  raw_input_contents: [data],
});

async function grpcInfer(data: Buffer): Promise<Buffer> {
  const res = await grpc.call('ModelInfer', grpcRequest(data), { deadlineMs: 60_000 });
  return res.raw_output_contents[0] as Buffer;
}

/** A binary request that sends its header and `sent` bytes, then waits: its Content-Length is admitted meanwhile. */
function slowUpload(data: Buffer, sent: number): { finish(): Promise<{ status: number; body: Buffer; headerLength: number }> } {
  const header = binaryHeader(data.length);
  const url = new URL(server.url);
  let resolveRes: (r: { status: number; body: Buffer; headerLength: number }) => void = () => {};
  let rejectRes: (e: Error) => void = () => {};
  const done = new Promise<{ status: number; body: Buffer; headerLength: number }>((res, rej) => {
    resolveRes = res;
    rejectRes = rej;
  });
  const req = http.request(
    {
      host: url.hostname,
      port: url.port,
      method: 'POST',
      path: `/v2/models/${MODEL}/infer`,
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': header.length,
        'content-length': header.length + data.length,
      },
    },
    (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () =>
        resolveRes({
          status: res.statusCode ?? 0,
          body: Buffer.concat(parts),
          headerLength: Number(res.headers['inference-header-content-length']),
        }),
      );
    },
  );
  req.on('error', rejectRes);
  req.write(header);
  req.write(data.subarray(0, sent));
  return {
    finish: () => {
      req.end(data.subarray(sent));
      return done;
    },
  };
}

describe('large requests', () => {
  it('round-trip byte-exact over HTTP binary and gRPC, mixed with small ones on the same instance', async () => {
    // Large, small, large again: the large ones go through a one-off arena that the slot then
    // gives up; the small ones after them must see neither stale nor missing memory.
    const sizes = [20 << 20, 1000, 33 << 20, 4096, (17 << 20) + 5];
    for (const [i, size] of sizes.entries()) {
      const data = payload(size, i + 1);
      const viaHttp = await httpInfer(data);
      expect(viaHttp.status, viaHttp.text).toBe(200);
      expect(viaHttp.out?.length).toBe(size);
      expect(viaHttp.out!.equals(data), `HTTP round trip of ${size} bytes`).toBe(true);
      const other = payload(size, 100 + i);
      const viaGrpc = await grpcInfer(other);
      expect(viaGrpc.length).toBe(size);
      expect(viaGrpc.equals(other), `gRPC round trip of ${size} bytes`).toBe(true);
    }
  }, 120_000);
});

describe('the in-flight byte budget', () => {
  it('refuses a request larger than the whole budget with 503 / UNAVAILABLE and Serval’s text', async () => {
    const data = payload(BUDGET + 1000, 7);
    const viaHttp = await httpInfer(data);
    expect(viaHttp.status).toBe(503);
    const size = binaryHeader(data.length).length + data.length;
    expect(JSON.parse(viaHttp.text)).toEqual({
      error: `Server busy: the request's ${size} bytes exceed the in-flight byte budget of ${BUDGET} bytes. Use --max-inflight-bytes to increase the budget.`,
    });
    const e = await grpc.error('ModelInfer', grpcRequest(data));
    expect(e.code).toBe(status.UNAVAILABLE);
    // Unary calls are admitted by their message's length (raw bytes plus the protobuf around them)
    // before any of it is read; a stream's requests by their raw bytes once read.
    const unary =
      /^Server busy: the request's (\d+) bytes exceed the in-flight byte budget of (\d+) bytes\. Use --max-inflight-bytes to increase the budget\.$/.exec(
        e.details,
      );
    expect(Number(unary?.[1])).toBeGreaterThan(data.length);
    expect(Number(unary?.[1])).toBeLessThan(data.length + 200);
    expect(Number(unary?.[2])).toBe(BUDGET);
    const text = `Server busy: the request's ${data.length} bytes exceed the in-flight byte budget of ${BUDGET} bytes. Use --max-inflight-bytes to increase the budget.`;
    // Over a stream: that request's error, and the next request on the same stream is served.
    const stream = openInferStream(server.grpcAddress);
    try {
      const small = payload(1000, 8);
      stream.send({ ...grpcRequest(data), id: 'big' });
      stream.send({ ...grpcRequest(small), id: 'small' });
      const [big, ok] = await stream.waitFor(2, 60_000);
      expect(big!.error_message).toBe(text);
      expect(big!.infer_response?.id).toBe('big');
      expect(ok!.error_message).toBe('');
      expect(ok!.infer_response?.raw_output_contents[0]?.equals(small)).toBe(true);
    } finally {
      stream.close();
    }
  }, 60_000);

  it('refuses a request that does not fit next to one in flight, while small requests and the one in flight succeed', async () => {
    const held = payload(30_000_000, 11);
    const upload = slowUpload(held, 1 << 20);
    const second = payload(25_000_000, 12);
    // The upload is admitted by its Content-Length as soon as its body starts: wait for that.
    let refused: { status: number; text: string } | undefined;
    for (let attempt = 0; attempt < 50 && !refused; attempt++) {
      const r = await httpInfer(second);
      if (r.status === 503) refused = r;
      else await new Promise((res) => setTimeout(res, 100));
    }
    expect(refused?.status).toBe(503);
    expect(JSON.parse(refused!.text).error).toMatch(
      /^Server busy: \d+ bytes of other requests are in flight and this request's \d+ bytes would exceed the in-flight byte budget of 50000000 bytes/,
    );
    const e = await grpc.error('ModelInfer', grpcRequest(second));
    expect(e.code).toBe(status.UNAVAILABLE);
    expect(e.details).toMatch(/^Server busy: \d+ bytes of other requests are in flight/);

    // Other clients keep being served meanwhile, over both protocols.
    const small = payload(10_000, 13);
    const ok = await httpInfer(small);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.out!.equals(small)).toBe(true);
    expect((await grpcInfer(small)).equals(small)).toBe(true);

    // The held request completes, and its bytes are free again afterwards.
    const res = await upload.finish();
    expect(res.status, res.body.subarray(0, 300).toString()).toBe(200);
    const { binary } = splitBinaryResponse(res.body, res.headerLength);
    expect(binary.get('OUTPUT0')!.equals(held)).toBe(true);
    // Released when its response has gone out, which the server notices just after the client has it.
    let after = await httpInfer(second);
    for (let attempt = 0; attempt < 20 && after.status === 503; attempt++) {
      await new Promise((res) => setTimeout(res, 50));
      after = await httpInfer(second);
    }
    expect(after.status, after.text).toBe(200);
    expect(after.out!.equals(second)).toBe(true);
  }, 120_000);
});
