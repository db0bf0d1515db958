// Model repository handling of the built server: broken and mismatched configurations, version
// policies, reshape, start-up failures and command-line errors. Each case builds its own small
// repository in a temporary folder.
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSimple } from '../../tools/onnx/models.js';
import { expectSimpleWorks } from '../helpers/checks.js';
import { get, type HttpResult, inferBinary, inferJson, postJson } from '../helpers/http.js';
import { ROOT } from '../helpers/paths.js';
import { makeRepo, type Repo, scaleConfig, scaleModel, transposeModel } from '../helpers/repo.js';
import { runCli, runServerToExit, type ServerHandle, startServer } from '../helpers/server.js';
import { range, rawOf } from '../helpers/tensors.js';

const simple = buildSimple();

/** The simple model's config with `name` and a transformation of its text. */
function simpleVariant(name: string, edit: (config: string) => string = (c) => c) {
  return { name, config: edit(simple.config.replace('name: "simple"', `name: "${name}"`)), versions: { 1: simple.onnx } };
}

async function inferScale(url: string, model: string, version?: string): Promise<HttpResult> {
  return inferJson(url, model, { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 4], data: [1, 2, 3, -4] }] }, version);
}

/** The status table row of a model as printed at start-up. */
function statusRow(stdout: string, model: string): string {
  const row = stdout.split('\n').find((l) => l.startsWith(`| ${model} `));
  if (!row) throw new Error(`no status row for ${model} in:\n${stdout}`);
  return row;
}

const BAD_START =
  'sequence_batching { control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0 ] } ] } ] }';
const BAD_BATCH_INPUT = 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_INT32 source_input: "NOPE" } ]';

describe('a broken model next to good ones', () => {
  let repo: Repo;
  beforeAll(() => {
    repo = makeRepo([
      simpleVariant('simple'),
      {
        name: 'broken',
        config: 'name: "broken"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ',
        versions: { 1: simple.onnx },
      },
      simpleVariant('wrong_name', (c) => c.replace('name: "INPUT1"', 'name: "INPUT_B"')),
      simpleVariant('wrong_type', (c) => c.replace(/data_type: TYPE_INT32/, 'data_type: TYPE_FP32')),
      simpleVariant('wrong_dims', (c) => c.replace(/dims: \[ 16 \]/, 'dims: [ 8 ]')),
      // Triton checks the config before it looks for versions: the config's own error shows.
      { ...simpleVariant('bad_config_no_versions', (c) => c.replace('max_batch_size: 8', 'max_batch_size: -2')), versions: {} },
      { ...simpleVariant('no_versions'), versions: {} },
      // Sequence controls are part of that check (ValidateModelConfig); batch inputs are not (ValidateModelIOConfig).
      { ...simpleVariant('seq_controls_no_versions', (c) => `${c}\n${BAD_START}`), versions: {} },
      { ...simpleVariant('batch_io_no_versions', (c) => `${c}\n${BAD_BATCH_INPUT}`), versions: {} },
      simpleVariant('zero_dim', (c) => c.replace(/dims: \[ 16 \]/, 'dims: [ 0 ]')),
      { ...simpleVariant('corrupt_file'), versions: { 1: new TextEncoder().encode('not an onnx model') } },
    ]);
  });
  afterAll(() => repo.cleanup());

  describe('with --exit-on-error=false', () => {
    let server: ServerHandle;
    beforeAll(async () => {
      server = await startServer(repo.dir, ['--exit-on-error=false'], { waitReady: false });
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('serves the good model correctly', async () => {
      expect((await get(server.url, '/v2/models/simple/ready')).status).toBe(200);
      await expectSimpleWorks(server.url);
    });

    it('is live but, with strict readiness, not ready', async () => {
      expect((await get(server.url, '/v2/health/live')).status).toBe(200);
      expect((await get(server.url, '/v2/health/ready')).status).toBe(400);
    });

    it('reports the broken config as UNAVAILABLE with the parse error', async () => {
      expect(statusRow(server.stdout(), 'broken')).toMatch(/\| 1 +\| UNAVAILABLE: .*failed to parse config/);
      expect((await get(server.url, '/v2/models/broken/ready')).status).toBe(400);
      const res = await inferJson(server.url, 'broken', { inputs: [] });
      expect(res.status).toBe(404);
      expect(res.json().error).toBe("Request for unknown model: 'broken' has no available versions");
      expect(server.stderr()).toMatch(/model load failed.*model=broken/);
    });

    it('reports a config input name that is not in the ONNX file', async () => {
      expect(statusRow(server.stdout(), 'wrong_name')).toContain(
        "UNAVAILABLE: unexpected inference input 'INPUT_B', allowed inputs are: INPUT0, INPUT1",
      );
      expect((await get(server.url, '/v2/models/wrong_name/ready')).status).toBe(400);
    });

    it('reports a config data type that does not match the ONNX file', async () => {
      expect(statusRow(server.stdout(), 'wrong_type')).toContain(
        "unable to load model 'wrong_type', configuration expects datatype TYPE_FP32 for input 'INPUT0', model provides TYPE_INT32",
      );
    });

    it("reports each broken model with Triton's reason, and serves the good one regardless", async () => {
      const out = server.stdout();
      expect(statusRow(out, 'bad_config_no_versions')).toContain(
        "UNAVAILABLE: 'max_batch_size' must be non-negative value for bad_config_no_versions",
      );
      expect(statusRow(out, 'no_versions')).toContain(
        "UNAVAILABLE: at least one version must be available under the version policy of model 'no_versions'",
      );
      expect(statusRow(out, 'seq_controls_no_versions')).toContain(
        "UNAVAILABLE: sequence batching control 'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_START for seq_controls_no_versions",
      );
      expect(statusRow(out, 'batch_io_no_versions')).toContain(
        "UNAVAILABLE: at least one version must be available under the version policy of model 'batch_io_no_versions'",
      );
      expect(statusRow(out, 'zero_dim')).toContain(
        "UNAVAILABLE: model input 'INPUT0' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for zero_dim",
      );
      expect(statusRow(out, 'corrupt_file')).toMatch(/\| 1 +\| UNAVAILABLE: \S/);
      expect(statusRow(out, 'simple')).toMatch(/\| 1 +\| READY/);
      const index = (await postJson(server.url, '/v2/repository/index', {})).json() as { name: string; state: string; reason?: string }[];
      expect(index.find((r) => r.name === 'no_versions')).toMatchObject({
        state: 'UNAVAILABLE',
        reason: "at least one version must be available under the version policy of model 'no_versions'",
      });
      expect(index.find((r) => r.name === 'simple')).toMatchObject({ state: 'READY' });
    });

    it('reports config dims that do not match the ONNX file', async () => {
      expect(statusRow(server.stdout(), 'wrong_dims')).toMatch(
        /UNAVAILABLE: .*tensor 'INPUT0': the model expects 2 dimensions \(shape \[-1,16\]\) but the model configuration specifies 2 dimensions \(.*making complete shape \[-1,8\]\)/,
      );
    });
  });

  it('with --strict-readiness=false the server is ready despite the broken model', async () => {
    const server = await startServer(repo.dir, ['--exit-on-error=false', '--strict-readiness=false']);
    try {
      expect((await get(server.url, '/v2/health/ready')).status).toBe(200);
      expect((await get(server.url, '/v2/models/broken/ready')).status).toBe(400);
    } finally {
      await server.stop();
    }
  });

  it('with auto-complete off, Triton also checks the tensors before it looks for versions', async () => {
    const strict = makeRepo([
      { ...simpleVariant('zero_dim_no_versions', (c) => c.replace(/dims: \[ 16 \]/, 'dims: [ 0 ]')), versions: {} },
      { ...simpleVariant('batch_io_no_versions', (c) => `${c}\n${BAD_BATCH_INPUT}`), versions: {} },
    ]);
    try {
      const r = await runServerToExit(strict.dir, ['--disable-auto-complete-config']);
      expect(statusRow(r.stdout, 'zero_dim_no_versions')).toContain(
        "UNAVAILABLE: model input 'INPUT0' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for zero_dim_no_versions",
      );
      // ValidateModelIOConfig ends with the batch inputs and outputs (ValidateBatchIO).
      expect(statusRow(r.stdout, 'batch_io_no_versions')).toContain(
        "UNAVAILABLE: unknown source input name 'NOPE' for batch_io_no_versions",
      );
    } finally {
      strict.cleanup();
    }
  });

  it('by default the server exits non-zero, naming the models that failed', async () => {
    const r = await runServerToExit(repo.dir);
    expect(r.code).not.toBeNull();
    expect(r.code).not.toBe(0);
    const all = r.stdout + r.stderr;
    for (const m of [
      'broken',
      'wrong_name',
      'wrong_type',
      'wrong_dims',
      'bad_config_no_versions',
      'no_versions',
      'zero_dim',
      'corrupt_file',
    ]) {
      expect(statusRow(r.stdout, m)).toContain('UNAVAILABLE');
    }
    expect(statusRow(r.stdout, 'simple')).toContain('READY');
    expect(r.stderr).toContain('failed to load all models');
    expect(all).toMatch(/broken/);
    expect(r.stdout).not.toMatch(/Started HTTPService/);
  });
});

describe('version policies', () => {
  let repo: Repo;
  let server: ServerHandle;
  const versions = { 1: scaleModel(1), 2: scaleModel(2), 3: scaleModel(3) };
  beforeAll(async () => {
    repo = makeRepo([
      { name: 'latest_default', config: scaleConfig('latest_default'), versions },
      { name: 'latest_two', config: scaleConfig('latest_two', 'version_policy: { latest: { num_versions: 2 } }'), versions },
      { name: 'all_versions', config: scaleConfig('all_versions', 'version_policy: { all: {} }'), versions },
      { name: 'specific', config: scaleConfig('specific', 'version_policy: { specific: { versions: [1, 3] } }'), versions },
    ]);
    server = await startServer(repo.dir);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  async function expectScale(model: string, version: string | undefined, k: number): Promise<void> {
    const res = await inferScale(server.url, model, version);
    expect(res.status, `${model} v${version}: ${res.text()}`).toBe(200);
    expect(res.json().model_version).toBe(version ?? res.json().model_version);
    expect(res.json().outputs[0].data).toEqual([1, 2, 3, -4].map((x) => x * k));
  }
  async function expectNoVersion(model: string, version: string): Promise<void> {
    const res = await inferScale(server.url, model, version);
    expect(res.status).toBe(404);
    expect(res.json().error).toBe(`Request for unknown model: '${model}' version ${version} is not found`);
    expect((await get(server.url, `/v2/models/${model}/versions/${version}/ready`)).status).toBe(400);
  }

  it('latest (default, 1 version) serves only the highest version', async () => {
    await expectScale('latest_default', undefined, 3);
    await expectScale('latest_default', '3', 3);
    await expectNoVersion('latest_default', '2');
    expect((await get(server.url, '/v2/models/latest_default')).json().versions).toEqual(['3']);
  });

  it('latest { num_versions: 2 } serves the two highest', async () => {
    await expectScale('latest_two', undefined, 3);
    await expectScale('latest_two', '2', 2);
    await expectNoVersion('latest_two', '1');
    expect((await get(server.url, '/v2/models/latest_two')).json().versions).toEqual(['2', '3']);
  });

  it('all serves every version, each with its own model file', async () => {
    for (const v of [1, 2, 3]) await expectScale('all_versions', String(v), v);
    expect((await get(server.url, '/v2/models/all_versions')).json().versions).toEqual(['1', '2', '3']);
    expect((await inferScale(server.url, 'all_versions')).json().model_version).toBe('3');
  });

  it('specific serves exactly the listed versions', async () => {
    await expectScale('specific', '1', 1);
    await expectScale('specific', '3', 3);
    await expectNoVersion('specific', '2');
    expect((await get(server.url, '/v2/models/specific')).json().versions).toEqual(['1', '3']);
  });

  it('keeps statistics per version', async () => {
    const before = (await get(server.url, '/v2/models/all_versions/versions/2/stats')).json().model_stats[0];
    await expectScale('all_versions', '2', 2);
    const after = (await get(server.url, '/v2/models/all_versions/versions/2/stats')).json().model_stats;
    expect(after).toHaveLength(1);
    expect(after[0].version).toBe('2');
    expect(after[0].inference_count - before.inference_count).toBe(1);
    const every = (await get(server.url, '/v2/models/all_versions/stats')).json().model_stats;
    expect(every.map((s: { version: string }) => s.version)).toEqual(['1', '2', '3']);
  });
});

describe('a specific version policy naming a version folder that does not exist', () => {
  // Triton (model_lifecycle.cc VersionsToLoad) logs an error for the missing version and loads
  // the others; the model is READY and the missing version is simply not found.
  let repo: Repo;
  beforeAll(() => {
    repo = makeRepo([
      {
        name: 'partial',
        config: scaleConfig('partial', 'version_policy: { specific: { versions: [1, 5] } }'),
        versions: { 1: scaleModel(1), 2: scaleModel(2) },
      },
    ]);
  });
  afterAll(() => repo.cleanup());

  it('serves the versions that exist and answers NOT_FOUND for the missing one', async () => {
    const server = await startServer(repo.dir, [], { timeoutMs: 20_000 });
    try {
      expect((await inferScale(server.url, 'partial', '1')).json().outputs[0].data).toEqual([1, 2, 3, -4]);
      const res = await inferScale(server.url, 'partial', '5');
      expect(res.status).toBe(404);
      expect(res.json().error).toBe("Request for unknown model: 'partial' version 5 is not found");
    } finally {
      await server.stop();
    }
  });
});

describe('reshape', () => {
  let repo: Repo;
  let server: ServerHandle;
  beforeAll(async () => {
    repo = makeRepo([
      {
        name: 'transpose',
        config: `name: "transpose"
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 16 ] reshape: { shape: [ 4, 4 ] } } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 16 ] reshape: { shape: [ 4, 4 ] } } ]
`,
        versions: { 1: transposeModel() },
      },
    ]);
    server = await startServer(repo.dir);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  it('clients see the config dims; the model sees the reshape', async () => {
    const md = (await get(server.url, '/v2/models/transpose')).json();
    expect(md.inputs[0].shape).toEqual([-1, 16]);
    const batch = 3;
    const x = range(batch * 16, (i) => i * 7 - 100);
    const res = await inferBinary(server.url, 'transpose', [
      { name: 'INPUT', datatype: 'INT32', shape: [batch, 16], raw: rawOf('INT32', x) },
    ]);
    expect(res.status, res.text()).toBe(200);
    const out = res.json().outputs[0];
    expect(out.shape).toEqual([batch, 16]);
    const expected: number[] = [];
    for (let b = 0; b < batch; b++) for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) expected.push(x[b * 16 + j * 4 + i]!);
    expect(out.data).toEqual(expected);
  });

  it('rejects the model shape itself (clients must use dims)', async () => {
    const res = await inferBinary(server.url, 'transpose', [
      { name: 'INPUT', datatype: 'INT32', shape: [1, 4, 4], raw: rawOf('INT32', range(16)) },
    ]);
    expect(res.status).toBe(400);
    expect(res.json().error).toContain("unexpected shape for input 'INPUT' for model 'transpose'. Expected [-1,16], got [1,4,4].");
  });
});

describe('command line', () => {
  it('an unknown flag exits with code 1 (as tritonserver) and the usage', async () => {
    const r = await runCli(['--model-repository', '/tmp', '--bogus-flag', '1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("unrecognized option '--bogus-flag'");
    expect(r.stderr).toContain('Usage: serval');
  });

  it('--help prints the usage and exits 0', async () => {
    const r = await runCli(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('--model-repository PATH');
  });

  it('no model repository is an error', async () => {
    const r = await runCli([]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--model-repository must be specified');
  });

  it('a repository folder that does not exist is an error', async () => {
    const r = await runServerToExit('/nonexistent/serval/repo');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('creating server: Internal - failed to stat file /nonexistent/serval/repo');
  });

  it('SIGTERM stops a running server with exit code 0', async () => {
    const repo = makeRepo([simpleVariant('simple')]);
    try {
      const server = await startServer(repo.dir);
      await expectSimpleWorks(server.url);
      expect(await server.stop()).toBe(0);
      expect(server.stdout()).toMatch(/Received SIGTERM, shutting down/);
    } finally {
      repo.cleanup();
    }
  });
});

describe('a front-end that cannot start', () => {
  for (const [flag, service] of [
    ['--grpc-port', 'gRPC'],
    ['--http-port', 'HTTP'],
    ['--metrics-port', 'metrics'],
  ] as const) {
    it(`a busy ${service} port: exit 1, naming the service and the address`, async () => {
      const blocker = net.createServer();
      await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
      const port = (blocker.address() as net.AddressInfo).port;
      try {
        const r = await runServerToExit(path.join(ROOT, 'model_repository'), [
          '--model-control-mode',
          'explicit',
          '--load-model',
          'simple',
          flag,
          String(port),
        ]);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain(`failed to start the ${service} service on 127.0.0.1:${port}`);
        expect(r.stderr).not.toMatch(/ReferenceError|fatal/);
      } finally {
        blocker.close();
      }
    });
  }
});
