// Ensembles as tritonserver answers them (checked side by side with 2.51, docs/ensembles.md): the
// ensemble's own output reshape, the sequence fields every response carries (and a step
// response's override of them), and how failures are counted.
import { afterEach, describe, expect, it } from 'vitest';
import type { EnsembleStep } from '../../src/config/ensemble.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';
import { type EnsembleTensor, responseSequence, runEnsembleGraph } from '../../src/model/ensemble.js';
import { type EnsembleSpec, ensembleConfig } from '../helpers/ensemble.js';
import { resolveForTest } from '../helpers/resolve.js';
import { fromI32, i32 } from '../helpers/tensors.js';
import { identityTestModel, SIMPLE_TEST_MODEL, startTestCore, type TestCore, type TestModel } from '../helpers/test_core.js';

const ensemble = (spec: EnsembleSpec): TestModel => ({ name: spec.name, config: ensembleConfig(spec), model: SIMPLE_TEST_MODEL.model });

/** IN (INT32 [4]) through an identity model to OUT, whose ensemble config says `outDims` and `extra`. */
function wrap(name: string, maxBatchSize: number, outDims: number[], outExtra = ''): TestModel {
  const t = ensemble({
    name,
    maxBatchSize,
    inputs: [{ name: 'IN', type: 'TYPE_INT32', dims: [4] }],
    outputs: [{ name: 'OUT', type: 'TYPE_INT32', dims: outDims }],
    steps: [{ model: maxBatchSize ? 'id_b' : 'id_4', inputs: { INPUT0: 'IN' }, outputs: { OUTPUT0: 'OUT' } }],
  });
  return { ...t, config: t.config.replace(`dims: [ ${outDims.join(', ')} ] }`, `dims: [ ${outDims.join(', ')} ]${outExtra} }`) };
}

const request = (model: string, values: number[], shape: number[], parameters: InferRequest['parameters'] = {}): InferRequest => ({
  modelName: model,
  modelVersion: '',
  id: '',
  parameters,
  inputs: [{ name: 'IN', datatype: 'INT32', shape, data: i32(values) }],
});

let t: TestCore | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const models = (): TestModel[] => [
  identityTestModel('id_4', 'INT32', [4], 0),
  identityTestModel('id_b', 'INT32', [4], 8),
  wrap('reshaped', 0, [2, 2], ' reshape { shape: [ 4 ] }'),
  wrap('reshaped_b', 8, [2, 2], ' reshape { shape: [ 4 ] }'),
  wrap('plain', 0, [4]),
];

describe("an ensemble's own output reshape", () => {
  it('applies to its response: clients see its dims, with the batch dimension when it batches', async () => {
    t = await startTestCore(models());
    const r = await t.core.infer(request('reshaped', [1, 2, 3, 4], [4]));
    expect(r.outputs[0]!.shape).toEqual([2, 2]);
    expect(fromI32(r.outputs[0]!.data)).toEqual([1, 2, 3, 4]);
    const b = await t.core.infer(request('reshaped_b', [1, 2, 3, 4, 5, 6, 7, 8], [2, 4]));
    expect(b.outputs[0]!.shape).toEqual([2, 2, 2]);
    // Without a reshape the step's shape goes out as it is.
    expect((await t.core.infer(request('plain', [1, 2, 3, 4], [4]))).outputs[0]!.shape).toEqual([4]);
  });
});

describe('sequence fields on ensemble responses', () => {
  it("every response carries the request's sequence_id, sequence_start, sequence_end (0/false without one)", async () => {
    t = await startTestCore(models());
    expect((await t.core.infer(request('plain', [1, 2, 3, 4], [4]))).parameters).toEqual({
      sequence_id: 0n,
      sequence_start: false,
      sequence_end: false,
    });
    const seq = await t.core.infer(request('plain', [1, 2, 3, 4], [4], { sequence_id: 5, sequence_start: true }));
    expect(seq.parameters).toEqual({ sequence_id: 5n, sequence_start: true, sequence_end: false });
    // In Triton's order (its HTTP JSON lists them so).
    expect(Object.keys(seq.parameters!)).toEqual(['sequence_id', 'sequence_start', 'sequence_end']);
    const str = await t.core.infer(request('plain', [1, 2, 3, 4], [4], { sequence_id: 'abc', sequence_end: true }));
    expect(str.parameters).toEqual({ sequence_id: 'abc', sequence_start: false, sequence_end: true });
    // Triton sends an integer ID as an int64 parameter: 2^64 - 1 arrives as -1.
    const max = await t.core.infer(request('plain', [1, 2, 3, 4], [4], { sequence_id: 2n ** 64n - 1n }));
    expect(max.parameters!.sequence_id).toBe(-1n);
  });

  it('no wanted output there: no fields', () => {
    expect(responseSequence(new Map([['OUT', null]]), ['OUT'], { id: 3n, start: true, end: false })).toBeUndefined();
  });

  it("a step response's own sequence fields pass to the steps after it and to the response (Triton's override)", async () => {
    const m = resolveForTest(
      {
        name: 'm',
        max_batch_size: 0,
        input: [{ name: 'X', data_type: 'TYPE_INT32', dims: [1] }],
        output: [{ name: 'Y', data_type: 'TYPE_INT32', dims: [1] }],
      },
      { folderName: 'm' },
    );
    const steps: EnsembleStep[] = [
      { index: 0, modelName: 'm', modelVersion: -1, inputMap: [['X', 'IN']], outputMap: [['Y', 'mid']] },
      { index: 1, modelName: 'm', modelVersion: -1, inputMap: [['X', 'mid']], outputMap: [['Y', 'OUT']] },
    ];
    const asked: InferRequest[] = [];
    const answer = (req: InferRequest, parameters?: InferResponse['parameters']): InferResponse => ({
      modelName: 'm',
      modelVersion: '1',
      id: '',
      outputs: [{ name: 'Y', datatype: 'INT32', shape: req.inputs[0]!.shape, data: req.inputs[0]!.data }],
      ...(parameters && { parameters }),
    });
    const inTensor: EnsembleTensor = { datatype: 'INT32', shape: [1], data: i32([7]), batchSize: 0 };
    const own = { id: 11n, start: true, end: false };
    const run = (override: boolean) =>
      runEnsembleGraph({
        requestId: '',
        parameters: { sequence_id: 11n, sequence_start: true },
        steps,
        models: [m, m],
        inputs: new Map([['IN', inTensor]]),
        wanted: ['OUT'],
        sequence: own,
        call: async (i, req) => {
          asked.push(req);
          return answer(req, i === 0 && override ? { sequence_id: 'other', sequence_end: true } : undefined);
        },
      });
    const plain = await run(false);
    expect(asked[1]!.parameters).toEqual({ sequence_id: 11n, sequence_start: true });
    expect(fromI32(plain.get('OUT')!.data)).toEqual([7]);
    expect(responseSequence(plain, ['OUT'], own)).toEqual({ sequence_id: 11n, sequence_start: true, sequence_end: false });
    asked.length = 0;
    const overridden = await run(true);
    // The second step runs under the first one's fields: a START flag it did not set is off.
    expect(asked[1]!.parameters).toEqual({ sequence_id: 'other', sequence_start: false, sequence_end: true });
    expect(responseSequence(overridden, ['OUT'], own)).toEqual({ sequence_id: 'other', sequence_start: false, sequence_end: true });
  });
});

describe('failure counters', () => {
  const failures = (name: string) => Object.fromEntries(t!.core.metricsSnapshot().find((r) => r.model === name)!.stats.failuresByReason);

  it("a step's failure counts once on the ensemble, as OTHER; a request the ensemble refuses is not counted", async () => {
    // The ensemble takes any length; its step only 4.
    const loose = ensemble({
      name: 'loose',
      maxBatchSize: 0,
      inputs: [{ name: 'IN', type: 'TYPE_INT32', dims: [-1] }],
      outputs: [{ name: 'OUT', type: 'TYPE_INT32', dims: [-1] }],
      steps: [{ model: 'id_4', inputs: { INPUT0: 'IN' }, outputs: { OUTPUT0: 'OUT' } }],
    });
    t = await startTestCore([identityTestModel('id_4', 'INT32', [4], 0), loose]);
    await expect(t.core.infer(request('loose', [1, 2, 3], [3]))).rejects.toMatchObject({ code: 'INVALID_ARG' });
    expect(failures('loose')).toEqual({ OTHER: 1 });
    expect(t.core.statistics('loose', '')[0]!.inference_stats.fail.count).toBe(1);
    // Refused by the ensemble's own checks (a wrong datatype): no failure counted, as in Triton.
    await expect(
      t.core.infer({
        ...request('loose', [1, 2, 3, 4], [4]),
        inputs: [{ name: 'IN', datatype: 'FP32', shape: [4], data: i32([1, 2, 3, 4]) }],
      }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARG',
    });
    expect(failures('loose')).toEqual({ OTHER: 1 });
  });
});
