// Ensembles with a decoupled step (src/model/ensemble.ts stream(), streamEnsembleGraph; the
// decoupled walk of src/config/ensemble.ts), over composing models faked as loaded versions: the
// config Triton completes, the checks that refuse such an ensemble, and how a request runs: each
// response of the decoupled step feeds the next step once, each completed wave is one ensemble
// response, the final flag comes once no step request is running, errors and cancellation.
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/config/types.js';
import { Cancellation } from '../../src/kernel/cancel.js';
import { ServalError } from '../../src/kernel/errors.js';
import type { InferOutputTensor, InferRequest, InferResponse, ResponseSink } from '../../src/kernel/types.js';
import { EnsembleVersion } from '../../src/model/ensemble.js';
import { type EnsembleSpec, ensembleConfig, FakeVersion, parseConfig } from '../helpers/ensemble.js';
import { expectServalError } from '../helpers/errors.js';
import { RecordedTrace } from '../helpers/frontends.js';
import { resolveForTest } from '../helpers/resolve.js';
import { fromI32, i32, rawOf, valuesOf } from '../helpers/tensors.js';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Triton's repeat example, faked: IN [-1] → one response per element, OUT [1] and its index IDX [1]. */
const repeatConfig = (decoupled = true): ModelConfig => ({
  name: 'repeat',
  max_batch_size: 0,
  input: [{ name: 'IN', data_type: 'TYPE_INT32', dims: [-1] }],
  output: [
    { name: 'OUT', data_type: 'TYPE_INT32', dims: [1] },
    { name: 'IDX', data_type: 'TYPE_UINT32', dims: [1] },
  ],
  model_transaction_policy: { decoupled },
});

/** OUT = IN + 1, not decoupled. */
const addOneConfig = (name = 'add_one'): ModelConfig => ({
  name,
  max_batch_size: 0,
  input: [{ name: 'IN', data_type: 'TYPE_INT32', dims: [1] }],
  output: [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [1] }],
});

/** repeat → add_one for each of its responses; the ensemble answers add_one's OUT and repeat's IDX. */
const repeatThenAddOne = (extra = ''): EnsembleSpec => ({
  name: 'ens',
  maxBatchSize: 0,
  inputs: [{ name: 'IN', type: 'TYPE_INT32', dims: [-1] }],
  outputs: [
    { name: 'OUT', type: 'TYPE_INT32', dims: [1] },
    { name: 'IDX', type: 'TYPE_UINT32', dims: [1] },
  ],
  steps: [
    { model: 'repeat', inputs: { IN: 'IN' }, outputs: { OUT: 'repeated', IDX: 'IDX' } },
    { model: 'add_one', inputs: { IN: 'repeated' }, outputs: { OUT: 'OUT' } },
  ],
  extra,
});

interface Setup {
  ensemble: EnsembleVersion;
  repeat: FakeVersion;
  addOne: FakeVersion;
  models: Map<string, FakeVersion>;
}

async function setup(spec: EnsembleSpec = repeatThenAddOne(), configs: ModelConfig[] = [repeatConfig(), addOneConfig()]): Promise<Setup> {
  const models = new Map(configs.map((c) => [c.name!, new FakeVersion(resolveForTest(c))]));
  const lookup = (name: string): FakeVersion => {
    const m = models.get(name);
    if (!m) throw ServalError.unavailable(`Request for unknown model: '${name}' is not found`);
    return m;
  };
  const ensemble = await EnsembleVersion.load(parseConfig(ensembleConfig(spec)), spec.name, '/nonexistent', 1, lookup);
  return { ensemble, repeat: models.get('repeat')!, addOne: models.get('add_one')!, models };
}

type Event = { response: Record<string, number[]> | undefined; final: boolean } | { error: string; code: string; final: boolean };

/** A sink that keeps what it is given, outputs decoded. */
function recorder(): ResponseSink & { events: Event[] } {
  const events: Event[] = [];
  const decode = (res: InferResponse): Record<string, number[]> =>
    Object.fromEntries(
      res.outputs.map((o) => [o.name, o.datatype === 'UINT32' ? (valuesOf('UINT32', o.data) as number[]) : fromI32(o.data)]),
    );
  return {
    events,
    response: (res, final) => events.push({ response: res && decode(res), final }),
    error: (e, final) => events.push({ error: e.message, code: e.code, final }),
  };
}

const request = (values: number[], cancellation?: Cancellation): InferRequest => ({
  modelName: 'ens',
  modelVersion: '',
  id: 'r1',
  parameters: {},
  inputs: [{ name: 'IN', datatype: 'INT32', shape: [values.length], data: i32(values) }],
  ...(cancellation && { cancellation }),
});

/** Response `idx` of the repeat model: OUT = value, IDX = idx. */
const repeated = (value: number, idx: number): InferOutputTensor[] => [
  { name: 'OUT', datatype: 'INT32', shape: [1], data: i32([value]) },
  { name: 'IDX', datatype: 'UINT32', shape: [1], data: rawOf('UINT32', [idx]) },
];

/** add_one's answer to call `i`: its input plus one. */
function addOne(s: Setup, i: number): void {
  const call = s.addOne.calls[i]!;
  const x = fromI32(call.req.inputs[0]!.data);
  call.respond([{ name: 'OUT', datatype: 'INT32', shape: [1], data: i32(x.map((v) => v + 1)) }]);
}

describe('the config of an ensemble with a decoupled step', () => {
  it('is decoupled, in its config JSON too, though its own config says it is not', async () => {
    const { ensemble } = await setup(repeatThenAddOne('model_transaction_policy { decoupled: false }'));
    expect(ensemble.decoupled).toBe(true);
    expect(ensemble.config.json.model_transaction_policy).toStrictEqual({ decoupled: true });
    expect(ensemble.stats.decoupled).toBe(true);
  });

  it('is not decoupled when no step is, though its own config says it is', async () => {
    const spec: EnsembleSpec = {
      ...repeatThenAddOne('model_transaction_policy { decoupled: true }'),
      steps: [
        { model: 'repeat', inputs: { IN: 'IN' }, outputs: { OUT: 'repeated', IDX: 'IDX' } },
        { model: 'add_one', inputs: { IN: 'repeated' }, outputs: { OUT: 'OUT' } },
      ],
    };
    const { ensemble } = await setup(spec, [repeatConfig(false), addOneConfig()]);
    expect(ensemble.decoupled).toBe(false);
    expect(ensemble.config.json.model_transaction_policy).toStrictEqual({ decoupled: false });
  });

  it('refuses a response cache, as Triton refuses one on any decoupled model', async () => {
    const err = await setup(repeatThenAddOne('response_cache { enable: true }')).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServalError);
    expect((err as ServalError).message).toBe(
      "Response Cache does not currently support model ens with 'decoupled' transaction policy. Please disable the response cache.",
    );
  });

  it('refuses outputs that come from a decoupled step and from the request side by side, naming the ensemble', async () => {
    // ECHO is add_one over the request's own ONE: its tensors cannot be paired with repeat's OUT.
    const spec: EnsembleSpec = {
      name: 'ens',
      maxBatchSize: 0,
      inputs: [
        { name: 'IN', type: 'TYPE_INT32', dims: [-1] },
        { name: 'ONE', type: 'TYPE_INT32', dims: [1] },
      ],
      outputs: [
        { name: 'OUT', type: 'TYPE_INT32', dims: [1] },
        { name: 'ECHO', type: 'TYPE_INT32', dims: [1] },
      ],
      steps: [
        { model: 'repeat', inputs: { IN: 'IN' }, outputs: { OUT: 'OUT' } },
        { model: 'add_one', inputs: { IN: 'ONE' }, outputs: { OUT: 'ECHO' } },
      ],
    };
    const err = await setup(spec).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ServalError);
    expect((err as ServalError).code).toBe('INVALID_ARG');
    expect((err as ServalError).message).toBe(
      "in ensemble ens, step of model 'ens' receives inputs originated from different decoupled models",
    );
  });

  it('refuses a step fed from a decoupled step and from the request side by side, naming the step', async () => {
    const pair: ModelConfig = {
      name: 'pair',
      max_batch_size: 0,
      input: [
        { name: 'A', data_type: 'TYPE_INT32', dims: [1] },
        { name: 'B', data_type: 'TYPE_INT32', dims: [1] },
      ],
      output: [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [1] }],
    };
    const spec: EnsembleSpec = {
      name: 'ens',
      maxBatchSize: 0,
      inputs: [
        { name: 'IN', type: 'TYPE_INT32', dims: [-1] },
        { name: 'ONE', type: 'TYPE_INT32', dims: [1] },
      ],
      outputs: [{ name: 'OUT', type: 'TYPE_INT32', dims: [1] }],
      steps: [
        { model: 'repeat', inputs: { IN: 'IN' }, outputs: { OUT: 'repeated' } },
        { model: 'pair', inputs: { A: 'repeated', B: 'ONE' }, outputs: { OUT: 'mid' } },
        { model: 'add_one', inputs: { IN: 'mid' }, outputs: { OUT: 'OUT' } },
      ],
    };
    const err = await setup(spec, [repeatConfig(), addOneConfig(), pair]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as ServalError).message).toBe(
      "in ensemble ens, step of model 'pair' receives inputs originated from different decoupled models",
    );
  });

  it('becomes decoupled when a composing model reloaded as decoupled is checked again', async () => {
    const s = await setup(repeatThenAddOne(), [repeatConfig(false), addOneConfig()]);
    expect(s.ensemble.decoupled).toBe(false);
    s.repeat.config = resolveForTest(repeatConfig(true));
    s.ensemble.recheck();
    expect(s.ensemble.decoupled).toBe(true);
    expect(s.ensemble.config.json.model_transaction_policy).toStrictEqual({ decoupled: true });
  });
});

describe('a request to an ensemble with a decoupled step', () => {
  it('answers once per response of the decoupled step, then the final flag alone', async () => {
    const s = await setup();
    const sink = recorder();
    s.ensemble.stream(request([10, 20, 30]), process.hrtime.bigint(), sink);
    expect(s.repeat.calls).toHaveLength(1);
    expect(fromI32(s.repeat.calls[0]!.req.inputs[0]!.data)).toStrictEqual([10, 20, 30]);
    const r = s.repeat.calls[0]!;
    r.respond(repeated(10, 0), false);
    r.respond(repeated(20, 1), false);
    // Each response started its own add_one request, with that response's tensor.
    expect(s.addOne.calls.map((c) => fromI32(c.req.inputs[0]!.data))).toStrictEqual([[10], [20]]);
    expect(s.addOne.calls[0]!.req.outputs).toStrictEqual([{ name: 'OUT' }]);
    addOne(s, 1);
    addOne(s, 0);
    await tick();
    r.respond(repeated(30, 2), false);
    addOne(s, 2);
    await tick();
    expect(sink.events).toStrictEqual([
      // add_one answered the second first: the waves pair in the order the tensors arrived, as in Triton.
      { response: { OUT: [21], IDX: [0] }, final: false },
      { response: { OUT: [11], IDX: [1] }, final: false },
      { response: { OUT: [31], IDX: [2] }, final: false },
    ]);
    expect(s.ensemble.stats.success.count).toBe(0);
    r.respond(undefined, true);
    expect(sink.events.at(-1)).toStrictEqual({ response: undefined, final: true });
    expect(sink.events).toHaveLength(4);
    // Counted once, at the end; its first response was counted as it went.
    expect(s.ensemble.stats.success.count).toBe(1);
    expect(s.ensemble.stats.executionCount).toBe(1);
    expect(s.ensemble.stats.firstResponse.count).toBe(1);
    expect(s.ensemble.stats.pending).toBe(0);
  });

  it('sends the final flag with the last response when the decoupled step ended before it', async () => {
    const s = await setup();
    const sink = recorder();
    s.ensemble.stream(request([1, 2]), process.hrtime.bigint(), sink);
    const r = s.repeat.calls[0]!;
    r.respond(repeated(1, 0), false);
    r.respond(repeated(2, 1), true);
    addOne(s, 0);
    await tick();
    expect(sink.events).toStrictEqual([{ response: { OUT: [2], IDX: [0] }, final: false }]);
    addOne(s, 1);
    await tick();
    expect(sink.events).toStrictEqual([
      { response: { OUT: [2], IDX: [0] }, final: false },
      { response: { OUT: [3], IDX: [1] }, final: true },
    ]);
  });

  it('sends only the final flag when the decoupled step sends no response', async () => {
    const s = await setup();
    const sink = recorder();
    s.ensemble.stream(request([]), process.hrtime.bigint(), sink);
    s.repeat.calls[0]!.respond(undefined, true);
    expect(sink.events).toStrictEqual([{ response: undefined, final: true }]);
    expect(s.addOne.calls).toHaveLength(0);
    expect(s.ensemble.stats.success.count).toBe(1);
    expect(s.ensemble.stats.fail.count).toBe(0);
  });

  it('reports a step error after the responses already sent, in the ensemble name, as the final response', async () => {
    const s = await setup();
    const sink = recorder();
    s.ensemble.stream(request([1, 2]), process.hrtime.bigint(), sink);
    const r = s.repeat.calls[0]!;
    r.respond(repeated(1, 0), false);
    addOne(s, 0);
    await tick();
    r.fail(ServalError.internal('repeat broke'), true);
    expect(sink.events).toStrictEqual([
      { response: { OUT: [2], IDX: [0] }, final: false },
      { error: "in ensemble 'ens', repeat broke", code: 'INTERNAL', final: true },
    ]);
    expect(s.ensemble.stats.fail.count).toBe(1);
    expect(s.ensemble.stats.success.count).toBe(0);
    expect(s.ensemble.stats.pending).toBe(0);
  });

  it('waits for the steps still running before the error, and sends none of their responses', async () => {
    const s = await setup();
    const sink = recorder();
    s.ensemble.stream(request([1, 2]), process.hrtime.bigint(), sink);
    const r = s.repeat.calls[0]!;
    r.respond(repeated(1, 0), false);
    r.fail(ServalError.internal('repeat broke'), false);
    // An error that is not final: the step may still send, but nothing new starts from it.
    r.respond(repeated(2, 1), true);
    expect(s.addOne.calls).toHaveLength(1);
    expect(sink.events).toStrictEqual([]);
    addOne(s, 0);
    await tick();
    expect(sink.events).toStrictEqual([{ error: "in ensemble 'ens', repeat broke", code: 'INTERNAL', final: true }]);
  });

  it('fails at once, as a final error, when a composing model is gone', async () => {
    const s = await setup();
    s.models.delete('add_one');
    const sink = recorder();
    s.ensemble.stream(request([1]), process.hrtime.bigint(), sink);
    expect(sink.events).toStrictEqual([
      { error: "in ensemble 'ens', Request for unknown model: 'add_one' is not found", code: 'UNAVAILABLE', final: true },
    ]);
    expect(s.repeat.calls).toHaveLength(0);
  });

  it('throws what the ensemble checks refuse, before anything runs', async () => {
    const s = await setup();
    const bad: InferRequest = { ...request([1]), inputs: [{ name: 'NOPE', datatype: 'INT32', shape: [1], data: i32([1]) }] };
    const err = expectServalError(() => s.ensemble.stream(bad, process.hrtime.bigint(), recorder()), 'INVALID_ARG');
    expect(err.message).toContain("unexpected inference input 'NOPE' for model 'ens'");
    expect(s.repeat.calls).toHaveLength(0);
  });

  it('is refused by infer(): its responses can only be streamed', async () => {
    const s = await setup();
    await expect(s.ensemble.infer(request([1]), process.hrtime.bigint())).rejects.toThrow("model 'ens' is decoupled");
  });

  it('cancels the step requests running and every one started after the cancellation', async () => {
    const s = await setup();
    const sink = recorder();
    const cancellation = new Cancellation();
    s.ensemble.stream(request([1, 2]), process.hrtime.bigint(), sink, undefined);
    // (the first request runs uncancelled to the end)
    s.repeat.calls[0]!.respond(undefined, true);
    s.ensemble.stream(request([1, 2], cancellation), process.hrtime.bigint(), sink);
    const r = s.repeat.calls[1]!;
    expect(r.req.cancellation?.cancelled).toBe(false);
    cancellation.cancel();
    expect(r.req.cancellation?.cancelled).toBe(true);
    // A response the model still sends starts add_one already cancelled.
    r.respond(repeated(1, 0), false);
    expect(s.addOne.calls[0]!.req.cancellation?.cancelled).toBe(true);
    s.addOne.calls[0]!.fail(ServalError.cancelled('Request was cancelled'));
    r.fail(ServalError.cancelled('Request was cancelled'), true);
    await tick();
    expect(sink.events.at(-1)).toStrictEqual({ error: "in ensemble 'ens', Request was cancelled", code: 'CANCELLED', final: true });
    expect(sink.events).toHaveLength(2);
  });

  it('leaves an output a step left out out of that response', async () => {
    const s = await setup();
    const sink = recorder();
    s.ensemble.stream(request([5]), process.hrtime.bigint(), sink);
    const r = s.repeat.calls[0]!;
    // No IDX in this response: the wave still completes, without it.
    r.respond([{ name: 'OUT', datatype: 'INT32', shape: [1], data: i32([5]) }], true);
    addOne(s, 0);
    await tick();
    expect(sink.events).toStrictEqual([{ response: { OUT: [6] }, final: true }]);
  });

  it('traces each step request under its own child trace, ended with its final response', async () => {
    const s = await setup();
    const trace = new RecordedTrace(7, true);
    s.ensemble.stream({ ...request([1, 2]), trace }, process.hrtime.bigint(), recorder());
    const r = s.repeat.calls[0]!;
    r.respond(repeated(1, 0), false);
    r.respond(repeated(2, 1), false);
    expect(trace.children.map((c) => c.modelRecord?.name)).toStrictEqual(['repeat', 'add_one', 'add_one']);
    expect(trace.children[0]!.names()).toStrictEqual(['REQUEST_START']);
    r.respond(undefined, true);
    addOne(s, 0);
    addOne(s, 1);
    await tick();
    for (const c of trace.children) {
      expect(c.names()).toStrictEqual(['REQUEST_START', 'REQUEST_END']);
      expect(c.ended).toBe(1);
    }
    expect(trace.names()).toStrictEqual(['QUEUE_START']);
    // The ensemble's own tensors: its input as queued, each response's outputs as sent.
    expect(trace.tensorRecords.map((t) => `${t.activity} ${t.name}`)).toStrictEqual([
      'TENSOR_QUEUE_INPUT IN',
      'TENSOR_BACKEND_OUTPUT OUT',
      'TENSOR_BACKEND_OUTPUT IDX',
      'TENSOR_BACKEND_OUTPUT OUT',
      'TENSOR_BACKEND_OUTPUT IDX',
    ]);
  });

  it('runs only the steps a requested output depends on', async () => {
    const s = await setup();
    const sink = recorder();
    s.ensemble.stream({ ...request([7, 8]), outputs: [{ name: 'IDX' }] }, process.hrtime.bigint(), sink);
    const r = s.repeat.calls[0]!;
    r.respond(repeated(7, 0), false);
    r.respond(repeated(8, 1), true);
    expect(s.addOne.calls).toHaveLength(0);
    expect(sink.events).toStrictEqual([
      { response: { IDX: [0] }, final: false },
      { response: { IDX: [1] }, final: true },
    ]);
  });
});
