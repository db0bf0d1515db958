// Ensembles in the built server over ONNX models: inference over both protocols (numbers and
// BYTES, chained and side-by-side steps), a step's error as the client sees it, statistics and
// the repository index, and explicit-mode load / unload with unload_dependents over both protocols.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIdentity, buildSimple } from '../../tools/onnx/models.js';
import { doubleSimple, type EnsembleSpec, ensembleConfig, writeEnsemble } from '../helpers/ensemble.js';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { decodeResponse, get, inferBinary, inferJson, postJson } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { range, rawOf, valuesOf } from '../helpers/tensors.js';

const simple = buildSimple();
const fp32 = buildIdentity('fp32', 'float32', 'TYPE_FP32');
const str = buildIdentity('string', 'string', 'TYPE_STRING');

/** identity_fp32 twice side by side (A and B from the same input), then strings through identity_string twice. */
const fanOut: EnsembleSpec = {
  name: 'fan_out',
  maxBatchSize: 8,
  inputs: [{ name: 'IN', type: 'TYPE_FP32', dims: [-1] }],
  outputs: [
    { name: 'A', type: 'TYPE_FP32', dims: [-1] },
    { name: 'B', type: 'TYPE_FP32', dims: [-1] },
  ],
  steps: [
    { model: 'identity_fp32', inputs: { INPUT0: 'IN' }, outputs: { OUTPUT0: 'A' } },
    { model: 'identity_fp32', inputs: { INPUT0: 'IN' }, outputs: { OUTPUT0: 'B' } },
  ],
};
const strings: EnsembleSpec = {
  name: 'strings',
  maxBatchSize: 8,
  inputs: [{ name: 'TEXT', type: 'TYPE_STRING', dims: [-1] }],
  outputs: [{ name: 'ECHO', type: 'TYPE_STRING', dims: [-1] }],
  steps: [
    { model: 'identity_string', inputs: { INPUT0: 'TEXT' }, outputs: { OUTPUT0: 'mid' } },
    { model: 'identity_string', inputs: { INPUT0: 'mid' }, outputs: { OUTPUT0: 'ECHO' } },
  ],
};
/** Takes any length, but simple takes 16: its step refuses other lengths. */
const loose = doubleSimple('loose');
for (const t of [...loose.inputs, ...loose.outputs]) t.dims = [-1];

function fixture(): Repo {
  const repo = makeRepo([simple, fp32, str].map((m) => ({ name: m.name, config: m.config, versions: { 1: m.onnx } })));
  for (const spec of [doubleSimple(), fanOut, strings, loose, doubleSimple('lonely', 'nowhere')]) {
    writeEnsemble(repo.dir, spec.name, ensembleConfig(spec));
  }
  return repo;
}

const simpleInputs = (a: number[], b: number[]) => [
  { name: 'IN0', datatype: 'INT32', shape: [a.length / 16, 16], data: a },
  { name: 'IN1', datatype: 'INT32', shape: [b.length / 16, 16], data: b },
];

describe('ensembles in the server', () => {
  let repo: Repo;
  let server: ServerHandle;
  let grpc: GrpcClient;
  beforeAll(async () => {
    repo = fixture();
    server = await startServer(repo.dir, ['--exit-on-error=false', '--strict-readiness=false']);
    grpc = grpcClient(server.grpcAddress);
  });
  afterAll(async () => {
    grpc?.close();
    await server?.stop();
    repo?.cleanup();
  });

  it('answers over HTTP with JSON: OUT0 = 2·IN0, OUT1 = 2·IN1', async () => {
    const a = range(32, (i) => i - 7);
    const b = range(32, (i) => 3 * i);
    const res = await inferJson(server.url, 'double_simple', { id: 'j1', inputs: simpleInputs(a, b) });
    expect(res.status, res.text()).toBe(200);
    const doc = res.json();
    expect(doc.model_name).toBe('double_simple');
    expect(doc.model_version).toBe('1');
    expect(doc.id).toBe('j1');
    expect(doc.outputs).toStrictEqual([
      { name: 'OUT0', datatype: 'INT32', shape: [2, 16], data: a.map((x) => 2 * x) },
      { name: 'OUT1', datatype: 'INT32', shape: [2, 16], data: b.map((x) => 2 * x) },
    ]);
  });

  it('answers binary HTTP and gRPC requests with the same tensors', async () => {
    const a = range(16, (i) => i * i);
    const b = range(16, () => -5);
    const res = await inferBinary(
      server.url,
      'double_simple',
      [
        { name: 'IN0', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', a) },
        { name: 'IN1', datatype: 'INT32', shape: [1, 16], raw: rawOf('INT32', b) },
      ],
      { binaryOutput: true },
    );
    expect(res.status, res.text()).toBe(200);
    const decoded = decodeResponse(res);
    expect(valuesOf('INT32', decoded.outputs[0]!.raw!)).toStrictEqual(a.map((x) => 2 * x));
    const g = await grpc.call('ModelInfer', {
      model_name: 'double_simple',
      inputs: [
        { name: 'IN0', datatype: 'INT32', shape: [1, 16] },
        { name: 'IN1', datatype: 'INT32', shape: [1, 16] },
      ],
      raw_input_contents: [rawOf('INT32', a), rawOf('INT32', b)],
    });
    expect(g.model_name).toBe('double_simple');
    expect(g.outputs.map((o: { name: string; shape: string[] }) => [o.name, o.shape])).toStrictEqual([
      ['OUT0', ['1', '16']],
      ['OUT1', ['1', '16']],
    ]);
    expect(valuesOf('INT32', g.raw_output_contents[1])).toStrictEqual(b.map((x) => 2 * x));
  });

  it('runs side-by-side steps and passes strings through, byte for byte', async () => {
    const x = [0.5, -1.25, 3e8];
    const res = await inferJson(server.url, 'fan_out', { inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 3], data: x }] });
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs.map((o: { name: string; data: number[] }) => [o.name, o.data])).toStrictEqual([
      ['A', x],
      ['B', x],
    ]);
    const text = ['plain', 'ünïcödé ✓', ''];
    const s = await inferJson(server.url, 'strings', { inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1, 3], data: text }] });
    expect(s.status, s.text()).toBe(200);
    expect(s.json().outputs[0]).toStrictEqual({ name: 'ECHO', datatype: 'BYTES', shape: [1, 3], data: text });
  });

  it("gives a step's error to the client as Triton words it, on both protocols", async () => {
    const four = (n: number) => ({ name: `IN${n}`, datatype: 'INT32', shape: [1, 4], data: [1, 2, 3, 4] });
    const res = await inferJson(server.url, 'loose', { id: 'bad', inputs: [four(0), four(1)] });
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(
      /^in ensemble 'loose', \[request id: bad\] unexpected shape for input 'INPUT0' for model 'simple'\. Expected \[-1,16\], got \[1,4\]\./,
    );
    const e = await grpc.error('ModelInfer', {
      model_name: 'loose',
      inputs: [
        { name: 'IN0', datatype: 'INT32', shape: [1, 4] },
        { name: 'IN1', datatype: 'INT32', shape: [1, 4] },
      ],
      raw_input_contents: [rawOf('INT32', [1, 2, 3, 4]), rawOf('INT32', [1, 2, 3, 4])],
    });
    expect(e.code).toBe(status.INVALID_ARGUMENT);
    expect(e.details).toMatch(/^in ensemble 'loose', \[request id: <id_unknown>\] unexpected shape for input 'INPUT0'/);
  });

  it('reports metadata, config and statistics for the ensemble and its models', async () => {
    const meta = (await get(server.url, '/v2/models/double_simple')).json();
    expect(meta.platform).toBe('ensemble');
    const config = (await get(server.url, '/v2/models/double_simple/config')).json();
    expect(config).toMatchObject({ platform: 'ensemble', backend: '', instance_group: [] });
    expect(config.ensemble_scheduling.step.map((s: { model_name: string }) => s.model_name)).toStrictEqual(['simple', 'simple']);

    const stats = async (m: string) => (await get(server.url, `/v2/models/${m}/stats`)).json().model_stats[0];
    const [e0, s0] = [await stats('double_simple'), await stats('simple')];
    const res = await inferJson(server.url, 'double_simple', { inputs: simpleInputs(range(64), range(64)) });
    expect(res.status).toBe(200);
    const [e1, s1] = [await stats('double_simple'), await stats('simple')];
    expect(e1.inference_count - e0.inference_count).toBe(4);
    expect(e1.execution_count - e0.execution_count).toBe(1);
    expect(e1.inference_stats.success.count - e0.inference_stats.success.count).toBe(1);
    expect(s1.inference_count - s0.inference_count).toBe(8);
    expect(s1.inference_stats.success.count - s0.inference_stats.success.count).toBe(2);
    // The ensemble's compute time is its steps' compute time, no more.
    const infer = (s: typeof e0) => s.inference_stats.compute_infer.ns;
    expect(infer(e1) - infer(e0)).toBeGreaterThan(0);
    expect(infer(e1) - infer(e0)).toBeLessThanOrEqual(infer(s1) - infer(s0));
    const g = await grpc.call('ModelStatistics', { name: 'double_simple' });
    expect(g.model_stats[0].name).toBe('double_simple');
    expect(g.model_stats[0].batch_stats.some((b: { batch_size: string }) => b.batch_size === '4')).toBe(true);
  });

  it("lists an ensemble whose model is missing as UNAVAILABLE with Triton's reason", async () => {
    const index = (await postJson(server.url, '/v2/repository/index', {})).json();
    expect(index.find((r: { name: string }) => r.name === 'lonely')).toStrictEqual({
      name: 'lonely',
      version: '1',
      state: 'UNAVAILABLE',
      reason: 'ensemble lonely contains models that are not available or ambiguous: nowhere',
    });
    expect(index.find((r: { name: string }) => r.name === 'double_simple').state).toBe('READY');
  });
});

describe('ensembles under explicit model control', () => {
  let repo: Repo;
  let server: ServerHandle;
  let grpc: GrpcClient;
  beforeAll(async () => {
    repo = fixture();
    server = await startServer(repo.dir, ['--model-control-mode', 'explicit', '--load-model', 'double_simple']);
    grpc = grpcClient(server.grpcAddress);
  });
  afterAll(async () => {
    grpc?.close();
    await server?.stop();
    repo?.cleanup();
  });

  const states = async () =>
    Object.fromEntries(
      (await postJson(server.url, '/v2/repository/index', {})).json().map((r: { name: string; state?: string }) => [r.name, r.state ?? '']),
    );

  it('loads the composing model with the ensemble at start-up, and unload_dependents unloads both (HTTP)', async () => {
    expect(await states()).toMatchObject({ double_simple: 'READY', simple: 'READY', fan_out: '' });
    const res = await postJson(server.url, '/v2/repository/models/double_simple/unload', { parameters: { unload_dependents: true } });
    expect(res.status, res.text()).toBe(200);
    expect(await states()).toMatchObject({ double_simple: 'UNAVAILABLE', simple: 'UNAVAILABLE' });
  });

  it('keeps the composing model on a plain unload, and takes unload_dependents over gRPC', async () => {
    expect((await postJson(server.url, '/v2/repository/models/fan_out/load', {})).status).toBe(200);
    expect(await states()).toMatchObject({ fan_out: 'READY', identity_fp32: 'READY' });
    await grpc.call('RepositoryModelUnload', { model_name: 'fan_out' });
    expect(await states()).toMatchObject({ fan_out: 'UNAVAILABLE', identity_fp32: 'READY' });
    await grpc.call('RepositoryModelLoad', { model_name: 'fan_out' });
    // identity_fp32 was only ever loaded for fan_out, so it goes with it.
    await grpc.call('RepositoryModelUnload', { model_name: 'fan_out', parameters: { unload_dependents: { bool_param: true } } });
    expect(await states()).toMatchObject({ fan_out: 'UNAVAILABLE', identity_fp32: 'UNAVAILABLE' });
  });

  it('stops the ensemble when its model is unloaded, and serves it again when the model is loaded', async () => {
    expect((await postJson(server.url, '/v2/repository/models/double_simple/load', {})).status).toBe(200);
    expect((await postJson(server.url, '/v2/repository/models/simple/unload', {})).status).toBe(200);
    expect(await states()).toMatchObject({ double_simple: 'UNAVAILABLE', simple: 'UNAVAILABLE' });
    expect((await get(server.url, '/v2/models/double_simple/ready')).status).toBe(400);
    expect((await postJson(server.url, '/v2/repository/models/simple/load', {})).status).toBe(200);
    expect(await states()).toMatchObject({ double_simple: 'READY', simple: 'READY' });
  });

  it('refuses an ensemble that names itself', async () => {
    const spec = doubleSimple('selfish', 'selfish');
    writeEnsemble(repo.dir, 'selfish', ensembleConfig(spec));
    const res = await postJson(server.url, '/v2/repository/models/selfish/load', {});
    expect(res.status).toBe(400);
    expect(res.json().error).toContain('circular dependency between ensembles: selfish -> ... -> selfish -> selfish');
  });
});
