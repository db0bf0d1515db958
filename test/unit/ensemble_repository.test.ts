// Ensembles in the core and the repository, over the in-process test backend: load order and
// Triton's reasons when a composing model is missing, failing or unfit, inference through the
// composing models' own schedulers, statistics of the ensemble and its models, and explicit-mode
// load / unload with unload_dependents.
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BackendRegistry } from '../../src/backends/registry.js';
import type { InferRequest } from '../../src/kernel/types.js';
import { ModelRepository } from '../../src/repository/repository.js';
import { doubleSimple, type EnsembleSpec, ensembleConfig } from '../helpers/ensemble.js';
import { capturedLogger } from '../helpers/frontends.js';
import { fromI32, i32, range } from '../helpers/tensors.js';
import { executions, testBackend } from '../helpers/test_backend.js';
import { identityTestModel, SIMPLE_TEST_MODEL, startTestCore, type TestCore, type TestModel } from '../helpers/test_core.js';

/** An ensemble folder among test models (its version folder's model.json is never read). */
const ensemble = (spec: EnsembleSpec): TestModel => ({ name: spec.name, config: ensembleConfig(spec), model: SIMPLE_TEST_MODEL.model });

/** A test model's folder in `dir`, as startTestCore writes it (rewritten in place). */
function writeModel(dir: string, m: TestModel): void {
  mkdirSync(path.join(dir, m.name, '1'), { recursive: true });
  writeFileSync(path.join(dir, m.name, '1', 'model.json'), JSON.stringify(m.model));
  writeFileSync(path.join(dir, m.name, 'config.pbtxt'), m.config);
}

const simpleAs = (name: string, edit: (c: string) => string = (c) => c): TestModel => ({
  ...SIMPLE_TEST_MODEL,
  name,
  config: edit(SIMPLE_TEST_MODEL.config.replace('name: "simple"', `name: "${name}"`)),
});

function request(model: string, a: number[], b: number[], id = ''): InferRequest {
  const rows = a.length / 16;
  return {
    modelName: model,
    modelVersion: '',
    id,
    parameters: {},
    inputs: [
      { name: 'IN0', datatype: 'INT32', shape: [rows, 16], data: i32(a) },
      { name: 'IN1', datatype: 'INT32', shape: [rows, 16], data: i32(b) },
    ],
  };
}

const index = async (t: TestCore) =>
  Object.fromEntries((await t.core.repositoryIndex(false)).map((r) => [r.name, { state: r.state, reason: r.reason }]));

describe('an ensemble next to its composing model', () => {
  let t: TestCore;
  beforeAll(async () => {
    t = await startTestCore([SIMPLE_TEST_MODEL, ensemble(doubleSimple())]);
  });
  afterAll(() => t?.close());

  it('is ready, with platform ensemble in its metadata and its steps in its config', () => {
    expect(t.core.isModelReady('double_simple', '')).toBe(true);
    expect(t.core.modelMetadata('double_simple', '')).toStrictEqual({
      name: 'double_simple',
      versions: ['1'],
      platform: 'ensemble',
      inputs: [
        { name: 'IN0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'IN1', datatype: 'INT32', shape: [-1, 16] },
      ],
      outputs: [
        { name: 'OUT0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'OUT1', datatype: 'INT32', shape: [-1, 16] },
      ],
    });
    const config = t.core.modelConfig('double_simple', '');
    expect(config).toMatchObject({
      name: 'double_simple',
      platform: 'ensemble',
      backend: '',
      max_batch_size: 8,
      instance_group: [],
      model_transaction_policy: { decoupled: false },
    });
    expect((config.ensemble_scheduling as { step: unknown[] }).step[0]).toStrictEqual({
      model_name: 'simple',
      model_version: -1,
      input_map: { INPUT0: 'IN0', INPUT1: 'IN1' },
      output_map: { OUTPUT0: 'sum', OUTPUT1: 'diff' },
      model_namespace: '',
    });
  });

  it('runs both steps: OUT0 = 2·IN0, OUT1 = 2·IN1, with the ensemble as the answering model', async () => {
    const a = range(32, (i) => i);
    const b = range(32, (i) => 100 - i);
    const res = await t.core.infer(request('double_simple', a, b, 'req-7'));
    expect(res.modelName).toBe('double_simple');
    expect(res.modelVersion).toBe('1');
    expect(res.id).toBe('req-7');
    expect(res.outputs.map((o) => [o.name, o.datatype, o.shape])).toStrictEqual([
      ['OUT0', 'INT32', [2, 16]],
      ['OUT1', 'INT32', [2, 16]],
    ]);
    expect(fromI32(res.outputs[0]!.data)).toStrictEqual(a.map((x) => 2 * x));
    expect(fromI32(res.outputs[1]!.data)).toStrictEqual(b.map((x) => 2 * x));
  });

  it('returns only the outputs asked for', async () => {
    const req = { ...request('double_simple', range(16), range(16)), outputs: [{ name: 'OUT1' }] };
    const res = await t.core.infer(req);
    expect(res.outputs.map((o) => o.name)).toStrictEqual(['OUT1']);
  });

  it('checks the request against the ensemble config, in the ensemble name', async () => {
    const bad = request('double_simple', range(16), range(16));
    bad.inputs[0]!.shape = [1, 8];
    bad.inputs[0]!.data = i32(range(8));
    await expect(t.core.infer(bad)).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: expect.stringContaining("unexpected shape for input 'IN0' for model 'double_simple'. Expected [-1,16], got [1,8]."),
    });
  });

  it('counts statistics for the ensemble and for each request its steps made', async () => {
    const before = t.core.statistics('simple', '')[0]!;
    const ensBefore = t.core.statistics('double_simple', '')[0]!;
    await t.core.infer(request('double_simple', range(48), range(48)));
    const after = t.core.statistics('simple', '')[0]!;
    const ens = t.core.statistics('double_simple', '')[0]!;
    // Two steps: two requests to simple, of the ensemble request's batch size (3).
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(2);
    expect(after.inference_count - before.inference_count).toBe(6);
    expect(ens.inference_count - ensBefore.inference_count).toBe(3);
    expect(ens.execution_count - ensBefore.execution_count).toBe(1);
    expect(ens.inference_stats.success.count - ensBefore.inference_stats.success.count).toBe(1);
    expect(ens.inference_stats.queue.count - ensBefore.inference_stats.queue.count).toBe(1);
    // The ensemble's compute times are its steps' (the test backend reports 1, 2 and 3 µs per execution).
    const delta = (k: 'compute_input' | 'compute_infer' | 'compute_output') => ens.inference_stats[k].ns - ensBefore.inference_stats[k].ns;
    expect([delta('compute_input'), delta('compute_infer'), delta('compute_output')]).toStrictEqual([2000, 4000, 6000]);
    const batch3 = ens.batch_stats.find((b) => b.batch_size === 3)!;
    expect(batch3.compute_infer).toStrictEqual({ count: 1, ns: 4000 });
  });
});

describe('a step that fails', () => {
  let t: TestCore;
  beforeAll(async () => {
    // The ensemble takes any length; simple only 16: the step refuses other lengths.
    const spec = doubleSimple('loose');
    for (const x of [...spec.inputs, ...spec.outputs]) x.dims = [-1];
    t = await startTestCore([SIMPLE_TEST_MODEL, ensemble(spec)]);
  });
  afterAll(() => t?.close());

  it("fails the request with the step's error, after \"in ensemble '<name>', \"", async () => {
    const req = request('loose', range(16), range(16), 'r9');
    for (const i of req.inputs) {
      i.shape = [1, 4];
      i.data = i32(range(4));
    }
    const before = t.core.statistics('loose', '')[0]!.inference_stats.fail.count;
    await expect(t.core.infer(req)).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: expect.stringMatching(
        /^in ensemble 'loose', \[request id: r9\] unexpected shape for input 'INPUT0' for model 'simple'\. Expected \[-1,16\], got \[1,4\]\./,
      ),
    });
    expect(t.core.statistics('loose', '')[0]!.inference_stats.fail.count).toBe(before + 1);
    // The same request in the right shape goes through.
    const ok = await t.core.infer(request('loose', range(16), range(16)));
    expect(fromI32(ok.outputs[0]!.data)).toStrictEqual(range(16).map((x) => 2 * x));
  });
});

describe("composing models' dynamic batching", () => {
  let t: TestCore;
  beforeAll(async () => {
    const batched = identityTestModel('slow_identity', 'INT32', [4], 8, {
      extraConfig: 'dynamic_batching { max_queue_delay_microseconds: 50000 }',
      delayMs: 20,
    });
    const spec: EnsembleSpec = {
      name: 'wrap',
      maxBatchSize: 8,
      inputs: [{ name: 'IN', type: 'TYPE_INT32', dims: [4] }],
      outputs: [{ name: 'OUT', type: 'TYPE_INT32', dims: [4] }],
      steps: [{ model: 'slow_identity', inputs: { INPUT0: 'IN' }, outputs: { OUTPUT0: 'OUT' } }],
    };
    t = await startTestCore([batched, ensemble(spec)]);
  });
  afterAll(() => t?.close());

  it('merges concurrent ensemble requests into one execution of the composing model', async () => {
    const ran = executions.length;
    const results = await Promise.all(
      [0, 1, 2, 3].map((k) =>
        t.core.infer({
          modelName: 'wrap',
          modelVersion: '',
          id: '',
          parameters: {},
          inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 4], data: i32(range(4, (i) => i + 10 * k)) }],
        }),
      ),
    );
    for (const [k, r] of results.entries()) expect(fromI32(r.outputs[0]!.data)).toStrictEqual(range(4, (i) => i + 10 * k));
    const batches = executions.slice(ran).map(([, dims]) => dims[0]);
    expect(Math.max(...(batches as number[]))).toBeGreaterThan(1);
    const stats = t.core.statistics('slow_identity', '')[0]!;
    expect(stats.batch_stats.some((b) => b.batch_size > 1)).toBe(true);
  });
});

describe('an ensemble that cannot load', () => {
  let t: TestCore;
  beforeAll(async () => {
    const mbs16 = doubleSimple('too_big', 'simple', 16);
    const cycleA = doubleSimple('cycle_a', 'cycle_b');
    const cycleB = doubleSimple('cycle_b', 'cycle_a');
    t = await startTestCore(
      [
        SIMPLE_TEST_MODEL,
        simpleAs('broken_simple', (c) => c.replace('dims: [ 16 ] }, { name: "INPUT1"', 'dims: [ 8 ] }, { name: "INPUT1"')),
        ensemble(doubleSimple('lonely', 'nowhere')),
        ensemble(doubleSimple('on_broken', 'broken_simple')),
        ensemble(mbs16),
        ensemble(cycleA),
        ensemble(cycleB),
        ensemble(doubleSimple('outer', 'lonely')),
      ],
      { strictReadiness: false },
    );
  });
  afterAll(() => t?.close());

  it("is UNAVAILABLE with Triton's reason, and the models it does not need still serve", async () => {
    const rows = await index(t);
    expect(rows.simple).toStrictEqual({ state: 'READY', reason: '' });
    expect(rows.lonely).toStrictEqual({
      state: 'UNAVAILABLE',
      reason: 'ensemble lonely contains models that are not available or ambiguous: nowhere',
    });
    expect(rows.on_broken!.state).toBe('UNAVAILABLE');
    expect(rows.on_broken!.reason).toMatch(
      /^ensemble 'on_broken' depends on 'broken_simple' which has no loaded version\. Model 'broken_simple' loading failed with error: .*INPUT0/,
    );
    expect(rows.too_big).toStrictEqual({
      state: 'UNAVAILABLE',
      reason: 'ensemble too_big allows maximum batch size 16, but it contains model simple which only allows maximum batch size to be 8',
    });
    expect(rows.cycle_a).toStrictEqual({
      state: 'UNAVAILABLE',
      reason: 'circular dependency between ensembles: cycle_a -> ... -> cycle_b -> cycle_a',
    });
    expect(rows.cycle_b).toStrictEqual({
      state: 'UNAVAILABLE',
      reason: 'circular dependency between ensembles: cycle_b -> ... -> cycle_a -> cycle_b',
    });
    expect(rows.outer).toStrictEqual({
      state: 'UNAVAILABLE',
      reason:
        "ensemble 'outer' depends on 'lonely' which is not valid. Model 'lonely' failed with error: ensemble lonely contains models that are not available or ambiguous: nowhere",
    });
    await expect(t.core.infer(request('lonely', range(16), range(16)))).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

/** double_simple run twice: OUT0 = 4·IN0, OUT1 = 4·IN1. */
function doubleDouble(): EnsembleSpec {
  const spec = doubleSimple('double_double', 'double_simple');
  spec.steps = [
    { model: 'double_simple', inputs: { IN0: 'IN0', IN1: 'IN1' }, outputs: { OUT0: 'a', OUT1: 'b' } },
    { model: 'double_simple', inputs: { IN0: 'a', IN1: 'b' }, outputs: { OUT0: 'OUT0', OUT1: 'OUT1' } },
  ];
  return spec;
}

describe('explicit model control', () => {
  let t: TestCore;
  beforeAll(async () => {
    t = await startTestCore([SIMPLE_TEST_MODEL, ensemble(doubleSimple()), ensemble(doubleDouble())], {
      mode: 'explicit',
      strictReadiness: false,
    });
  });
  afterAll(() => t?.close());
  afterEach(async () => {
    for (const m of ['double_double', 'double_simple', 'simple']) await t.core.unloadModel(m).catch(() => undefined);
  });

  const ready = () =>
    ['simple', 'double_simple', 'double_double'].filter((m) => t.core.isModelReady(m, '')).sort((a, b) => a.localeCompare(b));

  it('loads the composing models with the ensemble, nested ensembles too', async () => {
    expect(ready()).toStrictEqual([]);
    await t.core.loadModel('double_double', {});
    expect(ready()).toStrictEqual(['double_double', 'double_simple', 'simple']);
    const res = await t.core.infer({
      ...request(
        'double_double',
        range(16),
        range(16, () => 1),
      ),
      inputs: [
        { name: 'IN0', datatype: 'INT32', shape: [1, 16], data: i32(range(16)) },
        { name: 'IN1', datatype: 'INT32', shape: [1, 16], data: i32(range(16, () => 1)) },
      ],
    });
    expect(fromI32(res.outputs[0]!.data)).toStrictEqual(range(16).map((x) => 4 * x));
  });

  it('keeps the composing models on a plain unload, and unloads those loaded only for it with unload_dependents', async () => {
    await t.core.loadModel('double_double', {});
    await t.core.unloadModel('double_double', {});
    expect(ready()).toStrictEqual(['double_simple', 'simple']);
    await t.core.loadModel('double_double', {});
    await t.core.unloadModel('double_double', { unload_dependents: true });
    expect(ready()).toStrictEqual([]);
  });

  it('keeps a composing model that was loaded by name, or that another ensemble uses', async () => {
    await t.core.loadModel('simple', {});
    await t.core.loadModel('double_simple', {});
    await t.core.unloadModel('double_simple', { unload_dependents: true });
    expect(ready()).toStrictEqual(['simple']);
    await t.core.loadModel('double_double', {});
    await t.core.unloadModel('double_double', { unload_dependents: true });
    expect(ready()).toStrictEqual(['simple']);
  });

  it('refuses an unload_dependents that is not a boolean', async () => {
    await expect(t.core.unloadModel('simple', { unload_dependents: 'yes' })).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: "invalid value type for 'unload_dependents' parameter, expected bool_param.",
    });
  });

  it('stops an ensemble when its composing model is unloaded, and serves it again when the model is back', async () => {
    await t.core.loadModel('double_double', {});
    await t.core.unloadModel('simple', {});
    expect(ready()).toStrictEqual([]);
    const rows = await index(t);
    expect(rows.double_simple).toStrictEqual({ state: 'UNAVAILABLE', reason: 'unloaded' });
    expect(rows.double_double).toStrictEqual({ state: 'UNAVAILABLE', reason: 'unloaded' });
    await t.core.loadModel('simple', {});
    expect(ready()).toStrictEqual(['double_double', 'double_simple', 'simple']);
  });

  it('fails the load of an ensemble whose composing model has no folder', async () => {
    rmSync(path.join(t.dir, 'simple'), { recursive: true, force: true });
    await expect(t.core.loadModel('double_simple', {})).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: expect.stringContaining('ensemble double_simple contains models that are not available or ambiguous: simple'),
    });
    expect((await index(t)).double_simple!.state).toBe('UNAVAILABLE');
  });
});

describe('a held ensemble', () => {
  let t: TestCore;
  beforeAll(async () => {
    // simple, then simple_b: OUT = 2·IN through two different models.
    const spec = doubleSimple('pair');
    spec.steps[1]!.model = 'simple_b';
    t = await startTestCore([SIMPLE_TEST_MODEL, simpleAs('simple_b'), ensemble(spec)], { mode: 'explicit', strictReadiness: false });
  });
  afterAll(() => t?.close());

  it('loads again when a composing model changes, but does not load a missing one itself', async () => {
    await t.core.loadModel('pair', {});
    expect(t.core.isModelReady('pair', '')).toBe(true);
    await t.core.unloadModel('simple', {});
    expect(t.core.isModelReady('pair', '')).toBe(false);
    // simple_b reloads: pair is tried again, and fails again for want of simple, which stays unloaded.
    await t.core.loadModel('simple_b', {});
    expect(t.core.isModelReady('simple', '')).toBe(false);
    const row = (await index(t)).pair!;
    expect(row).toStrictEqual({
      state: 'UNAVAILABLE',
      reason: 'ensemble pair contains models that are not available or ambiguous: simple',
    });
    await t.core.loadModel('simple', {});
    expect(t.core.isModelReady('pair', '')).toBe(true);
  });
});

describe('poll mode', () => {
  let dir: string;
  let repository: ModelRepository;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'serval-ensemble-poll-'));
    for (const m of [SIMPLE_TEST_MODEL, ensemble(doubleSimple())]) writeModel(dir, m);
    repository = new ModelRepository([dir], capturedLogger().log, {
      mode: 'poll',
      startupModels: [],
      autoComplete: true,
      backends: new BackendRegistry([testBackend]),
    });
    await repository.loadAll();
  });
  afterAll(async () => {
    await repository?.unloadAll();
    rmSync(dir, { recursive: true, force: true });
  });

  const state = (name: string) => repository.index().find((r) => r.name === name)!;

  it('stops the ensemble when its model folder goes, serves it again when the folder is back', async () => {
    expect(state('double_simple').state).toBe('READY');
    renameSync(path.join(dir, 'simple'), path.join(dir, '..', `${path.basename(dir)}-simple`));
    await repository.poll();
    expect(repository.isReady('double_simple', '')).toBe(false);
    renameSync(path.join(dir, '..', `${path.basename(dir)}-simple`), path.join(dir, 'simple'));
    await repository.poll();
    expect(repository.isReady('double_simple', '')).toBe(true);
  });

  it('stops the ensemble when its model changes into one it cannot use, with the reason in the log', async () => {
    writeModel(dir, { ...SIMPLE_TEST_MODEL, config: SIMPLE_TEST_MODEL.config.replace('max_batch_size: 8', 'max_batch_size: 4') });
    await repository.poll();
    expect(repository.isReady('simple', '')).toBe(true);
    expect(repository.isReady('double_simple', '')).toBe(false);
    writeModel(dir, SIMPLE_TEST_MODEL);
    await repository.poll();
    expect(repository.isReady('double_simple', '')).toBe(true);
  });
});

describe('max_inflight_requests', () => {
  let t: TestCore;
  beforeAll(async () => {
    const slow = identityTestModel('slow_pair', 'INT32', [4], 8, { extraConfig: 'instance_group [ { count: 2 } ]', delayMs: 40 });
    const spec = (name: string): EnsembleSpec => ({
      name,
      maxBatchSize: 8,
      inputs: [{ name: 'IN', type: 'TYPE_INT32', dims: [4] }],
      outputs: [{ name: 'OUT', type: 'TYPE_INT32', dims: [4] }],
      steps: [{ model: 'slow_pair', inputs: { INPUT0: 'IN' }, outputs: { OUTPUT0: 'OUT' } }],
    });
    const text = ensembleConfig(spec('limited')).replace('ensemble_scheduling {', 'ensemble_scheduling {\n  max_inflight_requests: 1');
    t = await startTestCore([slow, ensemble(spec('unlimited')), { name: 'limited', config: text, model: SIMPLE_TEST_MODEL.model }]);
  });
  afterAll(() => t?.close());

  /** The most requests the composing model held at once while `n` ensemble requests ran together. */
  async function peak(model: string, n: number): Promise<number> {
    let most = 0;
    const watch = setInterval(() => {
      const row = t.core.metricsSnapshot().find((r) => r.model === 'slow_pair');
      most = Math.max(most, row?.stats.pending ?? 0);
    }, 1);
    try {
      await Promise.all(
        range(n).map(() =>
          t.core.infer({
            modelName: model,
            modelVersion: '',
            id: '',
            parameters: {},
            inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 4], data: i32([1, 2, 3, 4]) }],
          }),
        ),
      );
    } finally {
      clearInterval(watch);
    }
    return most;
  }

  it("holds each step to that many requests in flight across the ensemble's requests", async () => {
    expect(await peak('unlimited', 4)).toBeGreaterThan(1);
    expect(await peak('limited', 4)).toBe(1);
  });
});
