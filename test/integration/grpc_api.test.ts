// The KServe v2 gRPC API (inference.GRPCInferenceService) and grpc.health.v1 of the built server.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { expectGrpcReady, expectSimpleWorks } from '../helpers/checks.js';
import { expectGrpcError, type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { ROOT } from '../helpers/paths.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { simpleGrpcRequest, simpleMetadata } from '../helpers/simple.js';
import { ALL_TYPES, bytesRaw, type Dt, identityModel, randomRaw, range, rawOf, rng, splitBytesRaw, valuesOf } from '../helpers/tensors.js';

let server: ServerHandle;
let client: GrpcClient;
const repo = inject('modelRepository');

beforeAll(async () => {
  server = await startServer(repo);
  client = grpcClient(server.grpcAddress);
});

afterAll(async () => {
  client?.close();
  await server?.stop();
});

interface Tensor {
  name: string;
  datatype: string;
  shape: number[];
}

/** Response outputs with numeric shapes and their raw bytes. */
function outputs(res: { outputs: (Tensor & { shape: string[] })[]; raw_output_contents: Buffer[] }) {
  return res.outputs.map((o, i) => ({ name: o.name, datatype: o.datatype, shape: o.shape.map(Number), raw: res.raw_output_contents[i]! }));
}

async function expectSimpleWorksGrpc(): Promise<void> {
  const a = range(16, (i) => i * 5 - 20);
  const b = range(16, (i) => 100 + i);
  const out = outputs(await client.call('ModelInfer', simpleGrpcRequest(a, b)));
  expect(valuesOf('INT32', out[0]!.raw)).toEqual(a.map((x, i) => x + b[i]!));
  expect(valuesOf('INT32', out[1]!.raw)).toEqual(a.map((x, i) => x - b[i]!));
}

describe('health and metadata', () => {
  it('ServerLive, ServerReady, ModelReady', async () => {
    await expectGrpcReady(client);
  });

  it('grpc.health.v1 Check', async () => {
    expect(await client.health()).toEqual({ status: 'SERVING' });
    expect(await client.health('inference.GRPCInferenceService')).toEqual({ status: 'SERVING' });
    await expect(client.health('some.other.Service')).rejects.toMatchObject({ code: status.NOT_FOUND });
  });

  it('ServerMetadata', async () => {
    const md = await client.call('ServerMetadata', {});
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(md.name).toBe('serval');
    expect(md.version).toBe(pkg.version);
    expect(md.extensions).toEqual(expect.arrayContaining(['classification', 'statistics']));
  });

  it('ModelMetadata', async () => {
    const md = await client.call('ModelMetadata', { name: 'simple', version: '' });
    expect(md).toEqual(simpleMetadata('onnxruntime_onnx', 'grpc'));
  });

  it('ModelConfig', async () => {
    const { config } = await client.call('ModelConfig', { name: 'image_classifier', version: '' });
    expect(config.name).toBe('image_classifier');
    expect(config.platform).toBe('onnxruntime_onnx');
    expect(config.max_batch_size).toBe(16);
    expect(config.input[0]).toMatchObject({ name: 'INPUT', data_type: 'TYPE_FP32', dims: ['3', '224', '224'] });
    expect(config.output[0]).toMatchObject({ name: 'OUTPUT', data_type: 'TYPE_FP32', dims: ['11'], label_filename: 'labels.txt' });
    expect(config.instance_group[0]).toMatchObject({ kind: 'KIND_CPU', count: 1 });
    expect(config.dynamic_batching).toBeTruthy();
  });

  it('ModelStatistics counts a batch-3 inference as 3 inferences in 1 execution', async () => {
    const stat = async () => (await client.call('ModelStatistics', { name: 'simple', version: '' })).model_stats[0];
    const before = await stat();
    await client.call('ModelInfer', {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [3, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [3, 16] },
      ],
      raw_input_contents: [rawOf('INT32', range(48)), rawOf('INT32', range(48))],
    });
    const after = await stat();
    expect(after.name).toBe('simple');
    expect(Number(after.inference_count) - Number(before.inference_count)).toBe(3);
    expect(Number(after.execution_count) - Number(before.execution_count)).toBe(1);
    expect(Number(after.inference_stats.success.count) - Number(before.inference_stats.success.count)).toBe(1);
    const b3 = after.batch_stats.find((b: { batch_size: string }) => Number(b.batch_size) === 3);
    expect(Number(b3.compute_infer.count)).toBeGreaterThanOrEqual(1);
  });

  it('metadata of an unknown model or version fails with Triton’s codes', async () => {
    const e1 = await client.error('ModelMetadata', { name: 'no_such_model', version: '' });
    expect(e1.code).toBe(status.NOT_FOUND);
    expect(e1.details).toBe("Request for unknown model: 'no_such_model' is not found");
    const e2 = await client.error('ModelConfig', { name: 'simple', version: '4' });
    expect(e2.code).toBe(status.NOT_FOUND);
    expect(e2.details).toBe("Request for unknown model: 'simple' version 4 is not found");
  });
});

describe('ModelInfer', () => {
  it('simple with raw_input_contents; outputs come back as raw_output_contents', async () => {
    const r = rng(3);
    const a = range(16, () => Math.floor(r() * 2 ** 31));
    const b = range(16, () => -Math.floor(r() * 2 ** 31));
    const res = await client.call('ModelInfer', simpleGrpcRequest(a, b, { id: 'grpc-req-1' }));
    expect(res.model_name).toBe('simple');
    expect(res.model_version).toBe('1');
    expect(res.id).toBe('grpc-req-1');
    const out = outputs(res);
    expect(out.map((o) => [o.name, o.datatype, o.shape])).toEqual([
      ['OUTPUT0', 'INT32', [1, 16]],
      ['OUTPUT1', 'INT32', [1, 16]],
    ]);
    expect(valuesOf('INT32', out[0]!.raw)).toEqual(a.map((x, i) => (x + b[i]!) | 0));
    expect(valuesOf('INT32', out[1]!.raw)).toEqual(a.map((x, i) => (x - b[i]!) | 0));
  });

  it('simple with typed InferTensorContents', async () => {
    const a = range(32, (i) => i * 3);
    const b = range(32, (i) => 7 - i);
    const res = await client.call('ModelInfer', {
      model_name: 'simple',
      model_version: '1',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [2, 16], contents: { int_contents: a } },
        { name: 'INPUT1', datatype: 'INT32', shape: [2, 16], contents: { int_contents: b } },
      ],
    });
    const out = outputs(res);
    expect(out[0]!.shape).toEqual([2, 16]);
    expect(valuesOf('INT32', out[0]!.raw)).toEqual(a.map((x, i) => x + b[i]!));
  });

  it('returns only the requested outputs', async () => {
    const a = range(16);
    const res = await client.call('ModelInfer', simpleGrpcRequest(a, a, { outputs: [{ name: 'OUTPUT1' }] }));
    const out = outputs(res);
    expect(out.map((o) => o.name)).toEqual(['OUTPUT1']);
    expect(valuesOf('INT32', out[0]!.raw)).toEqual(range(16, () => 0));
  });

  it.each(ALL_TYPES.filter((t) => t !== 'BYTES'))('%s raw round trip through identity, byte for byte', async (dt) => {
    const raw = randomRaw(dt as Exclude<Dt, 'BYTES'>, 3 * 5, rng(dt.charCodeAt(0) * 97 + dt.length));
    const res = await client.call('ModelInfer', {
      model_name: identityModel(dt),
      inputs: [{ name: 'INPUT0', datatype: dt, shape: [3, 5] }],
      raw_input_contents: [raw],
    });
    const [o] = outputs(res);
    expect(o).toMatchObject({ name: 'OUTPUT0', datatype: dt, shape: [3, 5] });
    expect(o!.raw.equals(raw)).toBe(true);
  });

  it('BYTES raw round trip', async () => {
    const raw = bytesRaw(['', 'grpc', 'ünïcødé', 'z'.repeat(5000)]);
    const [o] = outputs(
      await client.call('ModelInfer', {
        model_name: 'identity_string',
        inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [2, 2] }],
        raw_input_contents: [raw],
      }),
    );
    expect(o!.datatype).toBe('BYTES');
    expect(o!.raw.equals(raw)).toBe(true);
  });

  const typed: [Exclude<Dt, 'FP16'>, string, unknown[]][] = [
    ['BOOL', 'bool_contents', [true, false, true]],
    ['UINT8', 'uint_contents', [0, 200, 255]],
    ['UINT16', 'uint_contents', [0, 40000, 65535]],
    ['UINT32', 'uint_contents', [0, 3000000000, 4294967295]],
    ['UINT64', 'uint64_contents', ['0', '4294967296', '9007199254740991']],
    ['INT8', 'int_contents', [-128, 0, 127]],
    ['INT16', 'int_contents', [-32768, 5, 32767]],
    ['INT32', 'int_contents', [-2147483648, 5, 2147483647]],
    ['INT64', 'int64_contents', ['-9007199254740991', '0', '9007199254740991']],
    ['FP32', 'fp32_contents', [0.5, -1.25, 3.4028234663852886e38]],
    ['FP64', 'fp64_contents', [0.1, -1e300, Math.PI]],
    ['BYTES', 'bytes_contents', [Buffer.from('a'), Buffer.from(''), Buffer.from('ünï')]],
  ];

  it.each(typed)('%s typed contents (%s) give the same bytes as raw', async (dt, field, values) => {
    const res = await client.call('ModelInfer', {
      model_name: identityModel(dt),
      inputs: [{ name: 'INPUT0', datatype: dt, shape: [1, 3], contents: { [field]: values } }],
    });
    const [o] = outputs(res);
    const expected =
      dt === 'BYTES' ? bytesRaw(values as Buffer[]) : rawOf(dt, values.map((v) => (typeof v === 'string' ? BigInt(v) : v)) as never);
    expect(o!.raw.equals(expected)).toBe(true);
  });

  it('INT64 and UINT64 typed contents beyond 2^53 stay exact', async () => {
    const i64 = ['-9223372036854775808', '9223372036854775807', '9007199254740993'];
    const u64 = ['18446744073709551615', '9007199254740993', '1'];
    for (const [dt, field, values] of [
      ['INT64', 'int64_contents', i64],
      ['UINT64', 'uint64_contents', u64],
    ] as const) {
      const [o] = outputs(
        await client.call('ModelInfer', {
          model_name: identityModel(dt),
          inputs: [{ name: 'INPUT0', datatype: dt, shape: [1, 3], contents: { [field]: values } }],
        }),
      );
      expect(valuesOf(dt, o!.raw).map(String), dt).toEqual(values);
    }
  });

  it('classification via the classification parameter', async () => {
    const labels = readFileSync(path.join(repo, 'image_classifier', 'labels.txt'), 'utf8')
      .trim()
      .split('\n');
    const r = rng(77);
    const image = Buffer.from(new Float32Array(3 * 224 * 224).map(() => r() * 2 - 1).buffer);
    const req = {
      model_name: 'image_classifier',
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224] }],
      raw_input_contents: [image],
    };
    const probs = valuesOf('FP32', outputs(await client.call('ModelInfer', req))[0]!.raw) as number[];
    const top = probs
      .map((v, i) => [v, i] as const)
      .sort((x, y) => y[0] - x[0] || x[1] - y[1])
      .slice(0, 3);
    const [o] = outputs(
      await client.call('ModelInfer', { ...req, outputs: [{ name: 'OUTPUT', parameters: { classification: { int64_param: '3' } } }] }),
    );
    expect(o).toMatchObject({ datatype: 'BYTES', shape: [1, 3] });
    expect(splitBytesRaw(o!.raw).map(String)).toEqual(top.map(([v, i]) => `${v.toFixed(6)}:${i}:${labels[i]}`));
  });

  it('carries messages larger than 4 MiB both ways', async () => {
    const n = 2_000_000; // 8 MB of FP32
    const raw = randomRaw('FP32', n, rng(8));
    const [o] = outputs(
      await client.call('ModelInfer', {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n] }],
        raw_input_contents: [raw],
      }),
    );
    expect(o!.shape).toEqual([1, n]);
    expect(o!.raw.equals(raw)).toBe(true);
  });
});

describe('errors, each followed by correct good requests', () => {
  afterEach(async () => {
    expect(server.alive()).toBe(true);
    await expectSimpleWorksGrpc();
    await expectSimpleWorks(server.url);
  });
  const a = range(16);

  const expectInferError = (req: Record<string, unknown>, code: number, details: string | RegExp) =>
    expectGrpcError(client, 'ModelInfer', req, code, details);

  it('unknown model', async () => {
    await expectInferError(
      { ...simpleGrpcRequest(a, a), model_name: 'no_such_model' },
      status.NOT_FOUND,
      "Request for unknown model: 'no_such_model' is not found",
    );
  });

  it('unknown version', async () => {
    await expectInferError(
      { ...simpleGrpcRequest(a, a), model_version: '999' },
      status.NOT_FOUND,
      "Request for unknown model: 'simple' version 999 is not found",
    );
  });

  it('wrong datatype', async () => {
    const req = simpleGrpcRequest(a, a);
    (req.inputs as Tensor[])[0]!.datatype = 'FP32';
    await expectInferError(
      req,
      status.INVALID_ARGUMENT,
      "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'",
    );
  });

  it('wrong shape', async () => {
    const req: Record<string, unknown> = { ...simpleGrpcRequest(a, a), id: 'g-shape' };
    (req.inputs as Tensor[])[1]!.shape = [1, 4, 4];
    await expectInferError(
      req,
      status.INVALID_ARGUMENT,
      /^\[request id: g-shape\] unexpected shape for input 'INPUT1' for model 'simple'\. Expected \[-1,16\], got \[1,4,4\]\. NOTE: Setting a non-zero max_batch_size/,
    );
  });

  it('missing input', async () => {
    await expectInferError(
      { model_name: 'simple', inputs: [{ name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }], raw_input_contents: [rawOf('INT32', a)] },
      status.INVALID_ARGUMENT,
      "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT1'], but missing required input(s) ['INPUT0']. Please provide all required input(s).",
    );
  });

  it('batch larger than max_batch_size', async () => {
    await expectInferError(
      {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [9, 2] }],
        raw_input_contents: [Buffer.alloc(9 * 2 * 4)],
      },
      status.INVALID_ARGUMENT,
      "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'identity_fp32'",
    );
  });

  it('raw content size that does not match the shape', async () => {
    await expectInferError(
      { ...simpleGrpcRequest(a, a), raw_input_contents: [rawOf('INT32', a), rawOf('INT32', range(20))] },
      status.INVALID_ARGUMENT,
      "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 80",
    );
  });

  it('typed contents with too few elements', async () => {
    await expectInferError(
      {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], contents: { int_contents: range(16) } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: range(3) } },
        ],
      },
      status.INVALID_ARGUMENT,
      "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 12",
    );
  });

  it('raw_input_contents count that does not match the inputs', async () => {
    await expectInferError(
      { ...simpleGrpcRequest(a, a), raw_input_contents: [rawOf('INT32', a)] },
      status.INVALID_ARGUMENT,
      /raw_input_contents has 1 entries but the request has 2 inputs/,
    );
  });

  it('typed contents and raw contents together', async () => {
    const req = simpleGrpcRequest(a, a);
    (req.inputs as Record<string, unknown>[])[0]!.contents = { int_contents: a };
    await expectInferError(req, status.INVALID_ARGUMENT, "input 'INPUT0' has both typed contents and raw_input_contents");
  });

  it('FP16 in typed contents', async () => {
    await expectInferError(
      {
        model_name: 'identity_fp16',
        inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 2], contents: { fp32_contents: [1, 2] } }],
      },
      status.INVALID_ARGUMENT,
      /FP16 data must be sent in raw_input_contents/,
    );
  });

  it('unknown datatype, negative dimension, malformed BYTES', async () => {
    const r1 = simpleGrpcRequest(a, a);
    (r1.inputs as Tensor[])[0]!.datatype = 'INT33';
    await expectInferError(r1, status.INVALID_ARGUMENT, /unknown data-type 'INT33'/);
    const r2 = simpleGrpcRequest(a, a);
    (r2.inputs as Tensor[])[0]!.shape = [1, -16];
    await expectInferError(r2, status.INVALID_ARGUMENT, /./);
    const bad = bytesRaw(['abcd']);
    bad.writeUInt32LE(99, 0);
    await expectInferError(
      { model_name: 'identity_string', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1] }], raw_input_contents: [bad] },
      status.INVALID_ARGUMENT,
      /malformed BYTES data/,
    );
  });

  it('bytes that are not a protobuf message at all', async () => {
    const raw = new grpc.Client(server.grpcAddress, grpc.credentials.createInsecure());
    const garbage = Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02]);
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      raw.makeUnaryRequest(
        '/inference.GRPCInferenceService/ModelInfer',
        (b: Buffer) => b,
        (b: Buffer) => b,
        garbage,
        { deadline: Date.now() + 10_000 },
        (e) => resolve(e),
      ),
    );
    raw.close();
    expect(err).not.toBeNull();
    expect(err!.code).not.toBe(status.OK);
    expect(err!.code).not.toBe(status.DEADLINE_EXCEEDED);
  });

  it('a call to an unimplemented method', async () => {
    const e = await client.error('CudaSharedMemoryStatus', {});
    expect(e.code).toBe(status.UNIMPLEMENTED);
  });
});
