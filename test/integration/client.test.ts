// serval/client against the built server, the same calls over HTTP (binary tensor extension)
// and gRPC: health, metadata, config, typed inference for several datatypes, classification,
// statistics, the repository extension, errors with the server's status, restricted-API headers,
// and (gRPC) a ModelStreamInfer stream. The client is imported the way users do: 'serval/client'
// resolves through package.json's exports to the built dist/src/client.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { HttpClient, type InferInput, ServalClient, ServalClientError } from '../../src/client/index.js';
import { type ServerHandle, startServer } from '../helpers/server.js';

const repo = inject('modelRepository');
const ADMIN = { key: 'admin-key', value: 's3cret' };

const simpleInputs = (a: Int32Array, b: Int32Array): InferInput[] => [
  { name: 'INPUT0', shape: [1, 16], data: a },
  { name: 'INPUT1', shape: [1, 16], data: b },
];
const iota = (n: number, from = 0) => Int32Array.from({ length: n }, (_, i) => from + i);

describe('serval/client', () => {
  let server: ServerHandle;

  beforeAll(async () => {
    server = await startServer(repo, [
      '--model-control-mode',
      'explicit',
      '--load-model',
      '*',
      `--http-restricted-api=model-repository:${ADMIN.key}=${ADMIN.value}`,
      `--grpc-restricted-protocol=model-repository:${ADMIN.key}=${ADMIN.value}`,
    ]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('is what package.json exports as serval/client', async () => {
    const pkg = await import('serval/client');
    expect(typeof pkg.ServalClient).toBe('function');
    expect(typeof pkg.GrpcClient).toBe('function');
  });

  for (const protocol of ['http', 'grpc'] as const) {
    describe(`over ${protocol}`, () => {
      let client: ServalClient;
      let admin: ServalClient;
      beforeAll(() => {
        const url = protocol === 'http' ? server.url : server.grpcAddress;
        client = new ServalClient({ url, protocol });
        const key = protocol === 'http' ? ADMIN.key : `triton-grpc-protocol-${ADMIN.key}`;
        admin = new ServalClient({ url, protocol, headers: { [key]: ADMIN.value } });
      });
      afterAll(() => {
        client.close();
        admin.close();
      });

      it('reads health and metadata', async () => {
        expect(await client.isServerLive()).toBe(true);
        expect(await client.isServerReady()).toBe(true);
        expect(await client.isModelReady('simple')).toBe(true);
        expect(await client.isModelReady('simple', '9')).toBe(false);
        const meta = await client.serverMetadata();
        expect(meta.name).toBe('serval');
        expect(meta.extensions).toContain('binary_tensor_data');
        expect(await client.modelMetadata('simple')).toEqual({
          name: 'simple',
          versions: ['1'],
          platform: 'onnxruntime_onnx',
          inputs: [
            { name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] },
            { name: 'INPUT1', datatype: 'INT32', shape: [-1, 16] },
          ],
          outputs: [
            { name: 'OUTPUT0', datatype: 'INT32', shape: [-1, 16] },
            { name: 'OUTPUT1', datatype: 'INT32', shape: [-1, 16] },
          ],
        });
        const config = await client.modelConfig('simple');
        expect(config.name).toBe('simple');
        expect(Number(config.max_batch_size)).toBe(8);
      });

      it('infers with TypedArrays in and typed outputs back', async () => {
        const a = iota(16, -5);
        const b = new Int32Array(16).fill(7);
        const r = await client.infer('simple', simpleInputs(a, b), { id: `${protocol}-1` });
        expect(r.id).toBe(`${protocol}-1`);
        expect(r.modelName).toBe('simple');
        expect(r.modelVersion).toBe('1');
        const sum = r.output('OUTPUT0', 'INT32');
        expect(sum.data).toBeInstanceOf(Int32Array);
        expect(sum.shape).toEqual([1, 16]);
        expect(Array.from(sum.data)).toEqual(Array.from(a, (v, i) => v + b[i]!));
        expect(Array.from(r.output('OUTPUT1', 'INT32').data)).toEqual(Array.from(a, (v, i) => v - b[i]!));
        // Only the outputs asked for come back.
        const one = await client.infer('simple', simpleInputs(a, b), { outputs: ['OUTPUT1'] });
        expect(one.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
      });

      it('round-trips BYTES, FP16 bits, BOOL and 64-bit integers exactly', async () => {
        const words = ['héllo', '', 'wörld'];
        const s = await client.infer('identity_string', [{ name: 'INPUT0', shape: [1, 3], data: words }]);
        expect(s.strings('OUTPUT0')).toEqual(words);
        const half = Uint16Array.of(0x3c00, 0xc000, 0x7bff); // 1, -2, 65504
        const h = await client.infer('identity_fp16', [{ name: 'INPUT0', shape: [1, 3], data: half, datatype: 'FP16' }]);
        expect(Array.from(h.output('OUTPUT0', 'FP16').data)).toEqual(Array.from(half));
        const flags = await client.infer('identity_bool', [{ name: 'INPUT0', shape: [1, 3], data: [true, false, true] }]);
        expect(Array.from(flags.output('OUTPUT0', 'BOOL').data)).toEqual([1, 0, 1]);
        const big = BigInt64Array.of(-(2n ** 62n) - 1n, 2n ** 53n + 1n, 0n);
        const i64 = await client.infer('identity_int64', [{ name: 'INPUT0', shape: [1, 3], data: big }]);
        expect(i64.output('OUTPUT0', 'INT64').data).toEqual(big);
      });

      it('asks for classifications', async () => {
        const image = new Float32Array(3 * 224 * 224).fill(0.25);
        const r = await client.infer('image_classifier', [{ name: 'INPUT', shape: [1, 3, 224, 224], data: image }], {
          outputs: [{ name: 'OUTPUT', classCount: 3 }],
        });
        const top = r.strings('OUTPUT');
        expect(top).toHaveLength(3);
        for (const c of top) expect(c).toMatch(/^\d+\.\d{6}:\d+:\S/);
      });

      it('reads the statistics of the requests it made', async () => {
        const before = (await client.modelStatistics('simple'))[0]!;
        await client.infer('simple', simpleInputs(iota(16), iota(16)));
        const [after] = await client.modelStatistics('simple', '1');
        expect(after!.name).toBe('simple');
        expect(after!.version).toBe('1');
        expect(after!.inference_stats.success.count).toBe(before.inference_stats.success.count + 1);
        expect(typeof after!.inference_stats.queue.ns).toBe('number');
        expect(after!.batch_stats.some((b) => b.batch_size === 1 && b.compute_infer.count > 0)).toBe(true);
        const all = await client.modelStatistics();
        expect(all.map((m) => m.name)).toContain('identity_fp32');
      });

      it('throws ServalClientError with the server status and message', async () => {
        const err = await client.infer('no_such_model', simpleInputs(iota(16), iota(16))).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ServalClientError);
        expect((err as ServalClientError).protocol).toBe(protocol);
        expect((err as ServalClientError).code).toBe(protocol === 'http' ? 404 : 5); // NOT_FOUND
        expect((err as Error).message).toBe("Request for unknown model: 'no_such_model' is not found");
        const bad = (await client
          .infer('simple', [
            { name: 'INPUT0', shape: [1, 8], data: iota(8) },
            { name: 'INPUT1', shape: [1, 8], data: iota(8) },
          ])
          .catch((e: unknown) => e)) as ServalClientError;
        expect(bad).toBeInstanceOf(ServalClientError);
        expect(bad.code).toBe(protocol === 'http' ? 400 : 3); // INVALID_ARGUMENT
        expect(bad.message).toContain("unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,8]");
      });

      it('checks a tensor against its shape before sending it', async () => {
        await expect(client.infer('simple', [{ name: 'INPUT0', shape: [1, 16], data: iota(15) }])).rejects.toThrow(
          "input 'INPUT0': shape [1,16] has 16 elements but data has 15",
        );
        await expect(
          client.infer('simple', [{ name: 'INPUT0', shape: [2], data: Float32Array.of(1, 2), datatype: 'INT32' }]),
        ).rejects.toThrow('datatype INT32 needs a Int32Array, got a Float32Array');
      });

      it('drives the repository extension, with the restricted API key', async () => {
        const denied = await client.repositoryIndex().catch((e: unknown) => e);
        expect(denied).toBeInstanceOf(ServalClientError);
        expect((denied as ServalClientError).code).toBe(protocol === 'http' ? 403 : 14); // UNAVAILABLE
        const index = await admin.repositoryIndex(true);
        expect(index).toContainEqual({ name: 'simple', version: '1', state: 'READY' });
        await admin.unloadModel('identity_int8');
        expect(await client.isModelReady('identity_int8')).toBe(false);
        const rows = await admin.repositoryIndex();
        expect(rows.find((r) => r.name === 'identity_int8')?.state).toBe('UNAVAILABLE');
        await admin.loadModel('identity_int8');
        expect(await client.isModelReady('identity_int8')).toBe(true);
        // A load with a config of its own (Triton's JSON form): max_batch_size changes.
        const config = {
          name: 'identity_int8',
          backend: 'onnxruntime',
          max_batch_size: 4,
          input: [{ name: 'INPUT0', data_type: 'TYPE_INT8', dims: [-1] }],
          output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT8', dims: [-1] }],
        };
        await admin.loadModel('identity_int8', { config });
        expect(Number((await client.modelConfig('identity_int8')).max_batch_size)).toBe(4);
      });
    });
  }

  it('streams over gRPC: answers matched to their requests, a failed request rejects alone', async () => {
    const client = new ServalClient({ url: server.grpcAddress, protocol: 'grpc' });
    const stream = client.stream();
    try {
      const answers = await Promise.all(
        [3, 1, 2].map((k) => stream.infer('simple', simpleInputs(new Int32Array(16).fill(k), new Int32Array(16).fill(10)))),
      );
      expect(answers.map((r) => r.output('OUTPUT0', 'INT32').data[0])).toEqual([13, 11, 12]);
      expect(new Set(answers.map((r) => r.id)).size).toBe(3);
      const named = await stream.infer('simple', simpleInputs(iota(16), iota(16)), { id: 'mine' });
      expect(named.id).toBe('mine');
      await expect(stream.infer('no_such_model', simpleInputs(iota(16), iota(16)))).rejects.toThrow(
        "Request for unknown model: 'no_such_model' is not found",
      );
      // The stream goes on after a failed request.
      const after = await stream.infer('simple', simpleInputs(iota(16), iota(16)));
      expect(Array.from(after.output('OUTPUT0', 'INT32').data)).toEqual(Array.from(iota(16), (v) => 2 * v));
    } finally {
      stream.end();
      client.close();
    }
  });

  it('refuses a stream over HTTP, which has none', () => {
    const client = new ServalClient({ url: server.url });
    expect(client.protocol).toBe('http');
    expect(() => client.stream()).toThrow('streaming needs the gRPC protocol');
    client.close();
  });

  it('picks the protocol from the URL scheme', () => {
    const g = new ServalClient({ url: `grpc://${server.grpcAddress}` });
    expect(g.protocol).toBe('grpc');
    g.close();
    const h = new HttpClient(`http://127.0.0.1:${server.httpPort}`);
    h.close();
  });
});
