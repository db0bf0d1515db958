// src/model/ensemble.ts runEnsembleGraph: an ensemble's steps as a graph over fake composing
// models: which steps start when, what each step is asked, what is pruned, how errors, missing
// outputs and cancellation travel.
import { describe, expect, it } from 'vitest';
import type { EnsembleStep } from '../../src/config/ensemble.js';
import type { ResolvedModelConfig } from '../../src/config/resolved.js';
import { Cancellation } from '../../src/kernel/cancel.js';
import { ServalError } from '../../src/kernel/errors.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';
import { type EnsembleTensor, type GraphRun, runEnsembleGraph } from '../../src/model/ensemble.js';
import { resolveForTest } from '../helpers/resolve.js';

/** A composing model with one FP32 input X and output Y of dims [2], batching or not. */
function model(name: string, maxBatchSize: number): ResolvedModelConfig {
  return resolveForTest(
    {
      name,
      max_batch_size: maxBatchSize,
      input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [2] }],
      output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [2] }],
    },
    { folderName: name },
  );
}

const step = (index: number, from: string, to: string, modelVersion = -1): EnsembleStep => ({
  index,
  modelName: `m${index}`,
  modelVersion,
  inputMap: [['X', from]],
  outputMap: [['Y', to]],
});

const tensor = (values: number[], batchSize = 1): EnsembleTensor => ({
  datatype: 'FP32',
  shape: batchSize ? [batchSize, values.length / batchSize] : [values.length],
  data: new Uint8Array(Float32Array.from(values).buffer),
  batchSize,
});

const floats = (t: EnsembleTensor | null | undefined): number[] => Array.from(new Float32Array(t!.data.slice().buffer));

/** A controllable composing-model call: each request waits until the test answers it. */
class Calls {
  readonly log: { index: number; req: InferRequest; answer: (r: InferResponse | Error) => void }[] = [];

  call = (index: number, req: InferRequest): Promise<InferResponse> =>
    new Promise((resolve, reject) => {
      this.log.push({ index, req, answer: (r) => (r instanceof Error ? reject(r) : resolve(r)) });
    });

  /** Answers call `i` with Y = X + `add` (or with an error), then lets the runner react. */
  async answer(i: number, add: number | Error, omit = false): Promise<void> {
    const c = this.log[i]!;
    if (add instanceof Error) c.answer(add);
    else if (omit) c.answer({ modelName: c.req.modelName, modelVersion: '1', id: c.req.id, outputs: [] });
    else {
      const x = c.req.inputs[0]!;
      const y = Float32Array.from(new Float32Array(x.data.slice().buffer), (v) => v + add);
      c.answer({
        modelName: c.req.modelName,
        modelVersion: '1',
        id: c.req.id,
        outputs: [{ name: 'Y', datatype: 'FP32', shape: x.shape, data: new Uint8Array(y.buffer) }],
      });
    }
    await new Promise((r) => setImmediate(r));
  }

  started(): number[] {
    return this.log.map((c) => c.index);
  }
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

function graph(calls: Calls, steps: EnsembleStep[], wanted: string[], over: Partial<GraphRun> = {}): GraphRun {
  return {
    requestId: 'r1',
    parameters: { priority: 2 },
    steps,
    models: steps.map((s) => model(s.modelName, 4)),
    inputs: new Map([['IN', tensor([1, 2])]]),
    wanted,
    call: calls.call,
    ...over,
  };
}

describe('runEnsembleGraph', () => {
  it('runs a chain one step after another, each as a request carrying the ensemble request', async () => {
    const calls = new Calls();
    const run = runEnsembleGraph(graph(calls, [step(0, 'IN', 'a', 2), step(1, 'a', 'OUT')], ['OUT']));
    await tick();
    expect(calls.started()).toStrictEqual([0]);
    const first = calls.log[0]!.req;
    expect(first).toMatchObject({
      modelName: 'm0',
      modelVersion: '2',
      id: 'r1',
      parameters: { priority: 2 },
      outputs: [{ name: 'Y' }],
      inputs: [{ name: 'X', datatype: 'FP32', shape: [1, 2] }],
    });
    await calls.answer(0, 10);
    expect(calls.started()).toStrictEqual([0, 1]);
    expect(calls.log[1]!.req.modelVersion).toBe('');
    await calls.answer(1, 100);
    const out = await run;
    expect(floats(out.get('OUT'))).toStrictEqual([111, 112]);
    expect(out.get('OUT')!.batchSize).toBe(1);
  });

  it('passes a tensor on as the same bytes, not a copy', async () => {
    const calls = new Calls();
    const input = tensor([1, 2]);
    const run = runEnsembleGraph(graph(calls, [step(0, 'IN', 'OUT')], ['OUT'], { inputs: new Map([['IN', input]]) }));
    await tick();
    expect(calls.log[0]!.req.inputs[0]!.data).toBe(input.data);
    await calls.answer(0, 0);
    await run;
  });

  it('starts independent steps together and a joining step once both are done', async () => {
    const calls = new Calls();
    const join: EnsembleStep = { ...step(2, 'a', 'OUT'), inputMap: [['X', 'a']], outputMap: [['Y', 'OUT']] };
    const steps = [step(0, 'IN', 'a'), step(1, 'IN', 'b'), { ...join, inputMap: [['X', 'a'] as const, ['X2', 'b'] as const] }];
    const run = runEnsembleGraph(graph(calls, steps, ['OUT']));
    await tick();
    expect(calls.started()).toStrictEqual([0, 1]);
    await calls.answer(1, 1);
    expect(calls.started()).toStrictEqual([0, 1]);
    await calls.answer(0, 1);
    expect(calls.started()).toStrictEqual([0, 1, 2]);
    expect(calls.log[2]!.req.inputs.map((i) => i.name)).toStrictEqual(['X', 'X2']);
    await calls.answer(2, 0);
    await run;
  });

  it('does not run a step no requested output depends on', async () => {
    const calls = new Calls();
    const run = runEnsembleGraph(graph(calls, [step(0, 'IN', 'OUT_A'), step(1, 'IN', 'OUT_B')], ['OUT_B']));
    await tick();
    expect(calls.started()).toStrictEqual([1]);
    await calls.answer(0, 5);
    const out = await run;
    expect(out.has('OUT_A')).toBe(false);
    expect(floats(out.get('OUT_B'))).toStrictEqual([6, 7]);
  });

  it('fails with the first step error only after the steps in flight finish, and starts nothing more', async () => {
    const calls = new Calls();
    const steps = [step(0, 'IN', 'a'), step(1, 'IN', 'b'), step(2, 'a', 'OUT_A'), step(3, 'b', 'OUT_B')];
    let settled = false;
    const run = runEnsembleGraph(graph(calls, steps, ['OUT_A', 'OUT_B'])).finally(() => {
      settled = true;
    });
    const caught = run.catch((e: unknown) => e);
    await tick();
    await calls.answer(0, ServalError.invalidArg('[request id: r1] step zero broke'));
    expect(settled).toBe(false);
    await calls.answer(1, 1);
    const err = (await caught) as ServalError;
    expect([err.code, err.message]).toStrictEqual(['INVALID_ARG', '[request id: r1] step zero broke']);
    expect(calls.started()).toStrictEqual([0, 1]);
  });

  it('turns a thrown error into a failure of the request', async () => {
    const run = runEnsembleGraph({
      ...graph(new Calls(), [step(0, 'IN', 'OUT')], ['OUT']),
      call: () => {
        throw new Error('boom');
      },
    });
    await expect(run).rejects.toMatchObject({ code: 'INTERNAL', message: 'boom' });
  });

  it('leaves out an input a step did not produce, and reports a deadlock when an output can never be made', async () => {
    const calls = new Calls();
    const run = runEnsembleGraph(graph(calls, [step(0, 'IN', 'a'), step(1, 'a', 'OUT')], ['OUT']));
    const caught = run.catch((e: unknown) => e);
    await tick();
    await calls.answer(0, 0, true);
    expect(calls.log[1]!.req.inputs).toStrictEqual([]);
    await calls.answer(1, 0, true);
    // Both steps ran; OUT was left out by its step: the request still completes without it.
    const out = (await caught) as Map<string, EnsembleTensor | null>;
    expect(out.get('OUT')).toBeNull();

    const never = runEnsembleGraph(graph(new Calls(), [step(0, 'NOT_GIVEN', 'OUT')], ['OUT'], { requestId: '' }));
    await expect(never).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: '[request id: <id_unknown>] unexpected deadlock, at least one output is not set while no more ensemble steps can be made',
    });
  });

  it('converts shapes between a non-batching step and a batching one', async () => {
    const calls = new Calls();
    const steps = [step(0, 'IN', 'a'), step(1, 'a', 'OUT')];
    const models = [model('m0', 0), model('m1', 4)];
    const run = runEnsembleGraph(graph(calls, steps, ['OUT'], { models, inputs: new Map([['IN', tensor([1, 2], 1)]]) }));
    await tick();
    // A batch of one loses its batch dimension for the non-batching model...
    expect(calls.log[0]!.req.inputs[0]!.shape).toStrictEqual([2]);
    await calls.answer(0, 0);
    // ...and what it makes gains one for the batching model.
    expect(calls.log[1]!.req.inputs[0]!.shape).toStrictEqual([1, 2]);
    await calls.answer(1, 0);
    expect((await run).get('OUT')!.batchSize).toBe(1);
  });

  it('cancels the steps in flight and every later one when the request is cancelled', async () => {
    const calls = new Calls();
    const cancellation = new Cancellation();
    const run = runEnsembleGraph(graph(calls, [step(0, 'IN', 'a'), step(1, 'a', 'OUT')], ['OUT'], { cancellation }));
    const caught = run.catch((e: unknown) => e);
    await tick();
    const stepCancel = calls.log[0]!.req.cancellation!;
    expect(stepCancel.cancelled).toBe(false);
    cancellation.cancel();
    expect(stepCancel.cancelled).toBe(true);
    // The step had already started: it completes, and the next one starts cancelled.
    await calls.answer(0, 0);
    expect(calls.log[1]!.req.cancellation!.cancelled).toBe(true);
    await calls.answer(1, ServalError.cancelled('request was cancelled before it was queued'));
    expect(await caught).toMatchObject({ code: 'CANCELLED' });
  });
});
