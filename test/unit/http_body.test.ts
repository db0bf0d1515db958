// HTTP request bodies in-process: Triton's raw binary requests (Inference-Header-Content-Length: 0)
// over a real core on the test backend, and --http-max-input-size on raw and on inflated bodies
// (src/frontends/http/body.ts), gzip bombs included.
import zlib from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decompress } from '../../src/frontends/http/body.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { capturedLogger } from '../helpers/frontends.js';
import { splitBinaryResponse } from '../helpers/http.js';
import { identityTestModel, SIMPLE_TEST_MODEL, startTestCore, type TestCore, type TestModel } from '../helpers/test_core.js';

type Reply = Awaited<ReturnType<FastifyInstance['inject']>>;

/** Like Triton's onnx_zero_1_float32: FP32 [-1], batching. */
const FP32_VAR = identityTestModel('fp32_var', 'FP32', [-1], 8);
/** Fixed dims, no batching. */
const FP32_FIXED = identityTestModel('fp32_fixed', 'FP32', [2, 2], 0);
/** Two variable dims: the raw input's shape cannot be deduced. */
const FP32_TWO_VAR = identityTestModel('fp32_two_var', 'FP32', [-1, -1], 8);

function bytesModel(name: string, dims: number[]): TestModel {
  const io = (t: string) => ({ name: t, datatype: 'BYTES' as const, rawType: 'BYTES' as const, dims: [-1, ...dims] });
  const tensor = (t: string) => `[ { name: "${t}" data_type: TYPE_STRING dims: [ ${dims.join(', ')} ] } ]`;
  return {
    name,
    config: [
      `name: "${name}"`,
      'backend: "serval_test"',
      'max_batch_size: 8',
      `input ${tensor('INPUT0')}`,
      `output ${tensor('OUTPUT0')}`,
    ].join('\n'),
    model: { op: 'identity', inputs: [io('INPUT0')], outputs: [io('OUTPUT0')] },
  };
}
const BYTES_ONE = bytesModel('bytes_one', [1]);
const BYTES_VAR = bytesModel('bytes_var', [-1]);

const RAW = { 'inference-header-content-length': '0' };
const tag = '[request id: <id_unknown>] ';
const ADVICE = 'Use --http-max-input-size to increase the limit.';

function expectError(res: Reply, status: number, message: string): void {
  expect(res.statusCode, res.body).toBe(status);
  // Triton's types: text/plain for an infer route's errors, application/json for the rest (no charset).
  expect(res.headers['content-type']).toMatch(/^(application\/json|text\/plain)$/);
  expect(res.json<{ error: string }>().error).toBe(message);
}

const f32 = (...v: number[]): Buffer => Buffer.from(new Float32Array(v).buffer);

describe('raw binary requests (Inference-Header-Content-Length: 0)', () => {
  let t: TestCore;
  let app: FastifyInstance;
  let lines: string[];
  beforeAll(async () => {
    t = await startTestCore([FP32_VAR, FP32_FIXED, FP32_TWO_VAR, SIMPLE_TEST_MODEL, BYTES_ONE, BYTES_VAR]);
    const logged = capturedLogger();
    lines = logged.lines;
    app = buildHttpServer(t.core, logged.log, { maxInputSize: 1 << 20 });
  });
  afterAll(async () => {
    // Refusals are answers, not faults: nothing was logged.
    expect(lines).toEqual([]);
    await app?.close();
    await t?.close();
  });

  const raw = (model: string, body: Buffer, headers: Record<string, string> = {}) =>
    app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, headers: { ...RAW, ...headers }, body });

  it('takes the body as the only input: batch 1, the variable dim from the byte count; outputs come back binary', async () => {
    const data = f32(0, 1, 2, 3, 4, 5, 6, 7);
    const res = await raw('fp32_var', data);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('application/octet-stream');
    const headerLength = Number(res.headers['inference-header-content-length']);
    const { doc, binary } = splitBinaryResponse(res.rawPayload, headerLength);
    expect(doc).toEqual({
      model_name: 'fp32_var',
      model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 8], parameters: { binary_data_size: 32 } }],
    });
    expect(binary.get('OUTPUT0')!.equals(data)).toBe(true);
  });

  it('uses the config dims as they are when none is variable (no batch dim without batching)', async () => {
    const data = f32(1, 2, 3, 4);
    const res = await raw('fp32_fixed', data);
    expect(res.statusCode, res.body).toBe(200);
    const { doc, binary } = splitBinaryResponse(res.rawPayload, Number(res.headers['inference-header-content-length']));
    expect(doc.outputs[0]).toMatchObject({ shape: [2, 2] });
    expect(binary.get('OUTPUT0')!.equals(data)).toBe(true);
    // The wrong number of bytes fails the usual byte-size check.
    expectError(
      await raw('fp32_fixed', f32(1, 2, 3)),
      400,
      `${tag}input byte size mismatch for input 'INPUT0' for model 'fp32_fixed'. Expected 16, got 12`,
    );
  });

  it('rounds a variable dim down like Triton, so a partial element fails the byte-size check', async () => {
    expectError(
      await raw('fp32_var', Buffer.alloc(10)),
      400,
      `${tag}input byte size mismatch for input 'INPUT0' for model 'fp32_var'. Expected 8, got 10`,
    );
  });

  it('accepts a gzip-compressed raw body', async () => {
    const data = f32(9, 8, 7);
    const res = await raw('fp32_var', zlib.gzipSync(data), { 'content-encoding': 'gzip' });
    expect(res.statusCode, res.body).toBe(200);
    const { binary } = splitBinaryResponse(res.rawPayload, Number(res.headers['inference-header-content-length']));
    expect(binary.get('OUTPUT0')!.equals(data)).toBe(true);
  });

  it('BYTES: one element of shape [1], its length prepended as Triton does', async () => {
    const res = await raw('bytes_one', Buffer.from('427'));
    expect(res.statusCode, res.body).toBe(200);
    const { doc, binary } = splitBinaryResponse(res.rawPayload, Number(res.headers['inference-header-content-length']));
    expect(doc.outputs[0]).toMatchObject({ datatype: 'BYTES', shape: [1, 1] });
    const out = binary.get('OUTPUT0')!;
    expect(out.readUInt32LE(0)).toBe(3);
    expect(out.subarray(4).toString()).toBe('427');
    expectError(
      await raw('bytes_var', Buffer.from('427')),
      400,
      `${tag}For BYTE datatype raw input 'INPUT0', the model must have input shape [1]`,
    );
  });

  it('refuses models it cannot deduce the input for, with Triton’s texts', async () => {
    expectError(
      await raw('simple', Buffer.alloc(64)),
      400,
      `${tag}Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' model configuration`,
    );
    expectError(
      await raw('fp32_two_var', f32(1, 2, 3, 4)),
      400,
      `${tag}The shape of the raw input 'INPUT0' can not be deduced because there are more than one variable-sized dimension`,
    );
    expectError(await raw('nope', f32(1)), 404, "Request for unknown model: 'nope' is not found");
  });
});

describe('--http-max-input-size on raw and on inflated bodies', () => {
  const LIMIT = 1 << 20;
  let t: TestCore;
  let app: FastifyInstance;
  beforeAll(async () => {
    t = await startTestCore([FP32_VAR]);
    app = buildHttpServer(t.core, capturedLogger().log, { maxInputSize: LIMIT });
  });
  afterAll(async () => {
    await app?.close();
    await t?.close();
  });

  const infer = (body: Buffer, headers: Record<string, string>) =>
    app.inject({ method: 'POST', url: '/v2/models/fp32_var/infer', headers, body });

  it('a raw request over the limit: Triton’s raw-input text; at the limit it is served', async () => {
    expectError(
      await infer(Buffer.alloc(LIMIT + 4), RAW),
      400,
      `Raw input has a byte_size (${LIMIT + 4} bytes) that exceeds the maximum allowed value of ${LIMIT} bytes. ${ADVICE}`,
    );
    const ok = await infer(Buffer.alloc(LIMIT), RAW);
    expect(ok.statusCode).toBe(200);
  });

  it('a compressed body that inflates past the limit is refused; one that inflates to exactly the limit is served', async () => {
    const over = zlib.gzipSync(Buffer.alloc(LIMIT + 4));
    expectError(
      await infer(over, { ...RAW, 'content-encoding': 'gzip' }),
      400,
      `Decompressed request body exceeds the maximum allowed value of ${LIMIT} bytes. ${ADVICE}`,
    );
    const exact = zlib.deflateSync(Buffer.alloc(LIMIT));
    expect((await infer(exact, { ...RAW, 'content-encoding': 'deflate' })).statusCode).toBe(200);
  });

  it('a gzip bomb (100 MB of zeros in ~100 KB) is refused against a 1 MB limit, for JSON and raw requests alike', async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(100 * 1024 * 1024), { level: 9 });
    expect(bomb.byteLength).toBeLessThan(LIMIT);
    const text = `Decompressed request body exceeds the maximum allowed value of ${LIMIT} bytes. ${ADVICE}`;
    expectError(await infer(bomb, { 'content-type': 'application/json', 'content-encoding': 'gzip' }), 400, text);
    expectError(await infer(bomb, { ...RAW, 'content-encoding': 'gzip' }), 400, text);
    // The repository API reads its JSON body the same way.
    const load = await app.inject({ method: 'POST', url: '/v2/repository/index', headers: { 'content-encoding': 'gzip' }, body: bomb });
    expectError(load, 400, text);
  });
});

describe('decompress (body.ts)', () => {
  const LIMIT = 1 << 20;
  const gz = { 'content-encoding': 'gzip' };

  it('stops inflating at the limit: a bomb whose end is corrupt is refused for its size, not for the corruption', async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(100 * 1024 * 1024), { level: 9 });
    // The gzip trailer (CRC, length) replaced by garbage: only an inflater that reads to the end
    // can notice it.
    const corrupt = Buffer.concat([bomb.subarray(0, bomb.byteLength - 8), Buffer.from('garbage!')]);
    await expect(decompress(gz, corrupt, LIMIT)).rejects.toThrow(/^Decompressed request body exceeds the maximum allowed value/);
    // With a limit that lets it read to the end, the corruption is what fails.
    const small = zlib.gzipSync(Buffer.alloc(1000));
    const smallCorrupt = Buffer.concat([small.subarray(0, small.byteLength - 8), Buffer.from('garbage!')]);
    await expect(decompress(gz, smallCorrupt, LIMIT)).rejects.toThrow(/^failed to decompress the request body \(Content-Encoding: gzip\)/);
  });

  it('inflates gzip and deflate up to and including the limit; passes identity bodies through', async () => {
    const data = Buffer.from('x'.repeat(1000));
    expect((await decompress(gz, zlib.gzipSync(data), 1000)).equals(data)).toBe(true);
    expect((await decompress({ 'content-encoding': 'Deflate ' }, zlib.deflateSync(data), 1000)).equals(data)).toBe(true);
    await expect(decompress(gz, zlib.gzipSync(data), 999)).rejects.toThrow('exceeds the maximum allowed value of 999 bytes');
    await expect(decompress(gz, zlib.gzipSync(Buffer.from('a')), 0)).rejects.toThrow('exceeds the maximum allowed value of 0 bytes');
    expect(await decompress({}, data, 10)).toBe(data);
    expect(await decompress({ 'content-encoding': 'identity' }, data, 10)).toBe(data);
    await expect(decompress({ 'content-encoding': 'br' }, data, LIMIT)).rejects.toThrow(
      "unsupported Content-Encoding 'br'; supported: gzip, deflate",
    );
  });
});
