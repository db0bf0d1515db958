// The trace and logging extensions' front-ends in-process, over a fake CoreApi: HTTP with fastify's
// inject(), gRPC with a grpc-js server on port 0. They decode the wire into the core's calls and
// encode its answers; the rules themselves are tested in trace.test.ts and log.test.ts.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { capturedLogger, FAKE_TRACE_SETTINGS, fakeCore } from '../helpers/frontends.js';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { simpleGrpcRequest, simpleJsonInputs } from '../helpers/simple.js';
import { range } from '../helpers/tensors.js';

const SETTINGS = FAKE_TRACE_SETTINGS;
const LOG = { log_file: '', log_info: true, log_warning: true, log_error: false, log_verbose_level: 3, log_format: 'ISO8601' };

describe('HTTP', () => {
  let core: ReturnType<typeof fakeCore>;
  let app: FastifyInstance;
  beforeEach(async () => {
    core = fakeCore();
    app = buildHttpServer(core, capturedLogger().log, { maxInputSize: 1 << 20 });
    await app.ready();
  });
  const post = (url: string, body: unknown) => app.inject({ method: 'POST', url, payload: JSON.stringify(body) });

  it('GET /v2/trace/setting and /v2/models/{m}/trace/setting read the global and the model settings', async () => {
    const global = await app.inject({ method: 'GET', url: '/v2/trace/setting' });
    expect(global.statusCode).toBe(200);
    expect(global.json()).toEqual(SETTINGS);
    await app.inject({ method: 'GET', url: '/v2/models/simple/trace/setting' });
    expect(core.settingsCalls).toEqual([
      { kind: 'trace', model: '', update: undefined },
      { kind: 'trace', model: 'simple', update: undefined },
    ]);
  });

  it('POST sends the settings as value lists, null to clear; an empty body changes nothing', async () => {
    const res = await post('/v2/models/simple/trace/setting', {
      trace_rate: '5',
      trace_level: ['TIMESTAMPS', 'TENSORS'],
      log_frequency: null,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(SETTINGS);
    await post('/v2/trace/setting', {});
    expect(core.settingsCalls).toEqual([
      { kind: 'trace', model: 'simple', update: { trace_rate: ['5'], trace_level: ['TIMESTAMPS', 'TENSORS'], log_frequency: null } },
      { kind: 'trace', model: '', update: undefined },
    ]);
  });

  it('refuses values of the wrong JSON type before the core sees them', async () => {
    for (const [body, msg] of [
      [{ trace_level: 'TIMESTAMPS' }, `Unable to parse 'trace_level': expect an array of strings, got: "TIMESTAMPS"`],
      [{ trace_rate: 5 }, "Unable to parse 'trace_rate': expect a string, got: 5"],
      [[1], 'the request JSON must be an object'],
    ] as const) {
      const res = await post('/v2/trace/setting', body);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: msg });
    }
    // A body that is not JSON: Triton's JSON reader's INTERNAL (500).
    const bad = await app.inject({ method: 'POST', url: '/v2/logging', payload: '{"log_info":' });
    expect(bad.statusCode).toBe(500);
    expect(bad.json().error).toMatch(/^failed to parse the request JSON buffer: /);
    expect(core.settingsCalls).toEqual([]);
  });

  it("the core's errors answer with their status", async () => {
    const res = await app.inject({ method: 'GET', url: '/v2/models/invalid/trace/setting' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/bad request for model 'invalid'/);
    expect((await post('/v2/logging', { unsupported: true })).statusCode).toBe(501);
  });

  it('GET/POST /v2/logging', async () => {
    expect((await app.inject({ method: 'GET', url: '/v2/logging' })).json()).toEqual(LOG);
    const res = await post('/v2/logging', { log_info: false, log_verbose_level: 1, log_format: 'default', log_file: null });
    expect(res.json()).toEqual(LOG);
    expect(core.settingsCalls[1]).toEqual({
      kind: 'log',
      update: { log_info: false, log_verbose_level: 1, log_format: 'default', log_file: null },
    });
    expect((await post('/v2/logging', { log_info: [true] })).json()).toEqual({ error: "invalid value for log setting 'log_info': [true]" });
  });

  it('a sampled inference gets the HTTP receive/send timestamps around the core, in order, and is ended', async () => {
    const res = await post('/v2/models/traced/infer', { id: 'q1', inputs: simpleJsonInputs(range(16), range(16)) });
    expect(res.statusCode, res.body).toBe(200);
    expect(core.traces).toHaveLength(1);
    const trace = core.traces[0]!;
    expect(core.requests[0]!.trace).toBe(trace);
    expect(trace.names()).toEqual(['HTTP_RECV_START', 'HTTP_RECV_END', 'INFER_RESPONSE_COMPLETE', 'HTTP_SEND_START', 'HTTP_SEND_END']);
    const ns = trace.stamps.map((s) => s.ns);
    expect([...ns].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(ns);
    expect(trace.ended).toBeGreaterThanOrEqual(1);
  });

  it('an unsampled inference carries no trace; a failed sampled one is still ended', async () => {
    await post('/v2/models/invalid/infer', { inputs: simpleJsonInputs(range(16), range(16)) });
    expect(core.traces).toHaveLength(0);
    expect(core.requests[0]!.trace).toBeUndefined();
    const res = await app.inject({ method: 'POST', url: '/v2/models/traced/infer', payload: '{"inputs": [' });
    expect(res.statusCode).toBe(500);
    expect(core.traces[0]!.names()).toEqual(['HTTP_RECV_START', 'HTTP_RECV_END']);
    expect(core.traces[0]!.ended).toBeGreaterThanOrEqual(1);
  });
});

describe('gRPC', () => {
  const core = fakeCore();
  let g: GrpcServer;
  let client: GrpcClient;
  beforeAll(async () => {
    g = await startGrpcServer(core, capturedLogger().log, '127.0.0.1', 0);
    client = grpcClient(`127.0.0.1:${g.port}`);
  });
  afterAll(async () => {
    client?.close();
    await g?.shutdown();
  });
  beforeEach(() => {
    core.settingsCalls.length = 0;
    core.traces.length = 0;
  });

  it('TraceSetting: value lists both ways; an empty list clears; no settings reads', async () => {
    const res = await client.call('TraceSetting', {
      model_name: 'simple',
      settings: { trace_rate: { value: ['7'] }, trace_level: { value: [] } },
    });
    expect(res.settings).toEqual(Object.fromEntries(Object.entries(SETTINGS).map(([k, v]) => [k, { value: Array.isArray(v) ? v : [v] }])));
    await client.call('TraceSetting', {});
    expect(core.settingsCalls).toEqual([
      { kind: 'trace', model: 'simple', update: { trace_rate: ['7'], trace_level: null } },
      { kind: 'trace', model: '', update: undefined },
    ]);
    const e = await client.error('TraceSetting', { model_name: 'invalid' });
    expect(e.code).toBe(status.INVALID_ARGUMENT);
  });

  it('LogSettings: oneof values both ways, false and 0 included', async () => {
    const res = await client.call('LogSettings', {
      settings: {
        log_info: { bool_param: false },
        log_verbose_level: { uint32_param: 0 },
        log_format: { string_param: 'default' },
        log_file: {},
      },
    });
    expect(core.settingsCalls).toEqual([
      { kind: 'log', update: { log_info: false, log_verbose_level: 0, log_format: 'default', log_file: null } },
    ]);
    expect(res.settings).toEqual({
      log_file: { string_param: '', parameter_choice: 'string_param' },
      log_info: { bool_param: true, parameter_choice: 'bool_param' },
      log_warning: { bool_param: true, parameter_choice: 'bool_param' },
      log_error: { bool_param: false, parameter_choice: 'bool_param' },
      log_verbose_level: { uint32_param: 3, parameter_choice: 'uint32_param' },
      log_format: { string_param: 'ISO8601', parameter_choice: 'string_param' },
    });
    expect((await client.error('LogSettings', { settings: { unsupported: { bool_param: true } } })).code).toBe(status.UNIMPLEMENTED);
  });

  it('a sampled ModelInfer gets the gRPC read/send timestamps around the core, in order, and is ended', async () => {
    await client.call('ModelInfer', { ...simpleGrpcRequest(range(16), range(16)), model_name: 'traced' });
    await new Promise((r) => setTimeout(r, 20));
    expect(core.traces).toHaveLength(1);
    const trace = core.traces[0]!;
    expect(trace.names()).toEqual([
      'GRPC_WAITREAD_START',
      'GRPC_WAITREAD_END',
      'INFER_RESPONSE_COMPLETE',
      'GRPC_SEND_START',
      'GRPC_SEND_END',
    ]);
    const ns = trace.stamps.map((s) => s.ns);
    expect([...ns].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(ns);
    expect(trace.ended).toBe(1);
  });
});
