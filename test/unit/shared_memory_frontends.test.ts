// The shared-memory extension through both front-ends, in-process: the register / status /
// unregister routes and RPCs against a fake CoreApi (shapes, texts, status codes), and inference
// with tensors in real /dev/shm objects against a real core over the test backend.
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';
import { expectGrpcError, type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { joinBinaryBody, splitBinaryResponse } from '../helpers/http.js';
import { shmObjects } from '../helpers/shm.js';
import { fromI32, i32, range } from '../helpers/tensors.js';
import { SIMPLE_TEST_MODEL, startTestCore, type TestCore } from '../helpers/test_core.js';

type Reply = Awaited<ReturnType<FastifyInstance['inject']>>;

const CUDA = 'CUDA shared memory is not supported by this server';

function expectError(res: Reply, code: number, message: string): void {
  expect(res.statusCode, res.body).toBe(code);
  // Triton's types: text/plain for an infer route's errors, application/json for the rest (no charset).
  expect(res.headers['content-type']).toMatch(/^(application\/json|text\/plain)$/);
  expect(res.json()).toEqual({ error: message });
}

const postJson = (app: FastifyInstance, url: string, doc?: unknown) =>
  app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json' },
    payload: doc === undefined ? undefined : typeof doc === 'string' ? doc : JSON.stringify(doc),
  });

describe('register, status and unregister routes (fake core)', () => {
  let core: ReturnType<typeof fakeCore>;
  let app: FastifyInstance;
  let g: GrpcServer;
  let client: GrpcClient;

  beforeAll(async () => {
    core = fakeCore();
    const { log } = capturedLogger();
    app = buildHttpServer(core, log, { maxInputSize: 1 << 20 });
    g = await startGrpcServer(core, log, '127.0.0.1', 0);
    client = grpcClient(`127.0.0.1:${g.port}`);
  });
  afterAll(async () => {
    client?.close();
    g?.server.forceShutdown();
    await app?.close();
  });
  afterEach(() => core.regions.clear());

  it('HTTP: register (offset optional), status of all and of one in Triton’s JSON, unregister one and all', async () => {
    let res = await postJson(app, '/v2/systemsharedmemory/region/in%20put/register', { key: '/k1', offset: 16, byte_size: 64 });
    expect(res.statusCode, res.body).toBe(200);
    res = await postJson(app, '/v2/systemsharedmemory/region/out/register', { key: '/k2', byte_size: 8 });
    expect(res.statusCode, res.body).toBe(200);
    const all = await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/status' });
    expect(all.headers['content-type']).toMatch(/^application\/json/);
    expect(all.json()).toEqual([
      { name: 'in put', key: '/k1', offset: 16, byte_size: 64 },
      { name: 'out', key: '/k2', offset: 0, byte_size: 8 },
    ]);
    const one = await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/region/out/status' });
    expect(one.json()).toEqual([{ name: 'out', key: '/k2', offset: 0, byte_size: 8 }]);
    expect((await postJson(app, '/v2/systemsharedmemory/region/out/unregister')).statusCode).toBe(200);
    expect([...core.regions.keys()]).toEqual(['in put']);
    expect((await postJson(app, '/v2/systemsharedmemory/unregister')).statusCode).toBe(200);
    expect(core.regions.size).toBe(0);
    expect((await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/status' })).json()).toEqual([]);
  });

  it('HTTP: a bad register body, no region name, an unknown region, and the core’s errors with their statuses', async () => {
    const reg = (doc?: unknown) => postJson(app, '/v2/systemsharedmemory/region/r/register', doc);
    expectError(await reg({ byte_size: 8 }), 400, "Shared memory register request has no 'key' field");
    expectError(await reg({ key: '/k' }), 400, "Shared memory register request has no 'byte_size' field");
    expectError(await reg({ key: 5, byte_size: 8 }), 400, "Unable to parse 'key': it must be a string");
    for (const byte_size of [-1, 1.5, '8', 2 ** 64]) {
      expectError(await reg({ key: '/k', byte_size }), 400, "Unable to parse 'byte_size': it must be a non-negative integer");
    }
    expectError(await reg({ key: '/k', offset: -3, byte_size: 8 }), 400, "Unable to parse 'offset': it must be a non-negative integer");
    // Any uint64 parses, as in Triton: one past 2^53 reaches the core, which refuses the range.
    await reg({ key: '/k', offset: 2 ** 63, byte_size: 8 });
    expect(core.regions.get('r')?.offset).toBe(2 ** 63);
    core.regions.clear();
    // Not JSON: Triton's JSON reader's INTERNAL (500).
    const notJson = await reg('{"key":');
    expect(notJson.statusCode).toBe(500);
    expect(notJson.json().error).toMatch(/^failed to parse the request JSON buffer: /);
    expectError(await reg([1]), 400, 'the request JSON must be an object');
    expectError(
      await postJson(app, '/v2/systemsharedmemory/register', { key: '/k', byte_size: 8 }),
      400,
      "'region name' is necessary to register system shared memory region",
    );
    expectError(
      await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/region/nope/status' }),
      404,
      "Unable to find system shared memory region: 'nope'",
    );
    expect((await postJson(app, '/v2/systemsharedmemory/region/internal/register', { key: '/k', byte_size: 1 })).statusCode).toBe(500);
    expect((await postJson(app, '/v2/systemsharedmemory/region/invalid/register', { key: '/k', byte_size: 1 })).statusCode).toBe(400);
    expect(core.regions.size).toBe(0);
  });

  it('HTTP: CUDA shared memory status and register answer 501 with one clear text; unregister has nothing to do', async () => {
    for (const [method, url] of [
      ['GET', '/v2/cudasharedmemory/status'],
      ['GET', '/v2/cudasharedmemory/region/r/status'],
      ['POST', '/v2/cudasharedmemory/register'],
      ['POST', '/v2/cudasharedmemory/region/r/register'],
    ] as const) {
      expectError(await app.inject({ method, url }), 501, CUDA);
    }
    expect((await postJson(app, '/v2/cudasharedmemory/unregister')).statusCode).toBe(200);
    expect((await postJson(app, '/v2/cudasharedmemory/region/r/unregister')).statusCode).toBe(200);
  });

  it('gRPC: register (uint64 as strings), status as Triton’s map by name, unregister one and all', async () => {
    await client.call('SystemSharedMemoryRegister', { name: 'a', key: '/ka', offset: '16', byte_size: '48' });
    await client.call('SystemSharedMemoryRegister', { name: 'b', key: '/kb', byte_size: '8' });
    expect(core.regions.get('a')).toEqual({ name: 'a', key: '/ka', offset: 16, byte_size: 48 });
    const all = await client.call('SystemSharedMemoryStatus', {});
    expect(all).toEqual({
      regions: {
        a: { name: 'a', key: '/ka', offset: '16', byte_size: '48' },
        b: { name: 'b', key: '/kb', offset: '0', byte_size: '8' },
      },
    });
    expect(await client.call('SystemSharedMemoryStatus', { name: 'b' })).toEqual({
      regions: { b: { name: 'b', key: '/kb', offset: '0', byte_size: '8' } },
    });
    await expectGrpcError(
      client,
      'SystemSharedMemoryStatus',
      { name: 'zz' },
      status.NOT_FOUND,
      "Unable to find system shared memory region: 'zz'",
    );
    await client.call('SystemSharedMemoryUnregister', { name: 'a' });
    expect([...core.regions.keys()]).toEqual(['b']);
    await client.call('SystemSharedMemoryUnregister', {});
    expect(core.regions.size).toBe(0);
    await expectGrpcError(
      client,
      'SystemSharedMemoryRegister',
      { name: 'invalid', key: '/k', byte_size: '1' },
      status.INVALID_ARGUMENT,
      /invalid/,
    );
  });

  it('gRPC: CudaSharedMemory{Status,Register} answer UNIMPLEMENTED (Triton’s UNSUPPORTED) with one clear text; Unregister has nothing to do', async () => {
    for (const method of ['CudaSharedMemoryStatus', 'CudaSharedMemoryRegister']) {
      await expectGrpcError(client, method, {}, status.UNIMPLEMENTED, CUDA);
    }
    expect(await client.call('CudaSharedMemoryUnregister', {})).toEqual({});
    expect(await client.call('CudaSharedMemoryUnregister', { name: 'r' })).toEqual({});
  });
});

describe('inference with tensors in shared memory (real core)', () => {
  const shm = shmObjects('serval_fe');
  let t: TestCore;
  let app: FastifyInstance;
  let g: GrpcServer;
  let client: GrpcClient;
  const a = range(16, (i) => i * 3 - 7);
  const b = range(16, (i) => 50 - i);
  const sum = a.map((x, i) => x + b[i]!);
  const diff = a.map((x, i) => x - b[i]!);
  let inKey = '';
  let outKey = '';

  beforeAll(async () => {
    t = await startTestCore([SIMPLE_TEST_MODEL]);
    const { log } = capturedLogger();
    app = buildHttpServer(t.core, log, { maxInputSize: 1 << 20 });
    g = await startGrpcServer(t.core, log, '127.0.0.1', 0);
    client = grpcClient(`127.0.0.1:${g.port}`);
  });
  afterAll(async () => {
    client?.close();
    g?.server.forceShutdown();
    await app?.close();
    await t?.close();
    shm.cleanup();
  });
  afterEach(async () => {
    await t.core.unregisterSystemSharedMemory('');
  });

  /** Input region 'in' holding a then b; output region 'out' of 128 zero bytes; both registered over HTTP. */
  async function regions(): Promise<void> {
    inKey = shm.create('in', Buffer.concat([i32(a), i32(b)]));
    outKey = shm.create('out', 128);
    for (const [name, key] of [
      ['in', inKey],
      ['out', outKey],
    ]) {
      const res = await postJson(app, `/v2/systemsharedmemory/region/${name}/register`, { key, byte_size: 128 });
      expect(res.statusCode, res.body).toBe(200);
    }
  }
  const at = (region: string, offset: number, size = 64) => ({
    shared_memory_region: region,
    shared_memory_byte_size: size,
    ...(offset ? { shared_memory_offset: offset } : {}),
  });
  const outputAt = (o: number): number[] => fromI32(shm.read(outKey).subarray(o, o + 64));

  it('HTTP: inputs and outputs in shared memory; the response carries name, datatype and shape only, as JSON', async () => {
    await regions();
    const res = await postJson(app, '/v2/models/simple/infer', {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: at('in', 0) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: at('in', 64) },
      ],
      // What tritonclient sends: binary_data false next to the region.
      outputs: [
        { name: 'OUTPUT0', parameters: { binary_data: false, ...at('out', 0) } },
        { name: 'OUTPUT1', parameters: { binary_data: false, ...at('out', 64) } },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['inference-header-content-length']).toBeUndefined();
    expect(res.json()).toEqual({
      model_name: 'simple',
      model_version: '1',
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] },
      ],
    });
    expect(outputAt(0)).toEqual(sum);
    expect(outputAt(64)).toEqual(diff);
  });

  it('HTTP: mixed: one input in shared memory and one binary, one output in shared memory and one binary', async () => {
    await regions();
    const { body, headerLength } = joinBinaryBody(
      {
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: at('in', 0) },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        ],
        outputs: [
          { name: 'OUTPUT0', parameters: at('out', 64) },
          { name: 'OUTPUT1', parameters: { binary_data: true } },
        ],
      },
      [i32(b)],
    );
    const res = await app.inject({
      method: 'POST',
      url: '/v2/models/simple/infer',
      headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(headerLength) },
      payload: body,
    });
    expect(res.statusCode, res.body).toBe(200);
    const { doc, binary } = splitBinaryResponse(res.rawPayload, Number(res.headers['inference-header-content-length']));
    expect(doc.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    ]);
    expect(fromI32(binary.get('OUTPUT1')!)).toEqual(diff);
    expect(outputAt(64)).toEqual(sum);
  });

  it("HTTP: Triton's errors: data next to a region, binary output into a region, unknown region, size against shape, small output region", async () => {
    await regions();
    const infer = (doc: unknown) => postJson(app, '/v2/models/simple/infer', doc);
    const in1 = { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: b };
    expectError(
      await infer({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: a, parameters: at('in', 0) }, in1] }),
      400,
      "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But set 'data' 'shared_memory_region'",
    );
    expectError(
      await infer({
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: a }, in1],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true, ...at('out', 0) } }],
      }),
      400,
      "Output can't set both 'shared_memory_region' and 'binary_data'",
    );
    expectError(
      await infer({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: at('nope', 0) }, in1] }),
      404,
      "Unable to find shared memory region: 'nope'",
    );
    expectError(
      await infer({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: at('in', 0, 128) }, in1] }),
      400,
      "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 128",
    );
    expectError(
      await infer({
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: a }, in1],
        outputs: [{ name: 'OUTPUT0', parameters: at('out', 0, 32) }],
      }),
      500,
      "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results",
    );
    expect(outputAt(0)).toEqual(range(16, () => 0));
  });

  it('gRPC: register over gRPC; raw_input_contents are only the inputs outside shared memory; a shared-memory output has an empty raw entry', async () => {
    inKey = shm.create('gin', i32(a));
    outKey = shm.create('gout', 64);
    await client.call('SystemSharedMemoryRegister', { name: 'gin', key: inKey, byte_size: '64' });
    await client.call('SystemSharedMemoryRegister', { name: 'gout', key: outKey, byte_size: '64' });
    const int64 = (v: number) => ({ int64_param: String(v) });
    const region = (name: string) => ({ shared_memory_region: { string_param: name }, shared_memory_byte_size: int64(64) });
    const res = await client.call('ModelInfer', {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: region('gin') },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: region('gout') }, { name: 'OUTPUT1' }],
      raw_input_contents: [i32(b)],
    });
    expect(res.outputs.map((o: { name: string; datatype: string; shape: string[] }) => [o.name, o.datatype, o.shape])).toEqual([
      ['OUTPUT0', 'INT32', ['1', '16']],
      ['OUTPUT1', 'INT32', ['1', '16']],
    ]);
    expect(res.raw_output_contents.map((r: Buffer) => r.byteLength)).toEqual([0, 64]);
    expect(fromI32(res.raw_output_contents[1])).toEqual(diff);
    expect(fromI32(shm.read(outKey))).toEqual(sum);

    await expectGrpcError(
      client,
      'ModelInfer',
      {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: region('gin'), contents: { int_contents: a } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: b } },
        ],
      },
      status.INVALID_ARGUMENT,
      "unexpected 'content' provided when using shared memory for input tensor 'INPUT0' for model 'simple'",
    );
    await expectGrpcError(
      client,
      'ModelInfer',
      {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: region('gin') },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
        ],
        raw_input_contents: [i32(a), i32(b)],
      },
      status.INVALID_ARGUMENT,
      'raw_input_contents has 2 entries but the request has 1 inputs outside shared memory; give raw contents for every input or for none',
    );
    await expectGrpcError(
      client,
      'ModelInfer',
      {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { ...region('gin'), shared_memory_offset: int64(64) } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
        ],
        raw_input_contents: [i32(b)],
      },
      status.INVALID_ARGUMENT,
      "Invalid offset for shared memory region: 'gin'",
    );
  });
});
