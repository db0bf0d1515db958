// src/frontends/grpc/server.ts in-process: a grpc-js server on 127.0.0.1, port 0, against a real
// InferenceCore over the test backend (no spawned server, no ONNX Runtime), and against a fake
// CoreApi for the one error path. test/integration/grpc_api.test.ts drives the same calls end to end.
import * as grpc from '@grpc/grpc-js';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { buildRegistry } from '../../src/frontends/metrics/metrics.js';
import { expectGrpcReady } from '../helpers/checks.js';
import { MAX_BATCH_NOTE } from '../helpers/errors.js';
import { capturedLogger, errorLines, fakeCore } from '../helpers/frontends.js';
import { expectGrpcError, type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { simpleGrpcRequest, simpleMetadata } from '../helpers/simple.js';
import { fromI32, i32, range } from '../helpers/tensors.js';
import { identityTestModel, SIMPLE_TEST_MODEL, startTestCore, type TestCore } from '../helpers/test_core.js';

const UNKNOWN = (m: string): string => `Request for unknown model: '${m}' is not found`;

/** FP32 identity with a configured instance group of 2 and dynamic batching. */
const IDENTITY_FP32 = identityTestModel('identity_fp32', 'FP32', [3], 4, {
  extraConfig: 'instance_group [ { count: 2 kind: KIND_CPU } ]\ndynamic_batching { max_queue_delay_microseconds: 100 }',
});

interface Tensor {
  name: string;
  datatype: string;
  shape: string[];
}
interface InferReply {
  model_name: string;
  model_version: string;
  id: string;
  outputs: Tensor[];
  raw_output_contents: Buffer[];
}
interface Duration {
  count: string;
  ns: string;
}
interface StatisticsReply {
  model_stats: {
    name: string;
    version: string;
    inference_count: string;
    execution_count: string;
    inference_stats: Record<'success' | 'fail' | 'queue' | 'compute_input' | 'compute_infer' | 'compute_output', Duration>;
    batch_stats: { batch_size: string; compute_infer: Duration }[];
  }[];
}

/**
 * The part of a gRPC message that the JSON document `like` has, 64-bit numbers (strings over
 * gRPC) as numbers: equal to `like` exactly when the message carries every field `like` carries
 * with the same value.
 */
function projectOnto(like: unknown, msg: unknown): unknown {
  if (Array.isArray(like)) return Array.isArray(msg) ? msg.map((m, i) => projectOnto(like[i], m)) : msg;
  if (like !== null && typeof like === 'object') {
    if (msg === null || typeof msg !== 'object') return msg;
    const m = msg as Record<string, unknown>;
    return Object.fromEntries(Object.entries(like).map(([k, v]) => [k, projectOnto(v, m[k])]));
  }
  if (typeof like === 'number' && typeof msg === 'string') return Number(msg);
  return msg;
}

describe('the gRPC front-end over a real core', () => {
  let t: TestCore;
  let g: GrpcServer;
  let client: GrpcClient;
  let lines: string[];

  beforeAll(async () => {
    t = await startTestCore([SIMPLE_TEST_MODEL, IDENTITY_FP32]);
    const logged = capturedLogger();
    lines = logged.lines;
    g = await startGrpcServer(t.core, logged.log, '127.0.0.1', 0);
    client = grpcClient(`127.0.0.1:${g.port}`);
  });
  afterAll(async () => {
    client?.close();
    g?.server.forceShutdown();
    await t?.close();
  });
  // Client errors are answers, not server faults: nothing here is ever logged.
  afterEach(() => {
    const logged = lines.splice(0);
    expect(logged).toEqual([]);
  });

  it('binds an ephemeral port', () => {
    expect(g.port).toBeGreaterThan(0);
  });

  describe('health, metadata, configuration, statistics', () => {
    it('ServerLive, ServerReady, ModelReady', async () => {
      await expectGrpcReady(client);
    });

    it('grpc.health.v1 Check', async () => {
      expect(await client.health('')).toEqual({ status: 'SERVING' });
      expect(await client.health('inference.GRPCInferenceService')).toEqual({ status: 'SERVING' });
      const e = await client.healthError('some.other.Service');
      expect([e.code, e.details]).toEqual([status.NOT_FOUND, "unknown service 'some.other.Service'"]);
    });

    it('ServerMetadata', async () => {
      expect(await client.call('ServerMetadata', {})).toEqual({ name: 'serval', version: '0.0.0-test', extensions: ['statistics'] });
    });

    it('ModelMetadata, by model and by version', async () => {
      // The test backend names no platform: Triton then reports the backend's name.
      const expected = simpleMetadata('serval_test', 'grpc');
      expect(await client.call('ModelMetadata', { name: 'simple', version: '' })).toEqual(expected);
      expect(await client.call('ModelMetadata', { name: 'simple', version: '1' })).toEqual(expected);
    });

    it('metadata, config and statistics of an unknown model or version: NOT_FOUND with Triton’s text', async () => {
      for (const method of ['ModelMetadata', 'ModelConfig', 'ModelStatistics']) {
        const e1 = await client.error(method, { name: 'no_such_model', version: '' });
        expect([method, e1.code, e1.details]).toEqual([method, status.NOT_FOUND, UNKNOWN('no_such_model')]);
        const e2 = await client.error(method, { name: 'simple', version: '4' });
        expect([method, e2.code, e2.details]).toEqual([
          method,
          status.NOT_FOUND,
          "Request for unknown model: 'simple' version 4 is not found",
        ]);
      }
    });

    it.each(['simple', 'identity_fp32'])('ModelConfig of %s carries the same content as the HTTP config endpoint', async (model) => {
      const { log } = capturedLogger();
      const app: FastifyInstance = buildHttpServer(t.core, log, { maxInputSize: 1 << 20 });
      try {
        const http = (await app.inject({ method: 'GET', url: `/v2/models/${model}/config` })).json<Record<string, unknown>>();
        const { config } = await client.call<{ config: Record<string, unknown> }>('ModelConfig', { name: model, version: '' });
        // The fields that matter, spelled out...
        expect(config.name).toBe(model);
        expect(config.max_batch_size).toBe(http.max_batch_size);
        const io = (c: Record<string, unknown>, key: string) =>
          (c[key] as { name: string; data_type: string; dims: (number | string)[] }[]).map((x) => [
            x.name,
            x.data_type,
            x.dims.map(Number),
          ]);
        expect(io(config, 'input')).toEqual(io(http, 'input'));
        expect(io(config, 'output')).toEqual(io(http, 'output'));
        const groups = (c: Record<string, unknown>) =>
          (c.instance_group as { name: string; kind: string; count: number }[]).map((x) => [x.name, x.kind, x.count]);
        expect(groups(config)).toEqual(groups(http));
        // ...and every field of the JSON form, with the same value.
        expect(projectOnto(http, config)).toEqual(http);
      } finally {
        await app.close();
      }
    });

    it('ModelConfig of identity_fp32 has its instance group, batching and dims', async () => {
      const { config } = await client.call<{ config: Record<string, unknown> }>('ModelConfig', { name: 'identity_fp32', version: '1' });
      expect(config).toMatchObject({
        name: 'identity_fp32',
        backend: 'serval_test',
        max_batch_size: 4,
        input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: ['3'] }],
        instance_group: [{ name: 'identity_fp32_0', kind: 'KIND_CPU', count: 2 }],
        dynamic_batching: { max_queue_delay_microseconds: '100' },
      });
    });

    it('ModelStatistics counts a batch-3 inference as 3 inferences in 1 execution', async () => {
      const stat = async () => (await client.call<StatisticsReply>('ModelStatistics', { name: 'simple', version: '' })).model_stats;
      const [before] = await stat();
      expect(before).toMatchObject({ name: 'simple', version: '1' });
      await client.call('ModelInfer', simpleGrpcRequest(range(48), range(48)));
      const [after] = await stat();
      const delta = (f: (s: NonNullable<typeof after>) => string) => Number(f(after!)) - Number(f(before!));
      expect(delta((s) => s.inference_count)).toBe(3);
      expect(delta((s) => s.execution_count)).toBe(1);
      expect(delta((s) => s.inference_stats.success.count)).toBe(1);
      expect(delta((s) => s.inference_stats.fail.count)).toBe(0);
      expect(delta((s) => s.inference_stats.compute_infer.ns)).toBe(2000); // the test backend's 2 µs
      const b3 = after!.batch_stats.find((b) => b.batch_size === '3');
      expect(b3?.compute_infer.count).toBe('1');
      // '' name: every model; a version: that version only.
      const all = await client.call<StatisticsReply>('ModelStatistics', { name: '', version: '' });
      expect(all.model_stats.map((s) => s.name).sort()).toEqual(['identity_fp32', 'simple']);
      expect((await client.call<StatisticsReply>('ModelStatistics', { name: 'simple', version: '1' })).model_stats).toEqual([after]);
    });

    it('RepositoryIndex', async () => {
      expect(await client.call('RepositoryIndex', { ready: false })).toEqual({
        models: [
          { name: 'identity_fp32', version: '1', state: 'READY', reason: '' },
          { name: 'simple', version: '1', state: 'READY', reason: '' },
        ],
      });
    });
  });

  describe('ModelInfer', () => {
    it('raw_input_contents in, raw_output_contents out: sum and difference, the id echoed', async () => {
      const a = range(16, (i) => i * 1_000_003 - 7);
      const b = range(16, (i) => 5 - i * 31);
      const res = await client.call<InferReply>('ModelInfer', simpleGrpcRequest(a, b, { id: 'grpc-req-1' }));
      expect(res.model_name).toBe('simple');
      expect(res.model_version).toBe('1');
      expect(res.id).toBe('grpc-req-1');
      expect(res.outputs).toMatchObject([
        { name: 'OUTPUT0', datatype: 'INT32', shape: ['1', '16'] },
        { name: 'OUTPUT1', datatype: 'INT32', shape: ['1', '16'] },
      ]);
      expect(res.raw_output_contents).toHaveLength(2);
      expect(fromI32(res.raw_output_contents[0]!)).toEqual(a.map((x, i) => x + b[i]!));
      expect(fromI32(res.raw_output_contents[1]!)).toEqual(a.map((x, i) => x - b[i]!));
    });

    it('typed contents, a batch of 2, on an explicit version', async () => {
      const a = range(32, (i) => i * 3);
      const b = range(32, (i) => 7 - i);
      const res = await client.call<InferReply>('ModelInfer', {
        model_name: 'simple',
        model_version: '1',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [2, 16], contents: { int_contents: a } },
          { name: 'INPUT1', datatype: 'INT32', shape: [2, 16], contents: { int_contents: b } },
        ],
      });
      expect(res.outputs[0]!.shape).toEqual(['2', '16']);
      expect(fromI32(res.raw_output_contents[0]!)).toEqual(a.map((x, i) => x + b[i]!));
    });

    it('returns only the requested outputs', async () => {
      const a = range(16, (i) => i * i);
      const res = await client.call<InferReply>('ModelInfer', simpleGrpcRequest(a, range(16), { outputs: [{ name: 'OUTPUT1' }] }));
      expect(res.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
      expect(res.raw_output_contents).toHaveLength(1);
      expect(fromI32(res.raw_output_contents[0]!)).toEqual(a.map((x, i) => x - i));
    });

    it('FP32 round trips byte for byte through a dynamically batched model', async () => {
      const raw = Buffer.from(new Float32Array([0.5, -1.25, 3.4028234663852886e38, Math.PI, -0, 1e-30]).buffer);
      const res = await client.call<InferReply>('ModelInfer', {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 3] }],
        raw_input_contents: [raw],
      });
      expect(res.outputs).toMatchObject([{ name: 'OUTPUT0', datatype: 'FP32', shape: ['2', '3'] }]);
      expect(res.raw_output_contents[0]!.equals(raw)).toBe(true);
    });
  });

  describe('ModelInfer errors, mapped to gRPC status codes with Triton’s texts', () => {
    const a = range(16);
    afterEach(async () => {
      // Every refusal leaves the server answering good requests.
      const res = await client.call<InferReply>('ModelInfer', simpleGrpcRequest(a, a));
      expect(fromI32(res.raw_output_contents[0]!)).toEqual(a.map((x) => 2 * x));
    });

    const expectInferError = (req: Record<string, unknown>, code: number, details: string) =>
      expectGrpcError(client, 'ModelInfer', req, code, details);
    const withInput = (i: number, patch: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
      const req = simpleGrpcRequest(a, a, extra);
      const inputs = req.inputs as Record<string, unknown>[];
      inputs[i] = { ...inputs[i], ...patch };
      return req;
    };

    it('unknown model and version: NOT_FOUND (5)', async () => {
      await expectInferError({ ...simpleGrpcRequest(a, a), model_name: 'no_such_model' }, 5, UNKNOWN('no_such_model'));
      await expectInferError(
        { ...simpleGrpcRequest(a, a), model_version: '999' },
        5,
        "Request for unknown model: 'simple' version 999 is not found",
      );
    });

    it('wrong datatype: INVALID_ARGUMENT (3)', async () => {
      await expectInferError(
        withInput(0, { datatype: 'FP32' }),
        3,
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'",
      );
    });

    it('wrong shape: INVALID_ARGUMENT (3) with the request id and Triton’s NOTE', async () => {
      await expectInferError(
        withInput(1, { shape: [1, 4, 4] }, { id: 'g-shape' }),
        3,
        `[request id: g-shape] unexpected shape for input 'INPUT1' for model 'simple'. Expected [-1,16], got [1,4,4]. ${MAX_BATCH_NOTE}`,
      );
    });

    it('byte size that does not match the shape: INVALID_ARGUMENT (3)', async () => {
      await expectInferError(
        { ...simpleGrpcRequest(a, a), raw_input_contents: [i32(a), i32(range(20))] },
        3,
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 80",
      );
      await expectInferError(
        { ...simpleGrpcRequest(a, a), raw_input_contents: [i32(a)] },
        3,
        'raw_input_contents has 1 entries but the request has 2 inputs; give raw contents for every input or for none',
      );
    });

    it('missing input: INVALID_ARGUMENT (3)', async () => {
      await expectInferError(
        { model_name: 'simple', inputs: [{ name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }], raw_input_contents: [i32(a)] },
        3,
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT1'], but missing required input(s) ['INPUT0']. Please provide all required input(s).",
      );
    });

    it('shared_memory_region naming no registered region: NOT_FOUND (5)', async () => {
      const shm = { shared_memory_region: { string_param: 'region0' }, shared_memory_byte_size: { int64_param: '64' } };
      await expectInferError(
        {
          model_name: 'simple',
          inputs: [
            { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: shm },
            { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: a } },
          ],
        },
        5,
        "Unable to find shared memory region: 'region0'",
      );
      await expectInferError(
        simpleGrpcRequest(a, a, { outputs: [{ name: 'OUTPUT0', parameters: shm }] }),
        5,
        "Unable to find shared memory region: 'region0'",
      );
    });

    it('classification -1: INVALID_ARGUMENT (3)', async () => {
      await expectInferError(
        simpleGrpcRequest(a, a, { outputs: [{ name: 'OUTPUT0', parameters: { classification: { int64_param: '-1' } } }] }),
        3,
        "output 'OUTPUT0': 'classification' must be a non-negative integer",
      );
    });

    it('a method the server does not implement: UNIMPLEMENTED (12)', async () => {
      const e = await client.error('CudaSharedMemoryStatus', {});
      expect(e.code).toBe(status.UNIMPLEMENTED);
    });
  });

  it('metrics read the same counters: nv_inference_request_success counts the successful ModelInfer calls', async () => {
    const registry = buildRegistry(t.core);
    const line = (text: string, name: string) => new RegExp(`^${name}\\{model="simple",version="1"\\} (\\d+)$`, 'm').exec(text)?.[1];
    const before = Number(line(await registry.metrics(), 'nv_inference_request_success'));
    const stats = async () => (await client.call<StatisticsReply>('ModelStatistics', { name: 'simple', version: '1' })).model_stats[0]!;
    expect(before).toBe(Number((await stats()).inference_stats.success.count));
    for (let i = 0; i < 4; i++) await client.call('ModelInfer', simpleGrpcRequest(range(16), range(16)));
    await client.error('ModelInfer', { ...simpleGrpcRequest(range(16), range(16)), model_version: '2' });
    const text = await registry.metrics();
    expect(line(text, 'nv_inference_request_success')).toBe(String(before + 4));
    expect(line(text, 'nv_inference_count')).toBe((await stats()).inference_count);
  });
});

describe('a core that is shutting down', () => {
  it('ServerReady false, ModelInfer UNAVAILABLE (14) with the core’s text, not logged', async () => {
    const t = await startTestCore();
    const { log, lines } = capturedLogger();
    const g = await startGrpcServer(t.core, log, '127.0.0.1', 0);
    const client = grpcClient(`127.0.0.1:${g.port}`);
    try {
      t.core.stopAccepting();
      expect(await client.call('ServerLive', {})).toEqual({ live: true });
      expect(await client.call('ServerReady', {})).toEqual({ ready: false });
      expect(await client.call('ModelReady', { name: 'simple', version: '' })).toEqual({ ready: false });
      const e = await client.error('ModelInfer', simpleGrpcRequest(range(16), range(16)));
      expect({ code: e.code, details: e.details }).toEqual({
        code: 14,
        details: 'Server is shutting down; no new inference requests are accepted',
      });
      expect(lines).toEqual([]);
    } finally {
      client.close();
      g.server.forceShutdown();
      await t.close();
    }
  });
});

describe('the one error path, over a fake CoreApi', () => {
  const core = fakeCore();
  const logged = capturedLogger();
  const lines = logged.lines;
  let g: GrpcServer;
  let client: GrpcClient;
  const req = (model: string, id = 'grpc-fault-1') => ({ ...simpleGrpcRequest(range(16), range(16), { id }), model_name: model });

  beforeAll(async () => {
    g = await startGrpcServer(core, logged.log, '127.0.0.1', 0);
    client = grpcClient(`127.0.0.1:${g.port}`);
  });
  afterAll(() => {
    client?.close();
    g?.server.forceShutdown();
  });
  afterEach(() => {
    lines.length = 0;
  });

  it.each(['boom', 'boom_async'])(
    'an unexpected Error from infer (%s) is INTERNAL (13) "boom", logged once with method and request id',
    async (model) => {
      const e = await client.error('ModelInfer', req(model));
      expect({ code: e.code, details: e.details }).toEqual({ code: 13, details: 'boom' });
      expect(core.requests.at(-1)).toMatchObject({ modelName: model, id: 'grpc-fault-1' });
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^time=\S+ level=error msg="grpc request failed" method=\/inference\.GRPCInferenceService\/ModelInfer request_id=grpc-fault-1 error="Error: boom\\n {4}at /,
      );
    },
  );

  it('a ServalError INTERNAL from ModelMetadata is INTERNAL (13) with its text, logged once without a request id', async () => {
    const e = await client.error('ModelMetadata', { name: 'internal', version: '' });
    expect({ code: e.code, details: e.details }).toEqual({ code: 13, details: 'metadata exploded inside the core' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/ level=error msg="grpc request failed" method=\/inference\.GRPCInferenceService\/ModelMetadata error=/);
    expect(lines[0]).not.toContain('request_id=');
    expect(lines[0]).toContain('metadata exploded inside the core');
  });

  it('refusals and client errors keep their codes and texts and are not logged', async () => {
    const cases: [string, number, string][] = [
      ['invalid', 3, "[request id: <id_unknown>] infer: bad request for model 'invalid'"],
      ['nope', 5, UNKNOWN('nope')],
      ['unsupported', 12, 'infer: not supported by the fake core'],
      ['busy', 14, 'Exceeds maximum queue size'],
    ];
    for (const [model, code, details] of cases) {
      const e = await client.error('ModelInfer', req(model));
      expect({ model, code: e.code, details: e.details }).toEqual({ model, code, details });
    }
    const e = await client.error('ModelConfig', { name: 'invalid', version: '' });
    expect({ code: e.code, details: e.details }).toEqual({
      code: 3,
      details: "[request id: <id_unknown>] config: bad request for model 'invalid'",
    });
    expect(lines).toEqual([]);
  });
});

describe('a ModelInfer message that does not parse', () => {
  it('is answered INTERNAL (Triton’s gRPC C++ status for an unparseable request) naming the fault, not logged as a server fault; the server keeps serving', async () => {
    const t = await startTestCore();
    const { log, lines } = capturedLogger();
    const g = await startGrpcServer(t.core, log, '127.0.0.1', 0);
    const raw = new grpc.Client(`127.0.0.1:${g.port}`, grpc.credentials.createInsecure());
    const client = grpcClient(`127.0.0.1:${g.port}`);
    try {
      const same = (b: Buffer) => b;
      const err = await new Promise<grpc.ServiceError>((resolve, reject) =>
        raw.makeUnaryRequest('/inference.GRPCInferenceService/ModelInfer', same, same, Buffer.from([0x0a, 0xff, 0xff]), (e) =>
          e ? resolve(e) : reject(new Error('a malformed message was answered OK')),
        ),
      );
      expect(err.code).toBe(grpc.status.INTERNAL);
      expect(err.details).toMatch(/^malformed ModelInferRequest: .*truncated varint/);
      // The client's fault, though Triton's status is INTERNAL: no error line with a stack.
      expect(errorLines(lines)).toEqual([]);
      const a = range(16);
      const res = await client.call<{ raw_output_contents: Buffer[] }>('ModelInfer', simpleGrpcRequest(a, a));
      expect(fromI32(res.raw_output_contents[0]!)).toEqual(a.map((x) => 2 * x));
    } finally {
      raw.close();
      client.close();
      g.server.forceShutdown();
      await t.close();
    }
  });
});
