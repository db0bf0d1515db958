// src/frontends/http/server.ts in-process: fastify's inject() against a real InferenceCore over
// the test backend (no spawned server, no ONNX Runtime), and against a fake CoreApi for the one
// error path. test/integration/http_api.test.ts drives the same routes end to end.
import zlib from 'node:zlib';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { buildRegistry } from '../../src/frontends/metrics/metrics.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { MAX_BATCH_NOTE } from '../helpers/errors.js';
import { capturedLogger, errorLines, fakeCore } from '../helpers/frontends.js';
import { type HttpInferResponse, joinBinaryBody, splitBinaryResponse } from '../helpers/http.js';
import { simpleJsonInputs, simpleMetadata } from '../helpers/simple.js';
import { fromI32, i32, range } from '../helpers/tensors.js';
import { identityTestModel, SIMPLE_TEST_MODEL, startTestCore, type TestCore, type TestModel } from '../helpers/test_core.js';

type Reply = Awaited<ReturnType<FastifyInstance['inject']>>;

const IDENTITY_INT32 = identityTestModel('identity_int32', 'INT32', [-1], 8);

/** One instance, no batching beyond 1, a queue of one: the third concurrent request is refused. */
const SLOW_QUEUE = identityTestModel('slowq', 'FP32', [2], 1, {
  extraConfig: 'dynamic_batching { default_queue_policy { max_queue_size: 1 } }',
  delayMs: 300,
});

/** A model whose config contradicts its model file: it stays UNAVAILABLE. */
const BAD_DIMS: TestModel = {
  name: 'bad_dims',
  config: SIMPLE_TEST_MODEL.config
    .replace('name: "simple"', 'name: "bad_dims"')
    .replace('dims: [ 16 ] }, { name: "INPUT1"', 'dims: [ 8 ] }, { name: "INPUT1"'),
  model: SIMPLE_TEST_MODEL.model,
};

const UNKNOWN = (m: string): string => `Request for unknown model: '${m}' is not found`;

function expectError(res: Reply, status: number, message: string | RegExp): void {
  expect(res.statusCode, res.body).toBe(status);
  // Triton's types: text/plain for an infer route's errors, application/json for the rest (no charset).
  expect(res.headers['content-type']).toMatch(/^(application\/json|text\/plain)$/);
  const err = res.json<{ error: string }>().error;
  if (typeof message === 'string') expect(err).toBe(message);
  else expect(err).toMatch(message);
}

const post = (app: FastifyInstance, url: string, payload: InjectOptions['payload'], headers: Record<string, string | number> = {}) =>
  app.inject({ method: 'POST', url, payload, headers });
const inferJson = (app: FastifyInstance, model: string, doc: unknown, version?: string) =>
  post(app, version ? `/v2/models/${model}/versions/${version}/infer` : `/v2/models/${model}/infer`, JSON.stringify(doc), {
    'content-type': 'application/json',
  });

interface StatsDoc {
  model_stats: {
    name: string;
    version: string;
    inference_count: number;
    execution_count: number;
    inference_stats: Record<
      'success' | 'fail' | 'queue' | 'compute_input' | 'compute_infer' | 'compute_output',
      { count: number; ns: number }
    >;
    batch_stats: { batch_size: number; compute_infer: { count: number; ns: number } }[];
  }[];
}

describe('the HTTP front-end over a real core', () => {
  let t: TestCore;
  let app: FastifyInstance;
  let lines: string[];

  beforeAll(async () => {
    t = await startTestCore([SIMPLE_TEST_MODEL, IDENTITY_INT32, SLOW_QUEUE]);
    const logged = capturedLogger();
    lines = logged.lines;
    app = buildHttpServer(t.core, logged.log, { maxInputSize: 1 << 20 });
  });
  afterAll(async () => {
    await app?.close();
    await t?.close();
  });
  // Client errors and refusals are answers, not server faults: nothing here is ever logged.
  afterEach(() => {
    const logged = lines.splice(0);
    expect(logged).toEqual([]);
  });

  describe('health, metadata, configuration, statistics, repository', () => {
    it('reports live and ready with 200 and the KServe v2 bodies', async () => {
      for (const [url, body] of [
        ['/v2/health/live', { live: true }],
        ['/v2/health/ready', { ready: true }],
      ] as const) {
        const res = await app.inject({ method: 'GET', url });
        expect(res.statusCode, url).toBe(200);
        expect(res.headers['content-type']).toBe('application/json');
        expect(res.json()).toEqual(body);
      }
    });

    it('returns the server metadata', async () => {
      const res = await app.inject({ method: 'GET', url: '/v2' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json()).toEqual({ name: 'serval', version: '0.0.0-test', extensions: ['statistics'] });
    });

    it('returns model metadata with the batch dimension prepended, by model and by version', async () => {
      // The test backend names no platform: Triton then reports the backend's name.
      const expected = simpleMetadata('serval_test', 'http');
      for (const url of ['/v2/models/simple', '/v2/models/simple/versions/1']) {
        const res = await app.inject({ method: 'GET', url });
        expect(res.statusCode, url).toBe(200);
        expect(res.json()).toEqual(expected);
      }
    });

    it('reports model readiness per model and version (400 when not ready or unknown)', async () => {
      const status = async (url: string) => (await app.inject({ method: 'GET', url })).statusCode;
      expect(await status('/v2/models/simple/ready')).toBe(200);
      expect(await status('/v2/models/simple/versions/1/ready')).toBe(200);
      expect(await status('/v2/models/simple/versions/2/ready')).toBe(400);
      expect(await status('/v2/models/x/ready')).toBe(400);
      // KServe v2's body beside Triton's status.
      expect((await app.inject({ method: 'GET', url: '/v2/models/simple/ready' })).json()).toEqual({ name: 'simple', ready: true });
      expect((await app.inject({ method: 'GET', url: '/v2/models/simple/versions/2/ready' })).json()).toEqual({
        name: 'simple',
        ready: false,
      });
    });

    it('answers an unknown model or version with 404 and Triton’s text', async () => {
      expectError(await app.inject({ method: 'GET', url: '/v2/models/x' }), 404, UNKNOWN('x'));
      expectError(await app.inject({ method: 'GET', url: '/v2/models/x/config' }), 404, UNKNOWN('x'));
      expectError(
        await app.inject({ method: 'GET', url: '/v2/models/simple/versions/7' }),
        404,
        "Request for unknown model: 'simple' version 7 is not found",
      );
      expectError(
        await app.inject({ method: 'GET', url: '/v2/models/simple/versions/7/config' }),
        404,
        "Request for unknown model: 'simple' version 7 is not found",
      );
    });

    it('returns the model configuration in Triton’s JSON form (snake_case, defaults filled in)', async () => {
      const res = await app.inject({ method: 'GET', url: '/v2/models/simple/config' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const c = res.json<Record<string, unknown>>();
      expect(c).toMatchObject({
        name: 'simple',
        backend: 'serval_test',
        max_batch_size: 8,
        version_policy: { latest: { num_versions: 1 } },
        input: ['INPUT0', 'INPUT1'].map((name) => ({
          name,
          data_type: 'TYPE_INT32',
          format: 'FORMAT_NONE',
          dims: [16],
          is_shape_tensor: false,
          allow_ragged_batch: false,
          optional: false,
        })),
        output: ['OUTPUT0', 'OUTPUT1'].map((name) => ({ name, data_type: 'TYPE_INT32', dims: [16], label_filename: '' })),
        instance_group: [{ name: 'simple_0', kind: 'KIND_CPU', count: 1, gpus: [] }],
        default_model_filename: 'model.json',
      });
      // Triton's JSON printer keeps proto field names: no camelCase key anywhere.
      const keys = (v: unknown): string[] =>
        Array.isArray(v) ? v.flatMap(keys) : v && typeof v === 'object' ? Object.entries(v).flatMap(([k, x]) => [k, ...keys(x)]) : [];
      const all = keys(c);
      expect(all).toContain('max_batch_size');
      expect(all).toContain('instance_group');
      expect(all.filter((k) => !/^[a-z0-9_]+$/.test(k))).toEqual([]);
      // The same document by version.
      expect((await app.inject({ method: 'GET', url: '/v2/models/simple/versions/1/config' })).json()).toEqual(c);
      // A dynamic_batching block appears when the config has one.
      const slow = (await app.inject({ method: 'GET', url: '/v2/models/slowq/config' })).json<Record<string, unknown>>();
      expect(slow).toMatchObject({ max_batch_size: 1, dynamic_batching: { default_queue_policy: { max_queue_size: 1 } } });
    });

    it('counts an inference in the statistics extension, and 404s an unknown model', async () => {
      const stat = async (url = '/v2/models/simple/stats') => {
        const res = await app.inject({ method: 'GET', url });
        expect(res.statusCode, url).toBe(200);
        return res.json<StatsDoc>().model_stats;
      };
      const [before] = await stat();
      expect(before).toMatchObject({ name: 'simple', version: '1' });
      const res = await inferJson(app, 'simple', { inputs: simpleJsonInputs(range(48), range(48), [3, 16]) });
      expect(res.statusCode, res.body).toBe(200);
      const [after] = await stat();
      expect(after!.inference_count - before!.inference_count).toBe(3);
      expect(after!.execution_count - before!.execution_count).toBe(1);
      expect(after!.inference_stats.success.count - before!.inference_stats.success.count).toBe(1);
      expect(after!.inference_stats.fail.count - before!.inference_stats.fail.count).toBe(0);
      // The test backend reports 2 µs of compute_infer per execution.
      expect(after!.inference_stats.compute_infer.ns - before!.inference_stats.compute_infer.ns).toBe(2000);
      const b3 = after!.batch_stats.find((b) => b.batch_size === 3);
      const b3before = before!.batch_stats.find((b) => b.batch_size === 3);
      expect((b3?.compute_infer.count ?? 0) - (b3before?.compute_infer.count ?? 0)).toBe(1);

      expect(await stat('/v2/models/simple/versions/1/stats')).toEqual([after]);
      expect((await stat('/v2/models/stats')).map((s) => s.name).sort()).toEqual(['identity_int32', 'simple', 'slowq']);
      expectError(await app.inject({ method: 'GET', url: '/v2/models/x/stats' }), 404, UNKNOWN('x'));
      expectError(
        await app.inject({ method: 'GET', url: '/v2/models/simple/versions/7/stats' }),
        404,
        "Request for unknown model: 'simple' version 7 is not found",
      );
    });

    it('lists the repository index', async () => {
      const res = await post(app, '/v2/repository/index', '{}', { 'content-type': 'application/json' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual([
        { name: 'identity_int32', version: '1', state: 'READY' },
        { name: 'simple', version: '1', state: 'READY' },
        { name: 'slowq', version: '1', state: 'READY' },
      ]);
      // An empty body is an empty request.
      expect((await post(app, '/v2/repository/index', '')).json()).toEqual(res.json());
      // Triton's text for a 'ready' that is not a boolean (Triton answers 500; Serval 400, see docs/config_checks.md).
      for (const bad of ['"yes"', '1', 'null', '[true]']) {
        expectError(await post(app, '/v2/repository/index', `{"ready": ${bad}}`), 400, 'attempt to access JSON non-boolean as boolean');
      }
      expect((await post(app, '/v2/repository/index', '{"ready": false}')).json()).toEqual(res.json());
    });

    it('answers unknown routes with 404 JSON', async () => {
      expectError(await app.inject({ method: 'GET', url: '/v2/nothing/here' }), 404, 'no route for GET /v2/nothing/here');
      expect((await app.inject({ method: 'GET', url: '/v2/models/simple/infer' })).statusCode).toBe(404);
    });
  });

  describe('inference', () => {
    const a = range(16, (i) => 7 * i - 50);
    const b = range(16, (i) => 1000 - i);
    const sum = a.map((x, i) => x + b[i]!);
    const diff = a.map((x, i) => x - b[i]!);

    it('JSON in, JSON out: OUTPUT0 is the sum, OUTPUT1 the difference; the id is echoed', async () => {
      const res = await inferJson(app, 'simple', { id: 'req-42', inputs: simpleJsonInputs(a, b) });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.headers['inference-header-content-length']).toBeUndefined();
      expect(res.json()).toEqual({
        model_name: 'simple',
        model_version: '1',
        id: 'req-42',
        outputs: [
          { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: sum },
          { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: diff },
        ],
      });
    });

    it('a batch of 2 nested rows on an explicit version path; no id when none was sent', async () => {
      const rows = [range(16), range(16, (i) => -i)];
      const res = await inferJson(
        app,
        'simple',
        { inputs: simpleJsonInputs(rows, [range(16, () => 1), range(16, () => 2)], [2, 16]) },
        '1',
      );
      expect(res.statusCode, res.body).toBe(200);
      const doc = res.json<HttpInferResponse>();
      expect(doc).not.toHaveProperty('id');
      expect(doc.outputs[0]).toEqual({
        name: 'OUTPUT0',
        datatype: 'INT32',
        shape: [2, 16],
        data: [...range(16, (i) => i + 1), ...range(16, (i) => 2 - i)],
      });
    });

    it('binary tensor extension in, binary_data_output out: header length and binary tail', async () => {
      const { body, headerLength } = joinBinaryBody(
        {
          parameters: { binary_data_output: true },
          inputs: [
            { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
            { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
          ],
        },
        [i32(a), i32(b)],
      );
      const res = await post(app, '/v2/models/simple/infer', body, {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': headerLength,
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toBe('application/octet-stream');
      const len = Number(res.headers['inference-header-content-length']);
      expect(len).toBe(res.rawPayload.byteLength - 128);
      const { doc, binary } = splitBinaryResponse(res.rawPayload, len);
      expect(doc).toEqual({
        model_name: 'simple',
        model_version: '1',
        outputs: [
          { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
          { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        ],
      });
      expect(fromI32(binary.get('OUTPUT0')!)).toEqual(sum);
      expect(fromI32(binary.get('OUTPUT1')!)).toEqual(diff);
    });

    it('mixes JSON and binary inputs (no Content-Type), and binary and JSON outputs per output', async () => {
      const { body, headerLength } = joinBinaryBody(
        {
          inputs: [
            { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: a },
            { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
          ],
          outputs: [
            { name: 'OUTPUT1', parameters: { binary_data: true } },
            { name: 'OUTPUT0', parameters: { binary_data: false } },
          ],
        },
        [i32(b)],
      );
      const res = await post(app, '/v2/models/simple/infer', body, { 'inference-header-content-length': headerLength });
      expect(res.statusCode, res.body).toBe(200);
      const { doc, binary } = splitBinaryResponse(res.rawPayload, Number(res.headers['inference-header-content-length']));
      expect(doc.outputs).toEqual([
        { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: sum },
      ]);
      expect([...binary.keys()]).toEqual(['OUTPUT1']);
      expect(fromI32(binary.get('OUTPUT1')!)).toEqual(diff);
    });

    it('returns only the requested outputs, in the requested order', async () => {
      const one = await inferJson(app, 'simple', { inputs: simpleJsonInputs(a, b), outputs: [{ name: 'OUTPUT1' }] });
      expect(one.json<HttpInferResponse>().outputs).toEqual([{ name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: diff }]);
      const both = await inferJson(app, 'simple', { inputs: simpleJsonInputs(a, b), outputs: [{ name: 'OUTPUT1' }, { name: 'OUTPUT0' }] });
      expect(both.json<HttpInferResponse>().outputs.map((o) => o.name)).toEqual(['OUTPUT1', 'OUTPUT0']);
    });

    it('classification: the top k as "score:index" BYTES, ties in index order', async () => {
      const res = await inferJson(app, 'identity_int32', {
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 5], data: [3, 9, -1, 9, 4] }],
        outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }],
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json<HttpInferResponse>().outputs).toEqual([
        { name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 2], data: ['9.000000:1', '9.000000:3'] },
      ]);
    });

    it('accepts a gzip- or deflate-compressed request body', async () => {
      for (const [enc, compress] of [
        ['gzip', zlib.gzipSync],
        ['deflate', zlib.deflateSync],
      ] as const) {
        const res = await post(app, '/v2/models/simple/infer', compress(Buffer.from(JSON.stringify({ inputs: simpleJsonInputs(a, b) }))), {
          'content-type': 'application/json',
          'content-encoding': enc,
        });
        expect(res.statusCode, `${enc}: ${res.body}`).toBe(200);
        expect(res.json<HttpInferResponse>().outputs[0]!.data).toEqual(sum);
      }
      // A binary request: Inference-Header-Content-Length counts the uncompressed bytes.
      const { body, headerLength } = joinBinaryBody(
        { inputs: [0, 1].map((i) => ({ name: `INPUT${i}`, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })) },
        [i32(a), i32(b)],
      );
      const res = await post(app, '/v2/models/simple/infer', zlib.gzipSync(body), {
        'content-encoding': 'gzip',
        'inference-header-content-length': headerLength,
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json<HttpInferResponse>().outputs[1]!.data).toEqual(diff);
      // A body that is not what its Content-Encoding says.
      expectError(
        await post(app, '/v2/models/simple/infer', 'definitely not gzip', { 'content-encoding': 'gzip' }),
        400,
        /^failed to decompress the request body \(Content-Encoding: gzip\)/,
      );
    });

    it('compresses the response when the client accepts gzip', async () => {
      const res = await post(app, '/v2/models/simple/infer', JSON.stringify({ inputs: simpleJsonInputs(a, b) }), {
        'content-type': 'application/json',
        'accept-encoding': 'gzip',
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-encoding']).toBe('gzip');
      const doc = JSON.parse(zlib.gunzipSync(res.rawPayload).toString('utf8')) as HttpInferResponse;
      expect(doc.outputs[0]!.data).toEqual(sum);
    });
  });

  describe('inference errors, with Triton’s status codes and texts', () => {
    const good = () => simpleJsonInputs(range(16), range(16));
    // Every refusal leaves the server answering good requests.
    afterEach(async () => {
      const res = await inferJson(app, 'simple', { inputs: good() });
      expect(res.statusCode).toBe(200);
      expect(res.json<HttpInferResponse>().outputs[0]!.data).toEqual(range(16, (i) => 2 * i));
    });

    it('malformed JSON (500, as Triton 2.73) and JSON of the wrong shape (400)', async () => {
      const url = '/v2/models/simple/infer';
      expectError(await post(app, url, '{"inputs": [ {"name": '), 500, /^failed to parse the request JSON buffer: /);
      expectError(await post(app, url, ''), 500, /^failed to parse the request JSON buffer: /);
      expectError(await post(app, url, '[1,2,3]'), 400, 'the request JSON must be an object');
      expectError(await post(app, url, '{}'), 400, "the request must have an 'inputs' array");
      expectError(
        await post(app, url, JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }] })),
        400,
        "input 'INPUT0' has neither 'data' nor 'binary_data_size'",
      );
    });

    it('unknown model and unknown version: 404', async () => {
      expectError(await inferJson(app, 'x', { inputs: good() }), 404, UNKNOWN('x'));
      expectError(
        await inferJson(app, 'simple', { inputs: good() }, '999'),
        404,
        "Request for unknown model: 'simple' version 999 is not found",
      );
    });

    it('wrong datatype: 400', async () => {
      expectError(
        await inferJson(app, 'simple', { inputs: simpleJsonInputs(range(16), range(16), [1, 16], [1, 16], 'FP32') }),
        400,
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'",
      );
    });

    it('wrong shape: 400 with the request id and Triton’s NOTE', async () => {
      expectError(
        await inferJson(app, 'simple', { id: 'shape-1', inputs: simpleJsonInputs(range(8), range(8), [1, 8]) }),
        400,
        `[request id: shape-1] unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,8]. ${MAX_BATCH_NOTE}`,
      );
      expectError(
        await inferJson(app, 'simple', { inputs: simpleJsonInputs(range(9 * 16), range(9 * 16), [9, 16]) }),
        400,
        "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'simple'",
      );
    });

    it('missing input: 400', async () => {
      expectError(
        await inferJson(app, 'simple', { inputs: good().slice(0, 1) }),
        400,
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], " +
          "but missing required input(s) ['INPUT1']. Please provide all required input(s).",
      );
    });

    it('byte size that does not match the shape: 400 (binary and JSON)', async () => {
      const { body, headerLength } = joinBinaryBody(
        {
          inputs: [0, 1].map((i) => ({
            name: `INPUT${i}`,
            datatype: 'INT32',
            shape: [1, 16],
            parameters: { binary_data_size: i === 0 ? 60 : 64 },
          })),
        },
        [i32(range(15)), i32(range(16))],
      );
      expectError(
        await post(app, '/v2/models/simple/infer', body, { 'inference-header-content-length': headerLength }),
        400,
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60",
      );
      expectError(
        await inferJson(app, 'simple', { inputs: simpleJsonInputs(range(15), range(16)) }),
        400,
        "Unable to parse 'data': Shape does not match true shape of 'data' field",
      );
      // The binary data must be exactly what the header announces.
      expectError(
        await post(app, '/v2/models/simple/infer', body.subarray(0, body.byteLength - 10), {
          'inference-header-content-length': headerLength,
        }),
        400,
        "input 'INPUT1': binary_data_size 64 runs past the end of the request body (54 bytes of binary data left)",
      );
      expectError(
        await post(app, '/v2/models/simple/infer', Buffer.concat([body, Buffer.alloc(12)]), {
          'inference-header-content-length': headerLength,
        }),
        400,
        'the request body has 12 bytes of binary data that no input claims',
      );
    });

    it('shared_memory_region naming no registered region: 404 (shared_memory.test.ts has the rest)', async () => {
      const shm = { shared_memory_region: 'region0', shared_memory_byte_size: 64 };
      expectError(
        await inferJson(app, 'simple', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: shm }, good()[1]] }),
        404,
        "Unable to find shared memory region: 'region0'",
      );
      expectError(
        await inferJson(app, 'simple', { inputs: good(), outputs: [{ name: 'OUTPUT0', parameters: shm }] }),
        404,
        "Unable to find shared memory region: 'region0'",
      );
    });

    it('classification that is not a non-negative integer: 400', async () => {
      for (const classification of [-1, 1.5, 'two']) {
        expectError(
          await inferJson(app, 'simple', { inputs: good(), outputs: [{ name: 'OUTPUT0', parameters: { classification } }] }),
          400,
          "output 'OUTPUT0': 'classification' must be a non-negative integer",
        );
      }
    });

    it('a full queue: 503 "Exceeds maximum queue size" at once, not logged; the queued request still runs', async () => {
      const req = () => inferJson(app, 'slowq', { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [0.5, -2] }] });
      const pending = () => t.core.metricsSnapshot().find((r) => r.model === 'slowq')!.stats.pending;
      const until = async (n: number) => {
        for (let i = 0; i < 200 && pending() !== n; i++) await new Promise((r) => setTimeout(r, 2));
        expect(pending()).toBe(n);
      };
      const running = req();
      await until(1);
      await new Promise((r) => setTimeout(r, 20)); // the first has left the queue for the instance
      const queued = req();
      await until(2);
      const refused = await req();
      expectError(refused, 503, 'Exceeds maximum queue size');
      for (const res of await Promise.all([running, queued])) {
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json<HttpInferResponse>().outputs[0]!.data).toEqual([0.5, -2]);
      }
    });
  });

  it('a body over maxInputSize is refused with Triton’s 400 and text; one of exactly maxInputSize is served', async () => {
    const body = Buffer.from(JSON.stringify({ inputs: simpleJsonInputs(range(16), range(16)) }));
    const logged = capturedLogger();
    const small = buildHttpServer(t.core, logged.log, { maxInputSize: body.byteLength });
    try {
      const ok = await post(small, '/v2/models/simple/infer', body, { 'content-type': 'application/json' });
      expect(ok.statusCode, ok.body).toBe(200);
      const big = await post(small, '/v2/models/simple/infer', Buffer.concat([body, Buffer.from(' ')]), {
        'content-type': 'application/json',
      });
      expectError(
        big,
        400,
        `Request JSON size of ${body.byteLength + 1} bytes exceeds the maximum allowed value of ${body.byteLength} bytes. ` +
          'Use --http-max-input-size to increase the limit.',
      );
      // And it keeps serving.
      expect((await post(small, '/v2/models/simple/infer', body)).statusCode).toBe(200);
      expect(logged.lines).toEqual([]);
    } finally {
      await small.close();
    }
  });
});

describe('readiness and refusals of a core that is not ready', () => {
  it('a model that failed to load makes the server not ready (strict readiness) and shows in the index', async () => {
    const t = await startTestCore([SIMPLE_TEST_MODEL, BAD_DIMS]);
    const { log, lines } = capturedLogger();
    const app = buildHttpServer(t.core, log, { maxInputSize: 1 << 20 });
    try {
      expect((await app.inject({ method: 'GET', url: '/v2/health/live' })).statusCode).toBe(200);
      const notReady = await app.inject({ method: 'GET', url: '/v2/health/ready' });
      expect(notReady.statusCode).toBe(400);
      expect(notReady.json()).toEqual({ ready: false });
      expect((await app.inject({ method: 'GET', url: '/v2/models/simple/ready' })).statusCode).toBe(200);
      expect((await app.inject({ method: 'GET', url: '/v2/models/bad_dims/ready' })).statusCode).toBe(400);
      expectError(
        await app.inject({ method: 'GET', url: '/v2/models/bad_dims' }),
        404,
        "Request for unknown model: 'bad_dims' has no available versions",
      );

      const index = (await post(app, '/v2/repository/index', '{}')).json<
        { name: string; version?: string; state?: string; reason?: string }[]
      >();
      expect(index.map((r) => [r.name, r.version, r.state])).toEqual([
        ['bad_dims', '1', 'UNAVAILABLE'],
        ['simple', '1', 'READY'],
      ]);
      expect(index[0]!.reason).toContain(
        "model 'bad_dims', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,16]) but the model configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [-1,8])",
      );
      expect(index[1]).not.toHaveProperty('reason');
      const ready = (await post(app, '/v2/repository/index', JSON.stringify({ ready: true }))).json<{ name: string }[]>();
      expect(ready).toEqual([{ name: 'simple', version: '1', state: 'READY' }]);
      expect(lines).toEqual([]);
    } finally {
      await app.close();
      await t.close();
    }
  });

  it('while shutting down: ready 400, inference 503 UNAVAILABLE, connections closed, nothing logged', async () => {
    const t = await startTestCore();
    const { log, lines } = capturedLogger();
    const app = buildHttpServer(t.core, log, { maxInputSize: 1 << 20 });
    try {
      t.core.stopAccepting();
      expect((await app.inject({ method: 'GET', url: '/v2/health/live' })).statusCode).toBe(200);
      const ready = await app.inject({ method: 'GET', url: '/v2/health/ready' });
      expect(ready.statusCode).toBe(400);
      expect(ready.headers.connection).toBe('close');
      const res = await inferJson(app, 'simple', { inputs: simpleJsonInputs(range(16), range(16)) });
      expectError(res, 503, 'Server is shutting down; no new inference requests are accepted');
      expect(res.headers.connection).toBe('close');
      expect(lines).toEqual([]);
    } finally {
      await app.close();
      await t.close();
    }
  });
});

describe('the one error path, over a fake CoreApi', () => {
  const core = fakeCore();
  const { log, lines } = capturedLogger();
  const app = buildHttpServer(core, log, { maxInputSize: 1 << 20 });
  const ids: string[] = [];
  app.addHook('onRequest', (req, _reply, done) => {
    ids.push(req.id);
    done();
  });
  const doc = { id: 'inference-7', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: [1] }] };

  afterAll(() => app.close());
  afterEach(() => {
    lines.length = 0;
  });

  it.each(['boom', 'boom_async'])(
    'an unexpected Error from infer (%s) is a 500 {"error": "boom"}, logged once with the request id',
    async (model) => {
      const res = await inferJson(app, model, doc);
      expect(res.statusCode).toBe(500);
      expect(res.headers['content-type']).toBe('text/plain');
      expect(res.json()).toEqual({ error: 'boom' });
      // The front-end decoded the request and handed it to the core.
      expect(core.requests.at(-1)).toMatchObject({ modelName: model, modelVersion: '', id: 'inference-7' });
      expect(lines).toHaveLength(1);
      const line = lines[0]!;
      expect(line).toMatch(/^time=\S+ level=error msg="http request failed" /);
      expect(line).toContain(` request_id=${ids.at(-1)!} inference_id=inference-7 `);
      expect(line).toContain(` method=POST url=/v2/models/${model}/infer status=500 `);
      expect(line).toMatch(/ error="Error: boom\\n {4}at /); // the stack, for a fault nobody expected
    },
  );

  it('a ServalError INTERNAL (from modelMetadata) is a 500 with its message, logged once', async () => {
    const res = await app.inject({ method: 'GET', url: '/v2/models/internal' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'metadata exploded inside the core' });
    expect(errorLines(lines)).toHaveLength(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(` request_id=${ids.at(-1)!} method=GET url=/v2/models/internal status=500 `);
    expect(lines[0]).toContain('metadata exploded inside the core');
  });

  it('refusals and client errors are answered with their status and not logged', async () => {
    const cases: [string, number, string][] = [
      ['busy', 503, 'Exceeds maximum queue size'],
      ['invalid', 400, "[request id: <id_unknown>] infer: bad request for model 'invalid'"],
      ['unsupported', 501, 'infer: not supported by the fake core'],
      ['nope', 404, UNKNOWN('nope')],
    ];
    for (const [model, status, message] of cases) expectError(await inferJson(app, model, doc), status, message);
    expectError(await app.inject({ method: 'GET', url: '/v2/models/busy' }), 503, 'Exceeds maximum queue size');
    expectError(
      await app.inject({ method: 'GET', url: '/v2/models/invalid/config' }),
      400,
      "[request id: <id_unknown>] config: bad request for model 'invalid'",
    );
    expect(lines).toEqual([]);
  });
});

describe('metrics', () => {
  it('nv_inference_* are read from the core’s statistics at scrape time', async () => {
    const t = await startTestCore();
    const { log } = capturedLogger();
    const app = buildHttpServer(t.core, log, { maxInputSize: 1 << 20 });
    try {
      const registry = buildRegistry(t.core);
      expect(await registry.metrics()).toContain('nv_inference_request_success{model="simple",version="1"} 0\n');
      for (const rows of [1, 2, 1]) {
        const res = await inferJson(app, 'simple', { inputs: simpleJsonInputs(range(16 * rows), range(16 * rows), [rows, 16]) });
        expect(res.statusCode).toBe(200);
      }
      expect((await inferJson(app, 'simple', { inputs: simpleJsonInputs(range(8), range(8), [1, 8]) })).statusCode).toBe(400);
      const text = await registry.metrics();
      expect(text).toContain('nv_inference_request_success{model="simple",version="1"} 3\n');
      expect(text).toContain('nv_inference_count{model="simple",version="1"} 4\n');
      expect(text).toContain('nv_inference_exec_count{model="simple",version="1"} 3\n');
      expect(text).toContain('nv_inference_compute_infer_duration_us{model="simple",version="1"} 6\n'); // 3 × 2000 ns
      expect(text).toContain('nv_inference_pending_request_count{model="simple",version="1"} 0\n');
    } finally {
      await app.close();
      await t.close();
    }
  });

  it('reads core.metricsSnapshot(), nothing else', async () => {
    const stats = new ModelStats();
    stats.success.count = 42;
    stats.inferenceCount = 50;
    stats.pending = 3;
    const core = { ...fakeCore(), metricsSnapshot: () => [{ model: 'fake_model', version: '7', stats }] };
    const text = await buildRegistry(core).metrics();
    expect(text).toContain('nv_inference_request_success{model="fake_model",version="7"} 42\n');
    expect(text).toContain('nv_inference_count{model="fake_model",version="7"} 50\n');
    expect(text).toContain('nv_inference_pending_request_count{model="fake_model",version="7"} 3\n');
  });
});

describe("error responses carry Triton's content types", () => {
  it('text/plain for the infer route, application/json (without a charset) elsewhere', async () => {
    const t = await startTestCore();
    const app = buildHttpServer(t.core, capturedLogger().log, { maxInputSize: 1 << 20 });
    try {
      const infer = await app.inject({ method: 'POST', url: '/v2/models/unknown/infer', payload: '{}' });
      expect([infer.statusCode, infer.headers['content-type']]).toEqual([404, 'text/plain']);
      expect(infer.json()).toEqual({ error: UNKNOWN('unknown') });
      const config = await app.inject({ method: 'GET', url: '/v2/models/unknown/config' });
      expect([config.statusCode, config.headers['content-type']]).toEqual([404, 'application/json']);
      expect(config.json()).toEqual({ error: UNKNOWN('unknown') });
    } finally {
      await app.close();
      await t.close();
    }
  });
});
