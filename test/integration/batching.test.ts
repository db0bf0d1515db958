// The dynamic batcher's dispatch rules and ragged batching through the spawned server:
//  - a batch larger than the largest preferred size, and a request followed by one of another
//    shape, go at once although max_queue_delay is 10 s (Triton's GetDynamicBatch rules);
//  - ragged_sum (allow_ragged_batch + batch_input + batch_output) loads, batches requests of
//    different lengths into one execution and answers each with its own sums and elements.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIdentity } from '../../tools/onnx/models.js';
import { buildRaggedSum } from '../../tools/onnx/ragged_models.js';
import { get, inferJson } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';

const DELAYED = `name: "delayed"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching {
  preferred_batch_size: [ 2, 6 ]
  max_queue_delay_microseconds: 10000000
}
instance_group [ { count: 1 kind: KIND_CPU } ]
`;

/** Well under the 10 s queue delay, however loaded the machine. */
const AT_ONCE_MS = 5000;

describe('dynamic batcher rules and ragged batching (spawned server)', () => {
  let repo: Repo;
  let server: ServerHandle;

  beforeAll(async () => {
    const ragged = buildRaggedSum();
    repo = makeRepo([
      { name: 'delayed', config: DELAYED, versions: { 1: buildIdentity('fp32', 'float32', 'TYPE_FP32').onnx } },
      // Here the four requests of a test go together as soon as they are all queued (preferred 4).
      {
        name: 'ragged_sum',
        config: ragged.config.replace(
          'max_queue_delay_microseconds: 50000',
          'preferred_batch_size: [ 4 ]\n  max_queue_delay_microseconds: 2000000',
        ),
        versions: { 1: ragged.onnx },
      },
    ]);
    server = await startServer(repo.dir);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  const rows = (batch: number, width: number, base = 0): number[][] =>
    Array.from({ length: batch }, (_, r) => Array.from({ length: width }, (_, c) => base + r * width + c));
  const infer = (model: string, batch: number, width: number, base = 0) =>
    inferJson(server.url, model, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [batch, width], data: rows(batch, width, base) }],
    });
  const stats = async (model: string) => (await get(server.url, `/v2/models/${model}/stats`)).json().model_stats[0];

  it('a request of batch 7 with preferred sizes [2, 6] runs at once, not after the 10 s delay', async () => {
    const t0 = performance.now();
    const res = await infer('delayed', 7, 3);
    expect(performance.now() - t0).toBeLessThan(AT_ONCE_MS);
    expect(res.status).toBe(200);
    expect(res.json().outputs[0].shape).toEqual([7, 3]);
    expect(res.json().outputs[0].data).toEqual(rows(7, 3).flat());
  });

  it('a request followed by one of another shape runs at once; the next pair reaches preferred size 2 and runs too', async () => {
    const before = await stats('delayed');
    const t0 = performance.now();
    const first = infer('delayed', 1, 4, 100);
    await new Promise((r) => setTimeout(r, 200)); // first is queued, waiting for the delay
    const second = infer('delayed', 1, 5, 200);
    await new Promise((r) => setTimeout(r, 200));
    const third = infer('delayed', 1, 5, 300);
    const [a, b, c] = await Promise.all([first, second, third]);
    expect(performance.now() - t0).toBeLessThan(AT_ONCE_MS);
    expect(a.json().outputs[0].data).toEqual(rows(1, 4, 100).flat());
    expect(b.json().outputs[0].data).toEqual(rows(1, 5, 200).flat());
    expect(c.json().outputs[0].data).toEqual(rows(1, 5, 300).flat());
    const after = await stats('delayed');
    // Two executions: [first] and [second, third].
    expect(Number(after.execution_count) - Number(before.execution_count)).toBe(2);
    expect(Number(after.inference_count) - Number(before.inference_count)).toBe(3);
  });

  it('ragged_sum batches requests of different lengths into one execution and answers each with its own results', async () => {
    const lengths = [3, 5, 1, 4];
    const inputs = lengths.map((n, i) => Array.from({ length: n }, (_, k) => (i + 1) * 10 + k));
    const before = await stats('ragged_sum');
    const results = await Promise.all(
      inputs.map((x) =>
        inferJson(server.url, 'ragged_sum', { inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, x.length], data: x }] }),
      ),
    );
    results.forEach((res, i) => {
      expect(res.status, res.text()).toBe(200);
      const x = inputs[i]!;
      const out = Object.fromEntries(res.json().outputs.map((o: { name: string }) => [o.name, o]));
      const sum = x.reduce((s, v) => s + v, 0);
      expect(out.SUM).toMatchObject({ datatype: 'FP32', shape: [1, 1], data: [sum] });
      expect(out.MEAN.shape).toEqual([1, 1]);
      expect(out.MEAN.data[0]).toBeCloseTo(sum / x.length, 5);
      expect(out.DOUBLED).toMatchObject({ datatype: 'FP32', shape: [1, x.length], data: x.map((v) => 2 * v) });
    });
    const after = await stats('ragged_sum');
    expect(Number(after.inference_count) - Number(before.inference_count)).toBe(lengths.length);
    // Requests of lengths 3, 5, 1 and 4 ran as one batch of 4.
    expect(Number(after.execution_count) - Number(before.execution_count)).toBe(1);
  });

  it('ragged_sum reports its batch_input and batch_output in the model config', async () => {
    const cfg = (await get(server.url, '/v2/models/ragged_sum/config')).json();
    expect(cfg.input[0]).toMatchObject({ name: 'INPUT', allow_ragged_batch: true });
    expect(cfg.batch_input.map((b: { kind: string }) => b.kind)).toEqual(['BATCH_ACCUMULATED_ELEMENT_COUNT', 'BATCH_ELEMENT_COUNT']);
    expect(cfg.batch_output[0]).toMatchObject({ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['DOUBLED'] });
  });
});
