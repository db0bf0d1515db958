// Model files stay inside the model's folder (issue 14): a load whose config (on disk or a client's
// override) names a file outside it — by "..", an absolute path or a symlink — is refused with a
// 400 naming the config field, the response never shows the server's paths, and nothing outside
// is opened. A good model in the same repository loads and serves.
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSimple } from '../../tools/onnx/models.js';
import { inferJson, postJson } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { simpleJsonInputs } from '../helpers/simple.js';
import { range } from '../helpers/tensors.js';

const simple = buildSimple();
const config = (name: string, extra = '') => simple.config.replace('name: "simple"', `name: "${name}"`) + extra;
const withLabel = (name: string, label: string) =>
  config(name).replace(
    'name: "OUTPUT0"\n    data_type: TYPE_INT32',
    `name: "OUTPUT0"\n    data_type: TYPE_INT32\n    label_filename: "${label}"`,
  );
const warmup = (file: string) => `
model_warmup [ {
  name: "w"
  batch_size: 1
  inputs { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 16 ] input_data_file: "${file}" } }
  inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } }
} ]
`;

describe('files named by a model config are confined to its folder', () => {
  let repo: Repo;
  let server: ServerHandle;
  beforeAll(async () => {
    repo = makeRepo([
      { name: 'good', config: config('good'), versions: { 1: simple.onnx } },
      { name: 'label_escape', config: withLabel('label_escape', '../outside/labels.txt'), versions: { 1: simple.onnx } },
      { name: 'warmup_escape', config: config('warmup_escape', warmup('../../outside/data.bin')), versions: { 1: simple.onnx } },
      { name: 'link_escape', config: config('link_escape'), versions: {} },
      { name: 'label_link', config: withLabel('label_link', 'labels.txt'), versions: { 1: simple.onnx } },
    ]);
    // Outside every model folder: a valid model, labels and warm-up data that would all load.
    const outside = path.join(repo.dir, 'outside');
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'model.onnx'), simple.onnx);
    writeFileSync(path.join(outside, 'labels.txt'), 'a\nb\n');
    writeFileSync(path.join(outside, 'data.bin'), new Uint8Array(64));
    mkdirSync(path.join(repo.dir, 'link_escape', '1'));
    symlinkSync(path.join(outside, 'model.onnx'), path.join(repo.dir, 'link_escape', '1', 'model.onnx'));
    symlinkSync(path.join(outside, 'labels.txt'), path.join(repo.dir, 'label_link', 'labels.txt'));
    server = await startServer(repo.dir, ['--model-control-mode', 'explicit']);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  const load = (name: string, body: unknown = {}) => postJson(server.url, `/v2/repository/models/${name}/load`, body);
  const refused = async (name: string, body: unknown, text: string) => {
    const res = await load(name, body);
    expect(res.status).toBe(400);
    const error: string = res.json().error;
    expect(error).toContain(text);
    expect(error).not.toContain(repo.dir);
    expect((await postJson(server.url, '/v2/repository/index', {})).json()).toContainEqual(
      expect.objectContaining({ name, state: 'UNAVAILABLE' }),
    );
  };

  it('a config override with default_model_filename "../../../../etc/passwd" is refused, naming the field', async () => {
    const override = { backend: 'onnxruntime', default_model_filename: '../../../../etc/passwd' };
    await refused(
      'good',
      { parameters: { config: JSON.stringify(override) } },
      "model 'good': default_model_filename '../../../../etc/passwd' must name a file inside the model's '1' folder",
    );
    const abs = { backend: 'onnxruntime', default_model_filename: '/etc/passwd' };
    await refused('good', { parameters: { config: JSON.stringify(abs) } }, "default_model_filename '/etc/passwd' must name a file inside");
  });

  it('a label file and a warm-up file outside the folder are refused', async () => {
    await refused(
      'label_escape',
      {},
      "model 'label_escape': label_filename of output 'OUTPUT0' '../outside/labels.txt' must name a file inside the model's folder",
    );
    await refused('warmup_escape', {}, "input_data_file '../../outside/data.bin' must name a file inside the model's 'warmup' folder");
  });

  it('symlinks inside the folder that point outside are refused (model file and label file)', async () => {
    await refused(
      'link_escape',
      {},
      "model 'link_escape': default_model_filename 'model.onnx' must name a file inside the model's '1' folder",
    );
    await refused('label_link', {}, "label_filename of output 'OUTPUT0' 'labels.txt' must name a file inside the model's folder");
  });

  it('a model whose files are inside its folder loads and serves', async () => {
    expect((await load('good')).status).toBe(200);
    const a = range(16);
    const res = await inferJson(server.url, 'good', { inputs: simpleJsonInputs(a, a) });
    expect(res.status).toBe(200);
    expect(res.json().outputs[0].data).toEqual(a.map((x) => 2 * x));
  });
});
