// model_warmup on sequence models, end to end on the built server and ONNX Runtime: the example
// sequence models (direct with START/READY, oldest with START/END/READY/CORRID, implicit state)
// load with warm-up samples that name their control inputs or leave them out, on two instances;
// the warm-up leaves no trace in the sequences or the statistics; a sample the model cannot run
// fails the load with Triton's text.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRunningSum, buildSimpleDynaSequence, buildSimpleSequence } from '../../tools/onnx/sequence_models.js';
import { get, inferJson } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { runServerToExit, type ServerHandle, startServer } from '../helpers/server.js';

const input = (name: string, dims = '[ 1 ]', source = 'zero_data: true'): string =>
  `inputs { key: "${name}" value { data_type: TYPE_INT32 dims: ${dims} ${source} } }`;
const warmup = (inputs: string, batch = 1, count = 1): string =>
  `model_warmup [{ name: "w" batch_size: ${batch} count: ${count} ${inputs} }]\n`;
function twoInstances(config: string): string {
  if (!config.includes('count: 1')) throw new Error('no instance count in the config');
  return config.replace('count: 1', 'count: 2');
}

const simpleSeq = buildSimpleSequence();
const dyna = buildSimpleDynaSequence();
const sum = buildRunningSum();

async function send(url: string, model: string, id: number, value: number, start: boolean, end: boolean): Promise<number> {
  const r = await inferJson(url, model, {
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [value] }],
    parameters: { sequence_id: id, sequence_start: start, sequence_end: end },
  });
  expect(r.status).toBe(200);
  return r.json().outputs[0].data[0];
}

describe('model_warmup on sequence models', () => {
  let repo: Repo;
  let server: ServerHandle;
  beforeAll(async () => {
    repo = makeRepo([
      // The sample names the controls (Triton: "including control tensors"), here all zeros.
      {
        name: 'simple_sequence',
        config: twoInstances(simpleSeq.config) + warmup(input('INPUT') + input('START') + input('READY'), 2, 2),
        versions: { 1: simpleSeq.onnx },
      },
      // The sample leaves the controls out: START, END, READY true and CORRID 0 are filled in.
      {
        name: 'simple_dyna_sequence',
        config: twoInstances(dyna.config) + warmup(input('INPUT', '[ 1 ]', 'random_data: true'), 4),
        versions: { 1: dyna.onnx },
      },
      // Implicit state left out: the initial (zero) state is filled in; SUM_OUT is dropped.
      { name: 'running_sum', config: twoInstances(sum.config) + warmup(input('INPUT'), 3, 2), versions: { 1: sum.onnx } },
    ]);
    server = await startServer(repo.dir);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  it('loads every model, and the warm-up runs are not counted in the statistics', async () => {
    for (const m of ['simple_sequence', 'simple_dyna_sequence', 'running_sum']) {
      expect((await get(server.url, `/v2/models/${m}/ready`)).status).toBe(200);
      const stats = (await get(server.url, `/v2/models/${m}/stats`)).json().model_stats[0];
      expect(stats.execution_count).toBe(0);
      expect(stats.inference_count).toBe(0);
    }
  });

  it('serves sequences after the warm-up as if it had not happened', async () => {
    // running_sum: a fresh sequence starts from the zero state.
    const sums: number[] = [];
    for (const [i, v] of [5, 3, -2].entries()) sums.push(await send(server.url, 'running_sum', 1, v, i === 0, i === 2));
    expect(sums).toEqual([5, 8, 6]);
    // simple_sequence: OUTPUT = (INPUT + START) * READY.
    expect(await send(server.url, 'simple_sequence', 2, 10, true, false)).toBe(11);
    expect(await send(server.url, 'simple_sequence', 2, 10, false, true)).toBe(10);
    // simple_dyna_sequence: OUTPUT = INPUT + START + END * CORRID, READY rows.
    expect(await send(server.url, 'simple_dyna_sequence', 77, 1, true, false)).toBe(2);
    expect(await send(server.url, 'simple_dyna_sequence', 77, 1, false, true)).toBe(78);
  });
});

describe('a sequence model whose warm-up sample cannot run', () => {
  it("fails the load with Triton's text, naming the sample", async () => {
    // START as [1, 2] per request: the graph takes [batch, 1].
    const broken = makeRepo([
      {
        name: 'bad_seq',
        config: simpleSeq.config.replace('name: "simple_sequence"', 'name: "bad_seq"') + warmup(input('INPUT') + input('START', '[ 2 ]')),
        versions: { 1: simpleSeq.onnx },
      },
    ]);
    try {
      const r = await runServerToExit(broken.dir);
      expect(r.code).not.toBe(0);
      expect(r.stdout + r.stderr).toMatch(
        /failed to load 'bad_seq' version 1: failed to run warmup sample 'w': onnxruntime execution failed: .*START/,
      );
      expect(r.stdout).toMatch(/bad_seq .*UNAVAILABLE/);
    } finally {
      broken.cleanup();
    }
  });
});
