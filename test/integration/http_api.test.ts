// The KServe v2 REST API of the built server, driven over HTTP against the example models.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { expectSimpleWorks } from '../helpers/checks.js';
import { MAX_BATCH_NOTE } from '../helpers/errors.js';
import { binaryBody, decodeResponse, get, type HttpResult, inferBinary, inferJson, postJson, request } from '../helpers/http.js';
import { ROOT } from '../helpers/paths.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { simpleJsonInputs, simpleMetadata } from '../helpers/simple.js';
import {
  ALL_TYPES,
  bytesRaw,
  type Dt,
  expectedJson,
  identityModel,
  randomRaw,
  range,
  rawOf,
  rng,
  SAMPLE_VALUES,
  splitBytesRaw,
  valuesOf,
} from '../helpers/tensors.js';

const MAX_INPUT = 16 * 1024 * 1024;
let server: ServerHandle;
let url: string;
const repo = inject('modelRepository');

beforeAll(async () => {
  server = await startServer(repo, ['--http-max-input-size', String(MAX_INPUT)]);
  url = server.url;
});

afterAll(async () => {
  await server?.stop();
});

function expectError(res: HttpResult, status: number, message: string | RegExp): void {
  expect(res.status, res.text()).toBe(status);
  // Triton's types: text/plain for an infer route's errors, application/json for the rest (no charset).
  expect(res.headers['content-type']).toMatch(/^(application\/json|text\/plain)$/);
  const err = res.json<{ error: string }>().error;
  if (typeof message === 'string') expect(err).toBe(message);
  else expect(err).toMatch(message);
}

describe('health, metadata, configuration', () => {
  it('reports live and ready', async () => {
    expect((await get(url, '/v2/health/live')).status).toBe(200);
    expect((await get(url, '/v2/health/ready')).status).toBe(200);
  });

  it('returns server metadata with the supported extensions', async () => {
    const res = await get(url, '/v2');
    expect(res.status).toBe(200);
    const md = res.json();
    expect(md.name).toBe('serval');
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(md.version).toBe(pkg.version);
    expect(md.extensions).toEqual(expect.arrayContaining(['classification', 'binary_tensor_data', 'model_configuration', 'statistics']));
  });

  it('returns model metadata with the batch dimension prepended', async () => {
    for (const p of ['/v2/models/simple', '/v2/models/simple/versions/1']) {
      const res = await get(url, p);
      expect(res.status).toBe(200);
      expect(res.json()).toEqual(simpleMetadata('onnxruntime_onnx', 'http'));
    }
    const str = (await get(url, '/v2/models/identity_string')).json();
    expect(str.inputs).toEqual([{ name: 'INPUT0', datatype: 'BYTES', shape: [-1, -1] }]);
  });

  it('returns the model configuration in Triton JSON form', async () => {
    const res = await get(url, '/v2/models/image_classifier/config');
    expect(res.status).toBe(200);
    const c = res.json();
    expect(c.name).toBe('image_classifier');
    expect(c.max_batch_size).toBe(16);
    expect(c.input[0]).toMatchObject({ name: 'INPUT', data_type: 'TYPE_FP32', dims: [3, 224, 224] });
    expect(c.output[0]).toMatchObject({ name: 'OUTPUT', data_type: 'TYPE_FP32', dims: [11], label_filename: 'labels.txt' });
    expect(c.dynamic_batching).toBeDefined();
    expect(c.instance_group[0]).toMatchObject({ kind: 'KIND_CPU', count: 1 });
    const v = await get(url, '/v2/models/image_classifier/versions/1/config');
    expect(v.json()).toEqual(c);
  });

  it('reports model readiness per model and version', async () => {
    expect((await get(url, '/v2/models/simple/ready')).status).toBe(200);
    expect((await get(url, '/v2/models/simple/versions/1/ready')).status).toBe(200);
    expect((await get(url, '/v2/models/simple/versions/2/ready')).status).toBe(400);
    expect((await get(url, '/v2/models/no_such_model/ready')).status).toBe(400);
  });

  it('metadata and config of an unknown model or version fail like Triton', async () => {
    expectError(await get(url, '/v2/models/no_such_model'), 404, "Request for unknown model: 'no_such_model' is not found");
    expectError(await get(url, '/v2/models/no_such_model/config'), 404, "Request for unknown model: 'no_such_model' is not found");
    expectError(await get(url, '/v2/models/simple/versions/7'), 404, "Request for unknown model: 'simple' version 7 is not found");
  });

  it('counts inferences in the statistics extension', async () => {
    const stats = async () => (await get(url, '/v2/models/simple/stats')).json().model_stats[0];
    const before = await stats();
    expect(before).toMatchObject({ name: 'simple', version: '1' });
    const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs(range(48), range(48), [3, 16], [3, 16]) });
    expect(res.status).toBe(200);
    const after = await stats();
    expect(after.inference_count - before.inference_count).toBe(3);
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(1);
    expectError(await get(url, '/v2/models/no_such_model/stats'), 404, "Request for unknown model: 'no_such_model' is not found");
    const all = (await get(url, '/v2/models/stats')).json().model_stats.map((s: { name: string }) => s.name);
    expect(all).toEqual(expect.arrayContaining(['simple', 'image_classifier', 'identity_bool']));
  });
});

describe('inference results', () => {
  it('simple: OUTPUT0 is the sum and OUTPUT1 the difference, JSON in and out', async () => {
    const r = rng(11);
    const a = range(16, () => Math.floor(r() * 1e6) - 5e5);
    const b = range(16, () => Math.floor(r() * 1e6) - 5e5);
    const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs(a, b) });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    const doc = res.json();
    expect(doc.model_name).toBe('simple');
    expect(doc.model_version).toBe('1');
    expect(doc.id).toBeUndefined();
    expect(doc.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: a.map((x, i) => x + b[i]!) },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: a.map((x, i) => x - b[i]!) },
    ]);
  });

  it('accepts nested JSON data arrays and a batch of several rows', async () => {
    const a = range(4, (r) => r).map((r) => range(16, (c) => r * 100 + c));
    const b = range(4, (r) => r).map((r) => range(16, (c) => c - r));
    const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs(a, b, [4, 16], [4, 16]) });
    expect(res.status, res.text()).toBe(200);
    const out0 = res.json().outputs[0];
    expect(out0.shape).toEqual([4, 16]);
    expect(out0.data).toEqual(a.flat().map((x, i) => x + b.flat()[i]!));
  });

  it('wraps int32 overflow like the model does (two’s complement)', async () => {
    const a = range(16, () => 2147483647);
    const b = range(16, () => 1);
    const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs(a, b) });
    expect(res.json().outputs[0].data).toEqual(range(16, () => (2147483647 + 1) | 0));
  });

  it('echoes the request id, and omits it when empty', async () => {
    const res = await inferJson(url, 'simple', { id: 'req-äöü-42', inputs: simpleJsonInputs(range(16), range(16)) });
    expect(res.json().id).toBe('req-äöü-42');
    const res2 = await inferJson(url, 'simple', { id: '', inputs: simpleJsonInputs(range(16), range(16)) });
    expect(res2.json()).not.toHaveProperty('id');
  });

  it('infers on an explicit version path', async () => {
    const res = await inferJson(
      url,
      'simple',
      {
        inputs: simpleJsonInputs(
          range(16),
          range(16, () => 2),
        ),
      },
      '1',
    );
    expect(res.status).toBe(200);
    expect(res.json().outputs[1].data).toEqual(range(16, (i) => i - 2));
  });

  it('returns only the requested outputs, in the requested order', async () => {
    const a = range(16, (i) => i * 3);
    const b = range(16, (i) => i);
    const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs(a, b), outputs: [{ name: 'OUTPUT1' }] });
    expect(res.json().outputs).toEqual([{ name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: a.map((x, i) => x - b[i]!) }]);
    const both = await inferJson(url, 'simple', { inputs: simpleJsonInputs(a, b), outputs: [{ name: 'OUTPUT1' }, { name: 'OUTPUT0' }] });
    expect(both.json().outputs.map((o: { name: string }) => o.name)).toEqual(['OUTPUT1', 'OUTPUT0']);
  });

  it('mixes JSON and binary inputs, and binary and JSON outputs per output', async () => {
    const a = range(16, (i) => 7 * i - 50);
    const b = range(16, (i) => 1000 - i);
    const { body, headerLength } = binaryBody(
      [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], json: a },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', b) },
      ],
      {
        outputs: [
          { name: 'OUTPUT0', parameters: { binary_data: true } },
          { name: 'OUTPUT1', parameters: { binary_data: false } },
        ],
      },
    );
    const res = await request(url, 'POST', '/v2/models/simple/infer', {
      headers: { 'inference-header-content-length': headerLength },
      body,
    });
    expect(res.status, res.text()).toBe(200);
    expect(Number(res.headers['inference-header-content-length'])).toBeGreaterThan(0);
    const d = decodeResponse(res);
    const [o0, o1] = d.outputs;
    expect(o0!.name).toBe('OUTPUT0');
    expect(o0!.data).toBeUndefined();
    expect(o0!.parameters).toEqual({ binary_data_size: 64 });
    expect(valuesOf('INT32', o0!.raw!)).toEqual(a.map((x, i) => x + b[i]!));
    expect(o1!.data).toEqual(a.map((x, i) => x - b[i]!));
  });

  it('binary_data_output=true makes every output binary unless an output says otherwise', async () => {
    const a = range(16);
    const b = range(16, () => 5);
    const all = decodeResponse(
      await inferBinary(
        url,
        'simple',
        [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', b) },
        ],
        { binaryOutput: true },
      ),
    );
    expect(all.outputs.map((o) => [o.name, o.raw?.byteLength])).toEqual([
      ['OUTPUT0', 64],
      ['OUTPUT1', 64],
    ]);
    expect(valuesOf('INT32', all.outputs[1]!.raw!)).toEqual(a.map((x) => x - 5));

    const mixed = decodeResponse(
      await inferBinary(
        url,
        'simple',
        [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', b) },
        ],
        { binaryOutput: true, outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1', parameters: { binary_data: false } }] },
      ),
    );
    expect(mixed.outputs[0]!.raw).toBeDefined();
    expect(mixed.outputs[1]!.data).toEqual(a.map((x) => x - 5));

    // Binary inputs alone do not make the outputs binary.
    const json = await inferBinary(url, 'simple', [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', b) },
    ]);
    expect(json.headers['inference-header-content-length']).toBeUndefined();
    expect(json.json().outputs[0].data).toEqual(a.map((x) => x + 5));
  });

  it('accepts a binary request without a Content-Type header', async () => {
    const a = range(16);
    const { body, headerLength } = binaryBody([
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
    ]);
    const res = await request(url, 'POST', '/v2/models/simple/infer', {
      headers: { 'inference-header-content-length': headerLength },
      body,
    });
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs[0].data).toEqual(a.map((x) => 2 * x));
  });

  it('simple_string adds and subtracts decimal strings (BYTES, JSON)', async () => {
    const a = range(16, (i) => i * 11 - 40);
    const b = range(16, (i) => 3 - i);
    const res = await inferJson(url, 'simple_string', {
      inputs: [
        { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], data: a.map(String) },
        { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], data: b.map(String) },
      ],
    });
    expect(res.status, res.text()).toBe(200);
    const out = res.json().outputs;
    expect(out[0]).toEqual({ name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 16], data: a.map((x, i) => String(x + b[i]!)) });
    expect(out[1].data).toEqual(a.map((x, i) => String(x - b[i]!)));
  });

  it('simple_string with binary BYTES in and out (length-prefixed elements)', async () => {
    const a = range(32, (i) => i * i);
    const b = range(32, (i) => -i);
    const res = await inferBinary(
      url,
      'simple_string',
      [
        { name: 'INPUT0', datatype: 'BYTES', shape: [2, 16], raw: bytesRaw(a.map(String)) },
        { name: 'INPUT1', datatype: 'BYTES', shape: [2, 16], raw: bytesRaw(b.map(String)) },
      ],
      { binaryOutput: true },
    );
    expect(res.status, res.text()).toBe(200);
    const d = decodeResponse(res);
    expect(d.outputs[0]!.shape).toEqual([2, 16]);
    expect(splitBytesRaw(d.outputs[0]!.raw!).map(String)).toEqual(a.map((x, i) => String(x + b[i]!)));
    expect(splitBytesRaw(d.outputs[1]!.raw!).map(String)).toEqual(a.map((x, i) => String(x - b[i]!)));
  });
});

describe('every datatype round trips through identity_<type>', () => {
  const numeric = ALL_TYPES.filter((t) => t !== 'BYTES' && t !== 'FP16') as Exclude<Dt, 'BYTES' | 'FP16'>[];

  it.each(numeric)('%s as JSON', async (dt) => {
    const values = SAMPLE_VALUES[dt];
    const res = await inferJson(url, identityModel(dt), {
      inputs: [{ name: 'INPUT0', datatype: dt, shape: [1, values.length], data: values }],
    });
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs).toEqual([
      { name: 'OUTPUT0', datatype: dt, shape: [1, values.length], data: values.map((v) => expectedJson(dt, v)) },
    ]);
  });

  it('FP16 as JSON is refused in both directions with Triton’s messages (binary works, below)', async () => {
    const res = await inferJson(url, 'identity_fp16', { inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 2], data: [0.5, 1] }] });
    expectError(res, 400, 'receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0');
    const out = await inferBinary(url, 'identity_fp16', [
      { name: 'INPUT0', datatype: 'FP16', shape: [1, 2], raw: rawOf('FP16', [0x3800, 0x3c00]) },
    ]);
    expectError(out, 400, 'sending FP16 data via JSON is not supported. Please use the binary data format for output');
    await expectSimpleWorks(url);
  });

  it('BYTES as JSON, including empty and non-ASCII strings', async () => {
    const values = ['hello', '', 'ünïcødé ✓ 🦭', ' spaces ', '{"json":1}', 'x'.repeat(1000)];
    const res = await inferJson(url, 'identity_string', {
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [2, 3], data: values }],
    });
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'BYTES', shape: [2, 3], data: values });
  });

  it.each(ALL_TYPES.filter((t) => t !== 'BYTES'))('%s as binary data, byte for byte', async (dt) => {
    const d = dt as Exclude<Dt, 'BYTES'>;
    const raw = randomRaw(d, 2 * 7, rng(dt.length * 7919 + 13));
    const res = await inferBinary(url, identityModel(dt), [{ name: 'INPUT0', datatype: dt, shape: [2, 7], raw }], { binaryOutput: true });
    expect(res.status, res.text()).toBe(200);
    const out = decodeResponse(res).outputs[0]!;
    expect(out).toMatchObject({ name: 'OUTPUT0', datatype: dt, shape: [2, 7] });
    expect(out.raw!.equals(raw)).toBe(true);
  });

  it.each(ALL_TYPES.filter((t) => t !== 'BYTES' && t !== 'FP16'))('%s binary in, JSON out, decoded to the same values', async (dt) => {
    const d = dt as Exclude<Dt, 'BYTES'>;
    const raw = randomRaw(d, 4, rng(dt.length * 31 + 1));
    const res = await inferBinary(url, identityModel(dt), [{ name: 'INPUT0', datatype: dt, shape: [1, 4], raw }]);
    expect(res.status, res.text()).toBe(200);
    const out = decodeResponse(res).outputs[0]!;
    const expected = valuesOf(d, raw);
    if (d === 'INT64' || d === 'UINT64') {
      // Exact digits, even beyond 2^53: compare the JSON text itself.
      expect(out.data).toHaveLength(4);
      const m = /"data":\[([^\]]*)\]/.exec(decodeResponse(res).jsonText)!;
      expect(m[1]!.split(',')).toEqual(expected.map(String));
    } else if (d === 'FP32' || d === 'FP64') {
      // NaN is not JSON; random bit patterns can be NaN — compare the rest.
      (out.data as (number | null)[]).forEach((v, i) => {
        const e = expected[i] as number;
        if (Number.isNaN(e)) expect(v === null || Number.isNaN(v)).toBe(true);
        else expect(v).toBe(e);
      });
    } else {
      expect(out.data).toEqual(expected);
    }
  });

  it('BYTES as binary data, including an empty element and non-ASCII UTF-8', async () => {
    const elements = ['', 'a', 'ünïcødé', 'x'.repeat(70000), '🦭'];
    const raw = bytesRaw(elements);
    const res = await inferBinary(url, 'identity_string', [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 5], raw }], {
      binaryOutput: true,
    });
    expect(res.status, res.text()).toBe(200);
    const out = decodeResponse(res).outputs[0]!;
    expect(out.datatype).toBe('BYTES');
    expect(out.raw!.equals(raw)).toBe(true);
  });

  it('UINT64 and INT64 beyond 2^53 keep every digit through JSON in and JSON out', async () => {
    const u64 = '[18446744073709551615,9007199254740993,0,12345678901234567890]';
    const res = await inferJson(url, 'identity_uint64', `{"inputs":[{"name":"INPUT0","datatype":"UINT64","shape":[1,4],"data":${u64}}]}`);
    expect(res.status, res.text()).toBe(200);
    expect(res.text()).toContain(`"data":${u64}`);
    const i64 = '[-9223372036854775808,9223372036854775807,-9007199254740993,1]';
    const res2 = await inferJson(url, 'identity_int64', `{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1,4],"data":${i64}}]}`);
    expect(res2.status, res2.text()).toBe(200);
    expect(res2.text()).toContain(`"data":${i64}`);
  });

  it('UINT64 beyond 2^53 sent as binary is printed exactly in a JSON response', async () => {
    const values = [18446744073709551615n, 9007199254740993n, 0n];
    const res = await inferBinary(url, 'identity_uint64', [
      { name: 'INPUT0', datatype: 'UINT64', shape: [1, 3], raw: rawOf('UINT64', values) },
    ]);
    expect(res.status).toBe(200);
    expect(res.text()).toContain(`"data":[${values.join(',')}]`);
  });

  it('FP64 values whose shortest form has 16+ fraction digits survive a JSON request', async () => {
    // JSON.stringify(0.1 + 0.2) is "0.30000000000000004": 17 digits after the point.
    const values = [0.1 + 0.2, 1 / 3, Math.PI, -2 / 3];
    const res = await inferJson(url, 'identity_fp64', { inputs: [{ name: 'INPUT0', datatype: 'FP64', shape: [1, 4], data: values }] });
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs[0].data).toEqual(values);
  });

  it('non-UTF-8 BYTES are never silently altered (returned byte-exact or rejected)', async () => {
    const raw = bytesRaw([Uint8Array.of(0xff, 0xfe, 0x00, 0x80), Uint8Array.of(0xc3)]);
    const res = await inferBinary(url, 'identity_string', [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], raw }], {
      binaryOutput: true,
    });
    if (res.status === 200) expect(decodeResponse(res).outputs[0]!.raw!.equals(raw)).toBe(true);
    else expect(res.status).toBe(400);
  });
});

describe('compression', () => {
  const a = range(16, (i) => i * 9);
  const b = range(16, (i) => 100 - i);
  const doc = { inputs: simpleJsonInputs(a, b) };
  const sum = a.map((x, i) => x + b[i]!);

  it.each([
    ['gzip', zlib.gzipSync],
    ['deflate', zlib.deflateSync],
  ] as const)('accepts a %s-compressed JSON request body', async (enc, compress) => {
    const res = await request(url, 'POST', '/v2/models/simple/infer', {
      headers: { 'content-type': 'application/json', 'content-encoding': enc },
      body: compress(Buffer.from(JSON.stringify(doc))),
    });
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs[0].data).toEqual(sum);
  });

  it('accepts a gzip-compressed binary request (header length counts uncompressed bytes)', async () => {
    const { body, headerLength } = binaryBody([
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', b) },
    ]);
    const res = await request(url, 'POST', '/v2/models/simple/infer', {
      headers: { 'content-encoding': 'gzip', 'inference-header-content-length': headerLength },
      body: zlib.gzipSync(body),
    });
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs[0].data).toEqual(sum);
  });

  it.each([
    ['gzip', zlib.gunzipSync],
    ['deflate', zlib.inflateSync],
  ] as const)('compresses the response with %s when the client accepts it', async (enc, decompress) => {
    const res = await postJson(url, '/v2/models/simple/infer', doc, { 'accept-encoding': enc });
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBe(enc);
    const plain = JSON.parse(decompress(res.body).toString('utf8'));
    expect(plain.outputs[0].data).toEqual(sum);
  });

  it('compresses binary responses too, keeping Inference-Header-Content-Length uncompressed', async () => {
    const res = await inferBinary(
      url,
      'simple',
      [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', b) },
      ],
      { binaryOutput: true, headers: { 'accept-encoding': 'gzip' } },
    );
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBe('gzip');
    const plain = zlib.gunzipSync(res.body);
    const d = decodeResponse({ ...res, body: plain });
    expect(valuesOf('INT32', d.outputs[0]!.raw!)).toEqual(sum);
  });

  it('does not compress when the client does not ask', async () => {
    const res = await postJson(url, '/v2/models/simple/infer', doc);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.json().outputs[0].data).toEqual(sum);
  });

  it('rejects a corrupt compressed body and an unknown encoding', async () => {
    const corrupt = await request(url, 'POST', '/v2/models/simple/infer', {
      headers: { 'content-encoding': 'gzip' },
      body: Buffer.from('definitely not gzip'),
    });
    expectError(corrupt, 400, /failed to decompress/);
    const br = await request(url, 'POST', '/v2/models/simple/infer', {
      headers: { 'content-encoding': 'br' },
      body: zlib.brotliCompressSync(Buffer.from(JSON.stringify(doc))),
    });
    expect([400, 501]).toContain(br.status);
    expect(br.json().error).toMatch(/br/);
    await expectSimpleWorks(url);
  });
});

describe('classification extension', () => {
  let labels: string[] = [];
  beforeAll(() => {
    labels = readFileSync(path.join(repo, 'image_classifier', 'labels.txt'), 'utf8')
      .trim()
      .split('\n');
  });
  const r = rng(2024);
  const image = new Float32Array(2 * 3 * 224 * 224).map(() => r());
  const raw = Buffer.from(image.buffer);

  it('classification: 3 returns the top 3 "score:index:label" per batch item', async () => {
    const probs = decodeResponse(
      await inferBinary(url, 'image_classifier', [{ name: 'INPUT', datatype: 'FP32', shape: [2, 3, 224, 224], raw }], {
        binaryOutput: true,
      }),
    ).outputs[0]!;
    expect(probs.shape).toEqual([2, 11]);
    const p = valuesOf('FP32', probs.raw!) as number[];
    const expected: string[] = [];
    for (let row = 0; row < 2; row++) {
      const rowP = p.slice(row * 11, row * 11 + 11);
      const order = rowP.map((v, i) => [v, i] as const).sort((x, y) => y[0] - x[0] || x[1] - y[1]);
      for (const [v, i] of order.slice(0, 3)) expected.push(`${v.toFixed(6)}:${i}:${labels[i]}`);
    }

    const res = await inferBinary(url, 'image_classifier', [{ name: 'INPUT', datatype: 'FP32', shape: [2, 3, 224, 224], raw }], {
      outputs: [{ name: 'OUTPUT', parameters: { classification: 3 } }],
    });
    expect(res.status, res.text()).toBe(200);
    const out = res.json().outputs[0];
    expect(out).toMatchObject({ name: 'OUTPUT', datatype: 'BYTES', shape: [2, 3] });
    expect(out.data).toEqual(expected);
    for (const s of out.data as string[]) expect(s).toMatch(/^\d\.\d{6}:\d+:.+$/);
  });

  it('classification larger than the class count returns every class, and works with binary output', async () => {
    const res = await inferBinary(
      url,
      'image_classifier',
      [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], raw: raw.subarray(0, raw.byteLength / 2) }],
      {
        outputs: [{ name: 'OUTPUT', parameters: { classification: 50, binary_data: true } }],
      },
    );
    expect(res.status, res.text()).toBe(200);
    const out = decodeResponse(res).outputs[0]!;
    expect(out).toMatchObject({ datatype: 'BYTES', shape: [1, 11] });
    const items = splitBytesRaw(out.raw!).map(String);
    expect(items.map((s) => Number(s.split(':')[1])).sort((x, y) => x - y)).toEqual(range(11));
    const scores = items.map((s) => Number(s.split(':')[0]));
    expect([...scores].sort((x, y) => y - x)).toEqual(scores);
    expect(scores.reduce((s, x) => s + x, 0)).toBeCloseTo(1, 4);
    for (const s of items) expect(labels).toContain(s.split(':').slice(2).join(':'));
  });

  it('classification on a model without labels gives "score:index"', async () => {
    const res = await inferJson(url, 'identity_int32', {
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 5], data: [3, 9, -1, 9, 4] }],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }],
    });
    expect(res.status, res.text()).toBe(200);
    // Ties keep index order.
    expect(res.json().outputs[0].data).toEqual(['9.000000:1', '9.000000:3']);
  });
});

describe('large messages', () => {
  it('round trips a 6 MB binary FP32 tensor', async () => {
    const n = 1_500_000;
    const raw = randomRaw('FP32', n, rng(5));
    const res = await inferBinary(url, 'identity_fp32', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n], raw }], { binaryOutput: true });
    expect(res.status, res.text().slice(0, 200)).toBe(200);
    expect(decodeResponse(res).outputs[0]!.raw!.equals(raw)).toBe(true);
  });

  it(`rejects a body over --http-max-input-size with Triton's 400 and text, and keeps serving`, async () => {
    const n = MAX_INPUT / 4 + 1024;
    const res = await inferBinary(url, 'identity_fp32', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n], raw: Buffer.alloc(n * 4) }]);
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(
      /^Request body size of \d+ bytes exceeds the maximum allowed value of 16777216 bytes\. Use --http-max-input-size/,
    );
    await expectSimpleWorks(url);
  });
});

describe('errors, each followed by a correct good request', () => {
  afterEach(async () => {
    expect(server.alive()).toBe(true);
    await expectSimpleWorks(url);
  });
  const good = () => simpleJsonInputs(range(16), range(16));

  it('unknown model', async () => {
    // Triton core (model_lifecycle.cc GetModel) answers NOT_FOUND, which its HTTP front-end maps to 404.
    expectError(await inferJson(url, 'no_such_model', { inputs: good() }), 404, "Request for unknown model: 'no_such_model' is not found");
  });

  it('unknown version', async () => {
    expectError(
      await inferJson(url, 'simple', { inputs: good() }, '999'),
      404,
      "Request for unknown model: 'simple' version 999 is not found",
    );
  });

  it('version that is not a number', async () => {
    const res = await inferJson(url, 'simple', { inputs: good() }, 'latest');
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(/version/);
  });

  it('wrong datatype', async () => {
    expectError(
      await inferJson(url, 'simple', { inputs: simpleJsonInputs(range(16), range(16), [1, 16], [1, 16], 'FP32') }),
      400,
      "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'",
    );
  });

  it('wrong shape, with the request id and Triton’s NOTE', async () => {
    expectError(
      await inferJson(url, 'simple', { id: 'shape-1', inputs: simpleJsonInputs(range(8), range(8), [1, 8], [1, 8]) }),
      400,
      `[request id: shape-1] unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,8]. ${MAX_BATCH_NOTE}`,
    );
  });

  it('shape without the batch dimension (the first dimension is taken as the batch, as in Triton)', async () => {
    expectError(
      await inferJson(url, 'simple', { inputs: simpleJsonInputs(range(16), range(16), [16], [16]) }),
      400,
      "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'simple'",
    );
    const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs([1], [1], [1], [1]) });
    expect(res.status).toBe(400);
    expect(res.json().error).toContain("unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1]. NOTE:");
  });

  it('missing input', async () => {
    expectError(
      await inferJson(url, 'simple', { inputs: good().slice(0, 1) }),
      400,
      "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], " +
        "but missing required input(s) ['INPUT1']. Please provide all required input(s).",
    );
  });

  it('no inputs at all', async () => {
    expectError(
      await inferJson(url, 'simple', { inputs: [] }),
      400,
      "[request id: <id_unknown>] expected 2 inputs but got 0 inputs for model 'simple'. Got input(s) [], " +
        "but missing required input(s) ['INPUT0','INPUT1']. Please provide all required input(s).",
    );
  });

  it('unknown input and unknown output', async () => {
    const extra = [...good(), { name: 'INPUT9', datatype: 'INT32', shape: [1, 16], data: range(16) }];
    expectError(
      await inferJson(url, 'simple', { inputs: [good()[0], extra[2]] }),
      400,
      "[request id: <id_unknown>] unexpected inference input 'INPUT9' for model 'simple'",
    );
    expectError(
      await inferJson(url, 'simple', { inputs: good(), outputs: [{ name: 'OUTPUT9' }] }),
      400,
      "[request id: <id_unknown>] unexpected inference output 'OUTPUT9' for model 'simple'",
    );
  });

  it('batch larger than max_batch_size', async () => {
    expectError(
      await inferJson(url, 'simple', { inputs: simpleJsonInputs(range(9 * 16), range(9 * 16), [9, 16], [9, 16]) }),
      400,
      "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'simple'",
    );
  });

  it('inputs with different batch sizes', async () => {
    expectError(
      await inferJson(url, 'simple', { inputs: simpleJsonInputs(range(32), range(16), [2, 16], [1, 16]) }),
      400,
      "[request id: <id_unknown>] input 'INPUT1' batch size does not match other inputs for 'simple'",
    );
  });

  it('binary byte size that does not match the shape', async () => {
    const res = await inferBinary(url, 'simple', [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', range(15)) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', range(16)) },
    ]);
    expectError(res, 400, "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60");
  });

  it('JSON data with the wrong element count (Triton qa L0_http: "Unable to parse \'data\'")', async () => {
    for (const n of [15, 18]) {
      const res = await inferJson(url, 'simple', { inputs: simpleJsonInputs(range(n), range(16)) });
      expect(res.status, res.text()).toBe(400);
      expect(res.json().error).toBe("Unable to parse 'data': Shape does not match true shape of 'data' field");
    }
  });

  it('BYTES element count that does not match the shape', async () => {
    const res = await inferBinary(url, 'simple_string', [
      { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], raw: bytesRaw(range(14).map(String)) },
      { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], raw: bytesRaw(range(16).map(String)) },
    ]);
    expectError(
      res,
      400,
      "[request id: <id_unknown>] expected 16 string elements for inference input 'INPUT0' for model 'simple_string', got 14",
    );
  });

  it('malformed binary BYTES (length prefix past the end)', async () => {
    const raw = bytesRaw(['abc']);
    raw.writeUInt32LE(1000, 0);
    const res = await inferBinary(url, 'identity_string', [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], raw }]);
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(/malformed BYTES data/);
  });

  it('JSON values that do not fit the datatype', async () => {
    for (const [dt, v] of [
      ['INT8', 128],
      ['UINT8', -1],
      ['UINT32', 4294967296],
      ['INT32', 1.5],
      ['BOOL', 1],
      ['FP32', 'x'],
    ] as const) {
      const res = await inferJson(url, identityModel(dt as Dt), { inputs: [{ name: 'INPUT0', datatype: dt, shape: [1, 1], data: [v] }] });
      expect(res.status, `${dt} ${v}`).toBe(400);
      expect(res.json().error).toContain(`is not a valid ${dt}`);
    }
    const s = await inferJson(url, 'identity_string', { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: [5] }] });
    expectError(s, 400, /expected a string for a BYTES element, got 5/);
  });

  it('malformed JSON and JSON of the wrong shape', async () => {
    expectError(await postJson(url, '/v2/models/simple/infer', '{"inputs": [ {"name": '), 500, /failed to parse the request JSON buffer/);
    expectError(await postJson(url, '/v2/models/simple/infer', '[1,2,3]'), 400, 'the request JSON must be an object');
    expectError(await postJson(url, '/v2/models/simple/infer', '{}'), 400, "the request must have an 'inputs' array");
    expectError(
      await postJson(url, '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, -16], data: [] }] }),
      400,
      /'shape' array of non-negative integers/,
    );
    expectError(
      await postJson(url, '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }] }),
      400,
      /neither 'data' nor 'binary_data_size'/,
    );
    expectError(await request(url, 'POST', '/v2/models/simple/infer'), 500, /failed to parse the request JSON buffer/);
  });

  it('binary_data_size past the end of the body', async () => {
    const { body, headerLength } = binaryBody([
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', range(16)) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', range(16)) },
    ]);
    const res = await request(url, 'POST', '/v2/models/simple/infer', {
      headers: { 'inference-header-content-length': headerLength },
      body: body.subarray(0, body.byteLength - 10),
    });
    expectError(res, 400, "input 'INPUT1': binary_data_size 64 runs past the end of the request body (54 bytes of binary data left)");
  });

  it('binary bytes that no input claims', async () => {
    const { body, headerLength } = binaryBody([
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', range(16)) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', range(16)) },
    ]);
    const res = await request(url, 'POST', '/v2/models/simple/infer', {
      headers: { 'inference-header-content-length': headerLength },
      body: Buffer.concat([body, Buffer.alloc(12)]),
    });
    expectError(res, 400, 'the request body has 12 bytes of binary data that no input claims');
  });

  it('Inference-Header-Content-Length that is not a valid length', async () => {
    const body = Buffer.from(JSON.stringify({ inputs: good() }));
    for (const h of [String(body.byteLength + 1), '-1', 'abc']) {
      const res = await request(url, 'POST', '/v2/models/simple/infer', { headers: { 'inference-header-content-length': h }, body });
      expect(res.status, h).toBe(400);
      expect(res.json().error).toMatch(/Inference-Header-Content-Length .* is not a valid length/);
    }
  });

  it('binary_data_size without Inference-Header-Content-Length', async () => {
    const { body } = binaryBody([
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', range(16)) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', range(16)) },
    ]);
    const res = await request(url, 'POST', '/v2/models/simple/infer', { body });
    // The whole body is then JSON, with bytes after it: Triton's JSON reader refuses it (500).
    expectError(res, 500, /^failed to parse the request JSON buffer: /);
  });

  it('classification on a BYTES output', async () => {
    const res = await inferJson(url, 'identity_string', {
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: ['a'] }],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: 1 } }],
    });
    expectError(res, 400, "class result not available for output due to unsupported type 'BYTES'");
  });

  it('unknown routes and methods', async () => {
    expect((await get(url, '/v2/nothing/here')).status).toBe(404);
    expect((await get(url, '/v2/models/simple/infer')).status).toBe(404);
  });
});
