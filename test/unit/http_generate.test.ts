// Triton's generate extension over HTTP (src/frontends/http/generate.ts) against the fake core:
// the JSON ⇄ tensor mapping both ways, /generate's one answer, /generate_stream's events byte for
// byte, errors before and after the first event, cancellation when the client goes away, and the
// HTTP infer route's refusal of decoupled models. The expected bytes are tritonserver 2.51's
// (docs/protocol.md, "Generate").
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { GENERATE_TEXTS } from '../../src/frontends/http/generate.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import type { ApiGroup, Restriction } from '../../src/frontends/restricted.js';
import { ServalError } from '../../src/kernel/errors.js';
import type { InferRequest, InferResponse, TensorMetadata } from '../../src/kernel/types.js';
import { capturedLogger, errorLines, fakeCore } from '../helpers/frontends.js';
import { bytesRaw, fromI32, i32, rawOf, stringsOf } from '../helpers/tensors.js';

const SSE = 'text/event-stream; charset=utf-8';
const NOT_ONE = `{"error":"${GENERATE_TEXTS.notOneResponse}"}`;
/** Refusals go through the front-end's one error handler: Triton's application/json, no charset. */
const ERROR_JSON = /^application\/json$/;

/** The inputs every `decoupled_*` model of the fake core declares (it echoes them back as outputs). */
const DECOUPLED_INPUTS: TensorMetadata[] = [
  { name: 'text_input', datatype: 'BYTES', shape: [1] },
  { name: 'ids', datatype: 'INT64', shape: [-1] },
  { name: 'grid', datatype: 'INT32', shape: [2, -1] },
  { name: 'batched', datatype: 'INT32', shape: [-1, -1] },
  { name: 'flag', datatype: 'BOOL', shape: [1] },
  { name: 'half', datatype: 'FP16', shape: [1] },
  { name: 'score', datatype: 'FP32', shape: [1] },
];

/**
 * The fake core, with model metadata for the generate routes and, as the real core does, the
 * request marked as queued (`admitted`) before a model answers. Three more models:
 *   plain     → one response with parameters and outputs that exercise the response mapping
 *   exec_fail → queued, then an INTERNAL error (the model's answer, not a refusal)
 *   fp16_out  → queued, then a response with an FP16 output (which JSON cannot carry)
 */
function generateCore() {
  const core = fakeCore();
  const metadata = core.modelMetadata;
  core.modelMetadata = (name, version) => {
    if (name.startsWith('decoupled_') || ['plain', 'exec_fail', 'fp16_out', 'traced'].includes(name)) {
      return { name, versions: ['1'], platform: 'python', inputs: DECOUPLED_INPUTS, outputs: [] };
    }
    if (['invalid', 'busy', 'internal'].includes(name)) return { name, versions: ['1'], platform: 'python', inputs: [], outputs: [] };
    return metadata(name, version);
  };
  const stream = core.inferStream.bind(core);
  core.inferStream = (req, sink) => {
    if (req.modelName === 'plain') {
      core.requests.push(req);
      req.admitted?.();
      setImmediate(() => sink.response(plainResponse(req), true));
      return;
    }
    if (req.modelName === 'exec_fail') {
      req.admitted?.();
      sink.error(ServalError.internal('the model raised'), true);
      return;
    }
    if (req.modelName === 'fp16_out') {
      req.admitted?.();
      const out = { name: 'h', datatype: 'FP16' as const, shape: [1], data: Buffer.alloc(2) };
      sink.response({ modelName: 'fp16_out', modelVersion: '1', id: '', outputs: [out] }, true);
      return;
    }
    if (core.isDecoupled(req.modelName, req.modelVersion)) req.admitted?.();
    stream(req, sink);
  };
  return core;
}

function plainResponse(req: InferRequest): InferResponse {
  return {
    modelName: 'plain',
    modelVersion: '3',
    id: req.id,
    // model_name is taken by the reserved field; `b` by the parameter, not the output.
    parameters: { zeta: 7, model_name: 'shadow', b: true, ratio: 0.5 },
    outputs: [
      { name: 'text_output', datatype: 'BYTES', shape: [1], data: bytesRaw(['héllo "x"']) },
      { name: 'Zed', datatype: 'INT32', shape: [1, 1], data: i32([-4]) },
      { name: '0', datatype: 'INT32', shape: [2, 2], data: i32([1, 2, 3, 4]) },
      { name: 'big', datatype: 'INT64', shape: [1], data: rawOf('INT64', [9007199254740993n]) },
      { name: 'empty', datatype: 'FP32', shape: [0], data: Buffer.alloc(0) },
      { name: 'f', datatype: 'FP32', shape: [2], data: rawOf('FP32', [0.1, 1.5]) },
      { name: 'words', datatype: 'BYTES', shape: [2], data: bytesRaw(['a', '']) },
      { name: 'b', datatype: 'BOOL', shape: [1], data: Buffer.from([0]) },
      { name: 'model_version', datatype: 'INT32', shape: [1], data: i32([9]) },
    ],
  };
}

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

function start(opts: Partial<Parameters<typeof buildHttpServer>[2]> = {}) {
  const core = generateCore();
  const logged = capturedLogger();
  app = buildHttpServer(core, logged.log, { maxInputSize: 1 << 20, ...opts });
  return { core, app, lines: logged.lines };
}

const gen = (a: FastifyInstance, model: string, body: unknown, route = 'generate', headers: Record<string, string> = {}) =>
  a.inject({
    method: 'POST',
    url: `/v2/models/${model}/${route}`,
    payload: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...headers },
  });

describe('generate: request mapping', () => {
  it('maps fields naming inputs to tensors shaped by the model, the rest (and `parameters`) to request parameters', async () => {
    const { core, app } = start();
    // Written out: 9007199254740993 is no JS number, and must arrive exactly.
    const body =
      '{"id":"req-7","text_input":"hi","ids":[9007199254740993,2,3],"grid":[1,2,3,4,5,6],"batched":[7,8],"flag":true,' +
      '"temperature":0.5,"stream":false,"parameters":{"max_tokens":3,"score":2.5,"label":"x"}}';
    const res = await gen(app, 'decoupled_1', body);
    expect(res.statusCode, res.body).toBe(200);
    const req = core.requests[0]!;
    expect(req.modelName).toBe('decoupled_1');
    expect(req.id).toBe('req-7');
    // Triton passes `id` on as a parameter too.
    expect(req.parameters).toEqual({ id: 'req-7', temperature: 0.5, stream: false, max_tokens: 3, label: 'x' });
    const byName = new Map(req.inputs.map((t) => [t.name, t]));
    expect([...byName.keys()]).toEqual(['text_input', 'ids', 'grid', 'batched', 'flag', 'score']);
    expect(byName.get('text_input')).toMatchObject({ datatype: 'BYTES', shape: [1] });
    expect(stringsOf(byName.get('text_input')!.data)).toEqual(['hi']);
    expect(byName.get('ids')).toMatchObject({ datatype: 'INT64', shape: [3] });
    expect(Buffer.from(byName.get('ids')!.data).readBigInt64LE(0)).toBe(9007199254740993n);
    // Fixed dimensions take their share, the innermost variable one the rest, other variable ones 1.
    expect(byName.get('grid')!.shape).toEqual([2, 3]);
    expect(fromI32(byName.get('grid')!.data)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(byName.get('batched')!.shape).toEqual([1, 2]);
    expect(byName.get('flag')).toMatchObject({ datatype: 'BOOL', shape: [1] });
    expect([...byName.get('flag')!.data]).toEqual([1]);
    expect(byName.get('score')).toMatchObject({ datatype: 'FP32', shape: [1] });
  });

  it('refuses what Triton refuses, with its texts, before the model sees the request', async () => {
    const { core, app } = start();
    const cases: [unknown, string][] = [
      [{ grid: [1, 2, 3] }, "The schema can not convert input 'grid' to tensor with proper shape"],
      [{ text_input: ['a', 'b'] }, "The schema can not convert input 'text_input' to tensor with proper shape"],
      [{ half: 1 }, 'receiving FP16 data via JSON is not supported. Please use the binary data format for input half'],
      [{ k: null }, "parameter 'k' has invalid type. It should be either 'int', 'bool', or 'string'."],
      [{ k: [1] }, "parameter 'k' has invalid type. It should be either 'int', 'bool', or 'string'."],
      [{ parameters: 5 }, "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"],
      [
        { parameters: { p: { q: 1 } } },
        "Converting keyword: 'parameters': parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'.",
      ],
      [
        { ids: [1], parameters: { ids: [2] } },
        "Converting keyword: 'parameters': [request id: <id_unknown>] input 'ids' already exists in request",
      ],
      [{ id: 5 }, "Unable to parse 'id': attempt to access JSON non-string as string"],
      [[1, 2], 'attempt to get members for non-object'],
      [{ ids: [[1, 2]] }, "Unable to parse 'data': Shape does not match true shape of 'data' field"],
    ];
    for (const [body, error] of cases) {
      const res = await gen(app, 'decoupled_1', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.headers['content-type']).toMatch(ERROR_JSON);
      expect(res.json(), JSON.stringify(body)).toEqual({ error });
    }
    const unparsable = await gen(app, 'decoupled_1', '{"text_input":');
    expect(unparsable.statusCode).toBe(400);
    expect(unparsable.json().error).toMatch(/^failed to parse the request JSON buffer: /);
    const gzip = await gen(app, 'decoupled_1', '{}', 'generate_stream', { 'content-encoding': 'gzip' });
    expect(gzip.statusCode).toBe(400);
    expect(gzip.json()).toEqual({ error: "Unsupported content-encoding, only 'identity' is supported." });
    expect(core.requests).toHaveLength(0);
    expect((await gen(app, 'decoupled_1', '{}', 'generate', { 'content-encoding': 'identity' })).statusCode).toBe(200);
  });

  it('an unknown model is 404 before the body is read; a bad request is refused with its status and a JSON body', async () => {
    const { app } = start();
    for (const route of ['generate', 'generate_stream']) {
      const unknown = await gen(app, 'nope', 'not even json', route);
      expect(unknown.statusCode).toBe(404);
      expect(unknown.headers['content-type']).toMatch(ERROR_JSON);
      expect(unknown.json()).toEqual({ error: "Request for unknown model: 'nope' is not found" });
      const invalid = await gen(app, 'invalid', {}, route);
      expect(invalid.statusCode).toBe(400);
      expect(invalid.headers['content-type']).toMatch(ERROR_JSON);
      expect(invalid.json().error).toBe("[request id: <id_unknown>] infer: bad request for model 'invalid'");
      const busy = await gen(app, 'busy', {}, route);
      expect(busy.statusCode).toBe(503);
      expect(busy.json()).toEqual({ error: 'Exceeds maximum queue size' });
    }
  });

  it('reads the body under --http-max-input-size like every other route', async () => {
    const { app } = start({ maxInputSize: 64 });
    const res = await gen(app, 'decoupled_1', { text_input: 'x'.repeat(100) });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/^Request JSON size of \d+ bytes exceeds the maximum allowed value of 64 bytes/);
  });
});

describe('generate: response mapping', () => {
  it('writes outputs and parameters as fields in byte order, one element as a bare value, reserved names first', async () => {
    const { app } = start();
    const res = await gen(app, 'plain', { id: 'r1', text_input: 'x' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.body).toBe(
      '{"0":[1,2,3,4],"Zed":-4,"b":true,"big":9007199254740993,"empty":[],"f":[0.10000000149011612,1.5],"id":"r1",' +
        '"model_name":"plain","model_version":"3","ratio":0.5,"text_output":"héllo \\"x\\"","words":["a",""],"zeta":7}',
    );
  });

  it('the same response is one SSE event on generate_stream', async () => {
    const { app } = start();
    const res = await gen(app, 'plain', { text_input: 'x' }, 'generate_stream');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe(SSE);
    expect(res.body).toMatch(/^data: \{"0":\[1,2,3,4\],"Zed":-4,.*"zeta":7\}\n\n$/);
  });

  it('an output JSON cannot carry (FP16) is the answer’s error: 400 and Triton’s text', async () => {
    const { app } = start();
    const text = 'sending FP16 data via JSON is not supported. Please use the binary data format for output';
    const one = await gen(app, 'fp16_out', {});
    expect([one.statusCode, one.body]).toEqual([400, `{"error":"${text}"}`]);
    const stream = await gen(app, 'fp16_out', {}, 'generate_stream');
    expect([stream.statusCode, stream.headers['content-type'], stream.body]).toEqual([400, SSE, `data: {"error":"${text}"}\n\n`]);
  });
});

describe('generate vs generate_stream on decoupled models', () => {
  const event = (text: string) => `data: {"model_name":"decoupled_3","model_version":"1","text_input":"${text}"}\n\n`;

  it('generate_stream sends one event per response, exact bytes', async () => {
    const { app } = start();
    const res = await gen(app, 'decoupled_3', { text_input: 'hi' }, 'generate_stream');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe(SSE);
    expect(res.body).toBe(event('hi').repeat(3));
  });

  it('generate answers the one response of a model that sends one, and Triton’s error with 200 for any other count', async () => {
    const { app } = start();
    const one = await gen(app, 'decoupled_1', { text_input: 'hi', id: 'q' });
    expect([one.statusCode, one.headers['content-type']]).toEqual([200, 'application/json']);
    expect(one.body).toBe('{"id":"q","model_name":"decoupled_1","model_version":"1","text_input":"hi"}');
    for (const model of ['decoupled_3', 'decoupled_0']) {
      const res = await gen(app, model, { text_input: 'hi' });
      expect([res.statusCode, res.headers['content-type'], res.body], model).toEqual([200, 'application/json', NOT_ONE]);
    }
  });

  it("another method than POST is Triton's 405", async () => {
    const { app } = start();
    for (const url of ['/v2/models/decoupled_3/generate', '/v2/models/decoupled_3/versions/1/generate_stream']) {
      const res = await app.inject({ method: 'GET', url });
      expect([res.statusCode, res.headers['content-type'], res.body], url).toEqual([
        405,
        'application/json',
        '{"error":"Method Not Allowed"}',
      ]);
    }
  });

  it('the final flag alone ends the stream without an event', async () => {
    const { app } = start();
    const res = await gen(app, 'decoupled_0', { text_input: 'hi' }, 'generate_stream');
    expect([res.statusCode, res.headers['content-type'], res.body]).toEqual([200, SSE, '']);
  });

  it('an error after the first event is an event of its own; the status stays 200 and the fault is logged', async () => {
    const { app, lines } = start();
    const res = await gen(app, 'decoupled_fail', { text_input: 'hi' }, 'generate_stream');
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe(
      'data: {"model_name":"decoupled_fail","model_version":"1","text_input":"hi"}\n\n' +
        'data: {"error":"the model failed after its first response"}\n\n',
    );
    expect(errorLines(lines).join('\n')).toMatch(/http request failed.*the model failed after its first response/);
    const once = await gen(app, 'decoupled_fail', { text_input: 'hi' });
    expect([once.statusCode, once.body]).toEqual([200, NOT_ONE]);
  });

  it('an error as the model’s first answer is 400 whatever its code: an event on generate_stream, the JSON error on generate', async () => {
    const { app } = start();
    const stream = await gen(app, 'exec_fail', {}, 'generate_stream');
    expect([stream.statusCode, stream.headers['content-type'], stream.body]).toEqual([400, SSE, 'data: {"error":"the model raised"}\n\n']);
    const once = await gen(app, 'exec_fail', {});
    expect([once.statusCode, once.headers['content-type'], once.body]).toEqual([400, 'application/json', '{"error":"the model raised"}']);
  });

  it('serves the versioned routes', async () => {
    const { core, app } = start();
    const res = await app.inject({ method: 'POST', url: '/v2/models/decoupled_1/versions/1/generate', payload: '{"text_input":"v"}' });
    expect(res.statusCode).toBe(200);
    expect(core.requests[0]!.modelVersion).toBe('1');
  });

  it('a sampled request is traced as on the infer route', async () => {
    const { core, app } = start();
    for (const route of ['generate', 'generate_stream']) {
      const res = await gen(app, 'traced', { text_input: 'x' }, route);
      expect(res.statusCode).toBe(200);
    }
    expect(core.traces).toHaveLength(2);
    for (const t of core.traces) {
      expect(t.names()).toEqual(['HTTP_RECV_START', 'HTTP_RECV_END', 'INFER_RESPONSE_COMPLETE', 'HTTP_SEND_START', 'HTTP_SEND_END']);
      expect(t.ended).toBeGreaterThanOrEqual(1);
    }
    expect(core.requests.map((r) => r.trace)).toEqual(core.traces);
  });

  it('belongs to the inference API group of --http-restricted-api', async () => {
    const { app } = start({ restrictions: new Map<ApiGroup, Restriction>([['inference', { key: 'infer-key', value: 's3cret' }]]) });
    for (const route of ['generate', 'generate_stream']) {
      const refused = await gen(app, 'decoupled_1', { text_input: 'x' }, route);
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toEqual({ error: "This API is restricted, expecting header 'infer-key'" });
      expect((await gen(app, 'decoupled_1', { text_input: 'x' }, route, { 'infer-key': 's3cret' })).statusCode).toBe(200);
    }
  });
});

describe('generate_stream over a socket', () => {
  async function listen() {
    const s = start();
    await s.app.listen({ port: 0, host: '127.0.0.1' });
    return { ...s, port: (s.app.server.address() as AddressInfo).port };
  }

  it('writes the events in chunked encoding, then ends the response', async () => {
    const { port } = await listen();
    const chunks: string[] = [];
    const headers = await new Promise<http.IncomingHttpHeaders>((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', method: 'POST', path: '/v2/models/decoupled_async_3/generate_stream' }, (res) => {
        res.setEncoding('utf8');
        res.on('data', (c: string) => chunks.push(c));
        res.on('end', () => resolve(res.headers));
      });
      req.on('error', reject);
      req.end('{"text_input":"a"}');
    });
    expect(headers['content-type']).toBe(SSE);
    expect(headers['transfer-encoding']).toBe('chunked');
    const ev = 'data: {"model_name":"decoupled_async_3","model_version":"1","text_input":"a"}\n\n';
    expect(chunks.join('')).toBe(ev.repeat(3));
  });

  it('a client that disconnects cancels its request', async () => {
    const { core, port } = await listen();
    const first = await new Promise<string>((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', method: 'POST', path: '/v2/models/decoupled_forever/generate_stream' }, (res) => {
        res.setEncoding('utf8');
        res.once('data', (c: string) => {
          resolve(c);
          req.destroy();
        });
      });
      req.on('error', () => undefined);
      req.on('close', () => reject(new Error('closed before the first event')));
      req.end('{"text_input":"bye"}');
    });
    expect(first).toBe('data: {"model_name":"decoupled_forever","model_version":"1","text_input":"bye"}\n\n');
    await expect.poll(() => core.cancelled.length, { timeout: 2000 }).toBe(1);
    expect(core.cancelled[0]!.modelName).toBe('decoupled_forever');
    expect(core.cancelled[0]!.cancellation?.cancelled).toBe(true);
  });

  it('a completed stream does not cancel', async () => {
    const { core, port } = await listen();
    const res = await fetch(`http://127.0.0.1:${port}/v2/models/decoupled_async_2/generate_stream`, { method: 'POST', body: '{}' });
    expect(await res.text()).toBe('data: {"model_name":"decoupled_async_2","model_version":"1"}\n\n'.repeat(2));
    await new Promise((r) => setTimeout(r, 20));
    expect(core.requests.at(-1)!.cancellation?.cancelled).toBe(false);
    expect(core.cancelled).toHaveLength(0);
  });
});

describe('HTTP infer on a decoupled model', () => {
  it('is refused with Triton’s 501 and text, before the body is decoded', async () => {
    const { core, app } = start();
    for (const url of ['/v2/models/decoupled_2/infer', '/v2/models/decoupled_2/versions/1/infer']) {
      const res = await app.inject({ method: 'POST', url, payload: 'not json' });
      expect(res.statusCode).toBe(501);
      // Triton's infer handler answers its errors as text/plain (the body is JSON all the same).
      expect(res.headers['content-type']).toBe('text/plain');
      expect(res.json()).toEqual({ error: "HTTP end point doesn't support models with decoupled transaction policy" });
    }
    expect(core.requests).toHaveLength(0);
    // Not decoupled: the body is decoded and the request reaches the core as before.
    const plain = await app.inject({ method: 'POST', url: '/v2/models/traced/infer', payload: '{"inputs":[]}' });
    expect(plain.statusCode).toBe(200);
  });
});
