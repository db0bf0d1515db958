// Python models in a spawned server, end to end over HTTP and gRPC: the bundled food_classifier
// (Pillow + numpy, then image_classifier through BLS), errors raised in execute and per-request
// error responses with Triton's texts, BLS errors, a stub that dies, non-UTF-8 BYTES byte for byte,
// dynamic batching of Python requests, auto-complete, unload, and a server whose Python cannot
// run them.
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { joinBytes, splitBytes } from '../../src/kernel/datatypes.js';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { decodeResponse, get, inferBinary, inferJson, postJson } from '../helpers/http.js';
import { ROOT } from '../helpers/paths.js';
import { runServerToExit, type ServerHandle, startServer } from '../helpers/server.js';

const PY_MODELS = path.join(ROOT, 'test', 'python_models');
const IMAGE = readFileSync(path.join(ROOT, 'docs', 'examples', 'food.jpg'));
const LABELS = readFileSync(path.join(ROOT, 'model_repository', 'food_classifier', 'labels.txt'), 'utf8')
  .trim()
  .split('\n');

/** A repository of the test Python models, `simple` and image_classifier (generated), food_classifier (bundled). */
function makePythonRepo(models: string[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-pyrepo-'));
  const generated = inject('modelRepository');
  for (const m of models) {
    const from = m.startsWith('py_')
      ? path.join(PY_MODELS, m)
      : m === 'food_classifier'
        ? path.join(ROOT, 'model_repository', m)
        : path.join(generated, m);
    cpSync(from, path.join(dir, m), { recursive: true });
  }
  return dir;
}

const mode = (m: string) => ({ inputs: [{ name: 'MODE', shape: [1, 1], datatype: 'BYTES', data: [m] }] });
const repos: string[] = [];
afterAll(() => {
  for (const r of repos) rmSync(r, { recursive: true, force: true });
});

describe('Python models in a running server', () => {
  let server: ServerHandle;
  let grpc: GrpcClient;
  beforeAll(async () => {
    const repo = makePythonRepo([
      'py_identity',
      'py_errors',
      'py_bls',
      'py_bls_async',
      'py_autocomplete',
      'simple',
      'image_classifier',
      'food_classifier',
    ]);
    repos.push(repo);
    server = await startServer(repo);
    grpc = grpcClient(server.grpcAddress);
  });
  afterAll(async () => {
    grpc?.close();
    await server?.stop();
  });

  it('metadata and config: platform "python" as Triton reports it, and what auto_complete_config added', async () => {
    const md = (await get(server.url, '/v2/models/food_classifier')).json();
    expect(md).toEqual({
      name: 'food_classifier',
      versions: ['1'],
      platform: 'python',
      inputs: [{ name: 'INPUT_IMAGE', datatype: 'BYTES', shape: [-1, 1] }],
      outputs: [
        { name: 'FOOD_LABEL', datatype: 'BYTES', shape: [-1, 1] },
        { name: 'PROBABILITY', datatype: 'FP32', shape: [-1, 1] },
      ],
    });
    const cfg = (await get(server.url, '/v2/models/py_autocomplete/config')).json();
    expect(cfg).toMatchObject({
      name: 'py_autocomplete',
      backend: 'python',
      max_batch_size: 4,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4] }],
      dynamic_batching: {},
    });
    const r = await inferJson(server.url, 'py_autocomplete', {
      inputs: [{ name: 'INPUT0', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }],
    });
    expect(r.json().outputs[0].data).toEqual([2, 4, 6, 8]);
  });

  it("food_classifier: the tutorial's request (a base64 string in BYTES [1, 1]) gets a Food-11 label and its probability", async () => {
    const b64 = IMAGE.toString('base64');
    const r = await inferJson(server.url, 'food_classifier', {
      inputs: [{ name: 'INPUT_IMAGE', shape: [1, 1], datatype: 'BYTES', data: [b64] }],
    });
    expect(r.status, r.text()).toBe(200);
    const out = r.json().outputs as { name: string; shape: number[]; data: unknown[] }[];
    const label = out.find((o) => o.name === 'FOOD_LABEL')!;
    const prob = out.find((o) => o.name === 'PROBABILITY')!;
    expect(label.shape).toEqual([1, 1]);
    expect(LABELS).toContain(label.data[0]);
    expect(prob.data[0]).toBeGreaterThan(1 / LABELS.length); // the top of a softmax over 11 classes
    expect(prob.data[0]).toBeLessThanOrEqual(1);
    // Two images in one request: one row each, the same answer for the same image; over gRPC too.
    const two = await inferJson(server.url, 'food_classifier', {
      inputs: [{ name: 'INPUT_IMAGE', shape: [2, 1], datatype: 'BYTES', data: [b64, b64] }],
    });
    const rows = two.json().outputs.find((o: { name: string }) => o.name === 'FOOD_LABEL');
    expect(rows.data).toEqual([label.data[0], label.data[0]]);
    const g = await grpc.call('ModelInfer', {
      model_name: 'food_classifier',
      inputs: [{ name: 'INPUT_IMAGE', datatype: 'BYTES', shape: [1, 1] }],
      raw_input_contents: [joinBytes([b64])],
    });
    const names = g.outputs.map((o: { name: string }) => o.name);
    expect(splitBytes(g.raw_output_contents[names.indexOf('FOOD_LABEL')], 'label')[0]!.toString()).toBe(label.data[0]);
    expect(Buffer.from(g.raw_output_contents[names.indexOf('PROBABILITY')]).readFloatLE(0)).toBeCloseTo(prob.data[0] as number, 6);
  });

  it('food_classifier: an input that is not a base64 image fails that request only, as INVALID_ARG', async () => {
    const r = await inferJson(server.url, 'food_classifier', {
      inputs: [{ name: 'INPUT_IMAGE', shape: [1, 1], datatype: 'BYTES', data: ['bm90IGFuIGltYWdl'] }],
    });
    expect(r.status).toBe(400);
    expect(r.json().error).toMatch(/^INPUT_IMAGE is not a base64-encoded image: cannot identify image file/);
  });

  it("an exception in execute fails the requests with Triton's text and the traceback (HTTP 500, gRPC INTERNAL)", async () => {
    const r = await inferJson(server.url, 'py_errors', mode('value'));
    expect(r.status).toBe(500);
    const text = r.json().error as string;
    expect(text).toMatch(/^Failed to process the request\(s\) for model 'py_errors_0_0', message: ValueError: a helper failed\n\nAt:\n/);
    expect(text).toMatch(/py_errors\/1\/model\.py\(\d+\): helper\n .*py_errors\/1\/model\.py\(\d+\): execute\n$/);
    const e = await grpc.error('ModelInfer', {
      model_name: 'py_errors',
      inputs: [{ name: 'MODE', datatype: 'BYTES', shape: [1, 1] }],
      raw_input_contents: [joinBytes(['raise'])],
    });
    expect(e.code).toBe(status.INTERNAL);
    expect(e.details).toMatch(
      /^Failed to process the request\(s\) for model 'py_errors_0_0', message: TritonModelException: the model raised on purpose/,
    );
    // A wrong number of responses is the model's fault too.
    const c = await inferJson(server.url, 'py_errors', mode('count'));
    expect(c.json().error).toBe(
      "Failed to process the request(s) for model instance 'py_errors_0_0', message: Number of InferenceResponse objects do not match the number of InferenceRequest objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0",
    );
  });

  it('InferenceResponse(error=TritonError(msg, code)) answers that request with the message and code', async () => {
    const r = await inferJson(server.url, 'py_errors', mode('error'));
    expect([r.status, r.json().error]).toEqual([400, 'this request is refused']);
    const e = await grpc.error('ModelInfer', {
      model_name: 'py_errors',
      inputs: [{ name: 'MODE', datatype: 'BYTES', shape: [1, 1] }],
      raw_input_contents: [joinBytes(['error'])],
    });
    expect([e.code, e.details]).toEqual([status.INVALID_ARGUMENT, 'this request is refused']);
  });

  it('BLS into an ONNX model: blocking exec and concurrent async_exec in an async execute', async () => {
    const x = Array.from({ length: 16 }, (_, i) => i + 1);
    const ones = Array.from({ length: 16 }, () => 1);
    const body = (extra: Record<string, unknown> = {}) => ({
      ...extra,
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: x },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: ones },
      ],
    });
    const r = (await inferJson(server.url, 'py_bls', body({ id: 'abc' }))).json();
    expect(r.id).toBe('abc');
    expect(r.outputs.map((o: { name: string; data: number[] }) => [o.name, o.data])).toEqual([
      ['OUTPUT0', x.map((v) => v + 1)],
      ['OUTPUT1', x.map((v) => v - 1)],
    ]);
    const a = (await inferJson(server.url, 'py_bls_async', body())).json();
    expect(a.outputs[0].data).toEqual(x.map((v) => 3 * v + 1));
    // The BLS requests ran through `simple`'s own scheduler: its statistics count them.
    const stats = (await get(server.url, '/v2/models/simple/stats')).json();
    expect(stats.model_stats[0].inference_stats.success.count).toBeGreaterThanOrEqual(3);
  });

  it("BLS errors come back as the called model's errors, with their codes", async () => {
    const unknown = await inferJson(server.url, 'py_errors', mode('bls_unknown'));
    expect([unknown.status, unknown.json().error]).toEqual([404, "Request for unknown model: 'no_such_model' is not found"]);
    const bad = await inferJson(server.url, 'py_errors', mode('bls_bad'));
    expect(bad.status).toBe(400);
    expect(bad.json().error).toContain("unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,3].");
    const raised = await inferJson(server.url, 'py_errors', mode('bls_raise'));
    expect(raised.status).toBe(500);
    expect(raised.json().error).toContain("message: TritonModelException: Request for unknown model: 'no_such_model' is not found");
    const target = await inferJson(server.url, 'py_bls', {
      parameters: { target: 'simple_missing' },
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(0) },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(0) },
      ],
    });
    expect([target.status, target.json().error]).toEqual([404, "Request for unknown model: 'simple_missing' is not found"]);
  });

  it('a stub that crashes: its requests fail clearly, the stub is restarted and the model keeps serving', async () => {
    const pid = async (): Promise<string> => {
      const r = await inferJson(server.url, 'py_errors', mode('ok'));
      expect(r.status, r.text()).toBe(200);
      return r.json().outputs[0].data[0];
    };
    const before = await pid();
    // Two requests sent together: the 50 ms queue delay puts them in one batch, so both are in
    // flight when the stub dies (python_instance.test.ts holds that for certain; on a loaded
    // machine the second may come after the restart and succeed).
    const [a, b] = await Promise.all([inferJson(server.url, 'py_errors', mode('crash')), inferJson(server.url, 'py_errors', mode('ok'))]);
    const healthy = "Stub process 'py_errors_0_0' is not healthy.";
    expect([a.status, a.json().error]).toEqual([500, healthy]);
    if (b.status !== 200) expect([b.status, b.json().error]).toEqual([500, healthy]);
    const after = await pid();
    expect(after).not.toBe(before);
    expect(() => process.kill(Number(before), 0)).toThrow();
    expect((await get(server.url, '/v2/models/py_errors/ready')).status).toBe(200);
    expect(server.stderr()).toMatch(
      /^E\d{4} [\d:.]+ \d+ \S+:\d+\] "Stub process is unhealthy and it will be restarted\. model=py_errors instance=py_errors_0_0/m,
    );
  });

  it('BYTES that are not UTF-8 go through a Python model byte for byte (HTTP binary and gRPC)', async () => {
    const elements = [Buffer.from([0xff, 0xfe, 0x00, 0x80]), Buffer.alloc(0), Buffer.from([0xc3, 0x28]), Buffer.from('ok')];
    const raw = joinBytes(elements);
    const r = await inferBinary(server.url, 'py_identity', [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 4], raw }], {
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    });
    expect(r.status, r.text()).toBe(200);
    expect(decodeResponse(r).outputs[0]!.raw).toEqual(raw);
    const g = await grpc.call('ModelInfer', {
      model_name: 'py_identity',
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 4] }],
      outputs: [{ name: 'OUTPUT0' }],
      raw_input_contents: [raw],
    });
    expect(Buffer.from(g.raw_output_contents[0])).toEqual(raw);
  });

  it('dynamic batching gives execute several requests at once, and the statistics show batches > 1', async () => {
    const one = (i: number) =>
      inferJson(server.url, 'py_identity', {
        id: `r${i}`,
        inputs: [{ name: 'INPUT0', shape: [1, 1], datatype: 'BYTES', data: [`x${i}`] }],
      });
    const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => one(i)));
    const infos = rs.map((r) => JSON.parse(r.json().outputs.find((o: { name: string }) => o.name === 'INFO').data[0]));
    expect(infos.map((i) => i.request_id)).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5']);
    expect(Math.max(...infos.map((i) => i.batch_requests))).toBeGreaterThan(1);
    const stats = (await get(server.url, '/v2/models/py_identity/stats')).json().model_stats[0];
    expect(stats.batch_stats.some((b: { batch_size: number }) => b.batch_size > 1)).toBe(true);
    expect(Number(stats.execution_count)).toBeLessThan(Number(stats.inference_count));
  });
});

describe('Python models and the model lifecycle', () => {
  it('explicit unload ends the stub; a load starts a new one', async () => {
    const repo = makePythonRepo(['py_errors']);
    repos.push(repo);
    const server = await startServer(repo, ['--model-control-mode', 'explicit', '--load-model', 'py_errors']);
    try {
      const pid = async () => (await inferJson(server.url, 'py_errors', mode('ok'))).json().outputs[0].data[0] as string;
      const first = await pid();
      expect((await postJson(server.url, '/v2/repository/models/py_errors/unload', {})).status).toBe(200);
      expect(() => process.kill(Number(first), 0)).toThrow();
      expect((await postJson(server.url, '/v2/repository/models/py_errors/load', {})).status).toBe(200);
      const second = await pid();
      expect(second).not.toBe(first);
      expect(await server.stop()).toBe(0);
      expect(() => process.kill(Number(second), 0)).toThrow();
    } finally {
      await server.stop();
    }
  });

  it('a Python that cannot run them: Python models are UNAVAILABLE saying what to install; the others serve', async () => {
    const repo = makePythonRepo(['py_identity_fp32', 'simple']);
    repos.push(repo);
    const server = await startServer(repo, [
      '--backend-config',
      'python,interpreter=/nonexistent/python3',
      '--exit-on-error',
      'false',
      '--strict-readiness',
      'false',
    ]);
    try {
      const index = (await postJson(server.url, '/v2/repository/index', {})).json() as { name: string; state: string; reason: string }[];
      const py = index.find((r) => r.name === 'py_identity_fp32')!;
      expect(py.state).toBe('UNAVAILABLE');
      expect(py.reason).toContain("the Python backend cannot run '/nonexistent/python3' (ENOENT): install Python 3");
      expect(index.find((r) => r.name === 'simple')!.state).toBe('READY');
      const r = await inferJson(server.url, 'simple', {
        inputs: [
          { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) },
          { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) },
        ],
      });
      expect(r.status).toBe(200);
      expect(server.stdout()).toMatch(/py_identity_fp32 \| 1 {7}\| UNAVAILABLE: .*cannot run '\/nonexistent\/python3'/);
    } finally {
      await server.stop();
    }
  });

  it('with --exit-on-error (the default) such a model stops the server at start-up, as in Triton', async () => {
    const repo = makePythonRepo(['py_identity_fp32']);
    repos.push(repo);
    const r = await runServerToExit(repo, ['--backend-config', 'python,interpreter=/nonexistent/python3']);
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).toContain("cannot run '/nonexistent/python3'");
  });

  it('an unknown --backend-config setting of the python backend is a start-up error', async () => {
    const repo = makePythonRepo([]);
    repos.push(repo);
    const r = await runServerToExit(repo, ['--backend-config', 'python,no-such-setting=1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("the python backend has no setting 'no-such-setting'");
  });
});
