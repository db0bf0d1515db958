// src/config/ensemble.ts and src/repository/dependencies.ts: an ensemble config's own checks, each
// step against its composing model, the batch / non-batch shape conversion between steps, and
// the dependency checks, each with Triton's words.
import { describe, expect, it } from 'vitest';
import { checkEnsembleSteps, type EnsemblePlan, planEnsemble, stepShape } from '../../src/config/ensemble.js';
import { parseModelConfigText } from '../../src/config/pbtxt.js';
import type { ResolvedModelConfig } from '../../src/config/resolved.js';
import type { ModelConfig } from '../../src/config/types.js';
import { checkDependencies, circularDependency, type DependencyState } from '../../src/repository/dependencies.js';
import { doubleSimple, type EnsembleSpec, ensembleConfig } from '../helpers/ensemble.js';
import { expectServalError } from '../helpers/errors.js';
import { resolveForTest } from '../helpers/resolve.js';
import { simpleConfig } from '../helpers/simple.js';

const parse = (spec: EnsembleSpec): ModelConfig => parseModelConfigText(ensembleConfig(spec));

function edited(edit: (spec: EnsembleSpec) => void): EnsembleSpec {
  const spec = doubleSimple('e');
  edit(spec);
  return spec;
}

const planError = (config: ModelConfig): string => expectServalError(() => planEnsemble(config, 'e'), 'INVALID_ARG').message;

describe('planEnsemble: the ensemble_scheduling section on its own', () => {
  it('reads the steps of a valid ensemble, versions and maps as written', () => {
    const spec = doubleSimple('e');
    spec.steps[1]!.version = 3;
    const plan = planEnsemble(parse(spec), 'e');
    expect(plan.steps).toStrictEqual([
      {
        index: 0,
        modelName: 'simple',
        modelVersion: -1,
        inputMap: [
          ['INPUT0', 'IN0'],
          ['INPUT1', 'IN1'],
        ],
        outputMap: [
          ['OUTPUT0', 'sum'],
          ['OUTPUT1', 'diff'],
        ],
      },
      {
        index: 1,
        modelName: 'simple',
        modelVersion: 3,
        inputMap: [
          ['INPUT0', 'sum'],
          ['INPUT1', 'diff'],
        ],
        outputMap: [
          ['OUTPUT0', 'OUT0'],
          ['OUTPUT1', 'OUT1'],
        ],
      },
    ]);
  });

  it.each<[string, (c: ModelConfig) => void, string]>([
    ['a backend', (c) => (c.backend = 'onnxruntime'), "Ensemble model 'e' must have platform type 'ensemble' and empty backend type"],
    [
      'no ensemble_scheduling',
      (c) => delete c.ensemble_scheduling,
      'ensemble scheduling must be set for ensemble e whose platform is ensemble',
    ],
    [
      'the section on another platform',
      (c) => (c.platform = 'onnxruntime_onnx'),
      "ensemble scheduling cannot be set for model 'e' whose platform is not ensemble",
    ],
    ['an instance group', (c) => (c.instance_group = [{ count: 1 }]), "instance group should not be specified for ensemble 'e'"],
    ['an optimization', (c) => (c.optimization = { graph: { level: 1 } }), "optimization should not be specified for ensemble 'e'"],
    ['warm-up samples', (c) => (c.model_warmup = [{ name: 'w' }]), "model_warmup can not be specified for ensemble 'e'"],
    ['no steps', (c) => (c.ensemble_scheduling!.step = []), "must specify 'step' for ensemble 'e'"],
    [
      'a step without a model',
      (c) => delete c.ensemble_scheduling!.step![1]!.model_name,
      "must specify 'model_name' in step 1 of ensemble 'e'",
    ],
    [
      'a step without inputs',
      (c) => (c.ensemble_scheduling!.step![0]!.input_map = {}),
      "must specify 'input_map' in step 0 of ensemble 'e'",
    ],
    [
      'a step without outputs',
      (c) => delete c.ensemble_scheduling!.step![1]!.output_map,
      "must specify 'output_map' in step 1 of ensemble 'e'",
    ],
  ])('refuses %s', (_what, edit, message) => {
    const config = parse(doubleSimple('e'));
    edit(config);
    expect(planError(config)).toBe(message);
  });

  it('refuses a tensor two steps write', () => {
    const config = parse(edited((s) => (s.steps[1]!.outputs = { OUTPUT0: 'OUT0', OUTPUT1: 'sum' })));
    expect(planError(config)).toBe("ensemble tensor 'sum' can appear in an output map only once for ensemble 'e' step 1");
  });

  it('refuses an ensemble input no step reads, and an output no step writes', () => {
    const extraInput = edited((s) => s.inputs.push({ name: 'EXTRA', type: 'TYPE_INT32', dims: [1] }));
    // Triton's message, its unbalanced quotes included.
    expect(planError(parse(extraInput))).toBe("ensemble input 'EXTRA' for ensemble e' is not used");
    const extraOutput = edited((s) => s.outputs.push({ name: 'NOWHERE', type: 'TYPE_INT32', dims: [1] }));
    expect(planError(parse(extraOutput))).toBe("ensemble output 'NOWHERE' for ensemble e' is not used");
  });

  it('refuses an output that depends on a tensor nothing writes, naming that tensor', () => {
    const config = parse(edited((s) => (s.steps[1]!.inputs = { INPUT0: 'sum', INPUT1: 'nobody' })));
    expect(planError(config)).toBe(
      "output 'OUT0' for ensemble 'e' is not written: at least one of its depending tensors, 'nobody', is not connected",
    );
  });

  it('refuses steps in a cycle: their tensors never become ready', () => {
    // step 0 reads what step 1 writes and the other way round; step 2 makes the outputs from them.
    const spec = edited((s) => {
      s.steps = [
        { model: 'simple', inputs: { INPUT0: 'IN0', INPUT1: 'b' }, outputs: { OUTPUT0: 'a', OUTPUT1: 'x' } },
        { model: 'simple', inputs: { INPUT0: 'a', INPUT1: 'IN1' }, outputs: { OUTPUT0: 'b', OUTPUT1: 'y' } },
        { model: 'simple', inputs: { INPUT0: 'x', INPUT1: 'y' }, outputs: { OUTPUT0: 'OUT0', OUTPUT1: 'OUT1' } },
      ];
    });
    expect(planError(parse(spec))).toMatch(
      /^output 'OUT0' for ensemble 'e' is not written: at least one of its depending tensors, '[abxy]', is not connected$/,
    );
  });

  it('refuses a tensor a step writes that nothing reads', () => {
    const config = parse(edited((s) => (s.steps[1]!.outputs = { OUTPUT0: 'OUT0', OUTPUT1: 'OUT1' })));
    config.output = config.output!.slice(0, 1);
    expect(planError(config)).toBe("ensemble tensor 'OUT1' is unused in ensemble 'e'");
  });
});

/** `simple` resolved as loaded, with max_batch_size `mbs` and optional edits. */
function simpleModel(mbs = 8, edit: (c: ModelConfig) => void = () => {}): ResolvedModelConfig {
  const c = simpleConfig(mbs);
  edit(c);
  return resolveForTest(c, { folderName: 'simple' });
}

function stepsError(spec: EnsembleSpec, model: ResolvedModelConfig = simpleModel()): string {
  const config = parse(spec);
  const plan: EnsemblePlan = planEnsemble(config, spec.name);
  const ensemble = resolveForTest({ ...config, platform: 'ensemble' }, { folderName: spec.name });
  return expectServalError(() => checkEnsembleSteps(ensemble, plan, () => model), 'INVALID_ARG').message;
}

function stepsPass(spec: EnsembleSpec, model: ResolvedModelConfig): void {
  const config = parse(spec);
  const ensemble = resolveForTest(config, { folderName: spec.name });
  checkEnsembleSteps(ensemble, planEnsemble(config, spec.name), () => model);
}

describe('checkEnsembleSteps: each step against its loaded model', () => {
  it('accepts the pipeline as it is', () => {
    stepsPass(doubleSimple('e'), simpleModel());
  });

  it('refuses a composing model that batches less than the ensemble', () => {
    expect(stepsError(doubleSimple('e'), simpleModel(4))).toBe(
      'ensemble e allows maximum batch size 8, but it contains model simple which only allows maximum batch size to be 4',
    );
  });

  it('refuses a map to an input the model does not have, and an input left unmapped', () => {
    const unknown = edited((s) => (s.steps[0]!.inputs = { INPUT0: 'IN0', INPUT1: 'IN1', INPUT9: 'IN1' }));
    expect(stepsError(unknown)).toBe('in ensemble e, ensemble tensor IN1 is mapping to non-existing input INPUT9 in model simple');
    const unmapped = edited((s) => {
      s.steps[0]!.inputs = { INPUT0: 'IN0' };
      s.steps.push({ model: 'simple', inputs: { INPUT0: 'IN1', INPUT1: 'IN1' }, outputs: { OUTPUT0: 'unused_a', OUTPUT1: 'unused_b' } });
    });
    // The planning check would call the extra tensors unused; this is about the step check.
    const config = parse(unmapped);
    const ensemble = resolveForTest({ ...config, platform: 'onnxruntime_onnx', ensemble_scheduling: undefined }, { folderName: 'e' });
    const plan: EnsemblePlan = {
      steps: config.ensemble_scheduling!.step!.map((s, index) => ({
        index,
        modelName: s.model_name!,
        modelVersion: -1,
        inputMap: Object.entries(s.input_map!),
        outputMap: Object.entries(s.output_map!),
      })),
    };
    expect(expectServalError(() => checkEnsembleSteps(ensemble, plan, () => simpleModel())).message).toBe(
      'in ensemble e, input INPUT1 in model simple is not mapped to any ensemble tensors',
    );
    // An optional input may stay unmapped.
    const optional = simpleModel(8, (c) => (c.input![1]!.optional = true));
    expect(() => checkEnsembleSteps(ensemble, plan, () => optional)).not.toThrow();
  });

  it('refuses a map from an output the model does not have', () => {
    const spec = edited((s) => (s.steps[1]!.outputs = { OUTPUT0: 'OUT0', OUTPUT7: 'OUT1' }));
    expect(stepsError(spec)).toBe('in ensemble e, ensemble tensor OUT1 is mapped from non-existing output OUTPUT7 in model simple');
  });

  it('refuses a tensor whose datatype differs between the ensemble and a step', () => {
    const spec = edited((s) => (s.inputs[0]!.type = 'TYPE_FP32'));
    expect(stepsError(spec)).toBe(
      'in ensemble e, ensemble tensor IN0: inconsistent data type: TYPE_FP32 is inferred from model e while TYPE_INT32 is inferred from model simple',
    );
  });

  it('refuses a tensor whose shape differs between two steps', () => {
    const spec = edited((s) => (s.outputs[1]!.dims = [8]));
    expect(stepsError(spec)).toBe(
      'in ensemble e, ensemble tensor OUT1: inconsistent shape: [-1,8] is inferred from model e while [-1,16] is inferred from model simple',
    );
  });

  it('lets a batching ensemble use a non-batching model whose shape has the batch dimension', () => {
    const flat = simpleModel(0, (c) => {
      for (const t of [...c.input!, ...c.output!]) t.dims = [-1, 16];
    });
    stepsPass(doubleSimple('e'), flat);
    const wrong = simpleModel(0, (c) => {
      for (const t of [...c.input!, ...c.output!]) t.dims = [2, 8];
    });
    expect(stepsError(doubleSimple('e'), wrong)).toMatch(
      /inconsistent shape: \[-1,16\] is inferred from model e while \[2,8\] is inferred from model simple/,
    );
  });
});

describe('stepShape: a tensor passed between batching and non-batching models', () => {
  it('adds a batch dimension of 1 for a batching model when the shape is its dims', () => {
    expect(stepShape([16], true, 0, [16])).toStrictEqual([1, 16]);
    expect(stepShape([16], true, 0, [3, 16])).toStrictEqual([3, 16]);
  });

  it('drops a batch-of-one dimension for a non-batching model whose dims do not have it', () => {
    expect(stepShape([16], false, 1, [1, 16])).toStrictEqual([16]);
    expect(stepShape([-1, 16], false, 1, [1, 16])).toStrictEqual([1, 16]);
    expect(stepShape([16], false, 2, [2, 16])).toStrictEqual([2, 16]);
  });

  it('leaves the shape alone when both sides batch, or neither does', () => {
    expect(stepShape([16], true, 4, [4, 16])).toStrictEqual([4, 16]);
    expect(stepShape([16], false, 0, [16])).toStrictEqual([16]);
  });
});

describe('dependencies of an ensemble', () => {
  const ens = (name: string, models: string[]): ModelConfig =>
    parse({
      ...doubleSimple(name),
      steps: models.map((m, i) => ({
        model: m,
        inputs: { INPUT0: 'IN0', INPUT1: 'IN1' },
        outputs: { OUTPUT0: `o${i}`, OUTPUT1: `p${i}` },
      })),
    });

  it('finds a cycle through the ensemble and words it as Triton', () => {
    const configs = new Map([
      ['a', ens('a', ['simple', 'b'])],
      ['b', ens('b', ['c'])],
      ['c', ens('c', ['a'])],
      ['simple', simpleConfig()],
    ]);
    expect(circularDependency('a', (n) => configs.get(n))).toBe('circular dependency between ensembles: a -> ... -> c -> a');
    expect(circularDependency('a', (n) => (n === 'c' ? ens('c', ['simple']) : configs.get(n)))).toBeUndefined();
    // A cycle that does not pass through the ensemble is its members' problem, not this one's.
    const other = new Map([
      ['d', ens('d', ['b'])],
      ['b', ens('b', ['c'])],
      ['c', ens('c', ['b'])],
    ]);
    expect(circularDependency('d', (n) => other.get(n))).toBeUndefined();
    expect(circularDependency('e', (n) => (n === 'e' ? ens('e', ['e']) : undefined))).toBe(
      'circular dependency between ensembles: e -> ... -> e -> e',
    );
  });

  const state = (name: string, over: Partial<DependencyState> = {}): DependencyState => ({
    name,
    config: simpleConfig(),
    ready: [1],
    reason: '',
    ...over,
  });

  it.each<[string, DependencyState[], string]>([
    [
      'models that are not there',
      [state('a', { config: undefined }), state('simple'), state('b', { config: undefined })],
      'ensemble e contains models that are not available or ambiguous: a, b',
    ],
    [
      'a model that failed to load',
      [state('simple', { ready: [], reason: 'bad file' })],
      "ensemble 'e' depends on 'simple' which has no loaded version. Model 'simple' loading failed with error: bad file",
    ],
    ['a model with no ready version', [state('simple', { ready: [] })], "ensemble 'e' depends on 'simple' which has no loaded version."],
    [
      'an ensemble that is not valid',
      [
        state('simple', {
          config: ens('inner', ['x']),
          ready: [],
          reason: 'ensemble inner contains models that are not available or ambiguous: x',
        }),
      ],
      "ensemble 'e' depends on 'simple' which is not valid. Model 'simple' failed with error: ensemble inner contains models that are not available or ambiguous: x",
    ],
    [
      'a version a step names that is not loaded',
      [state('simple', { ready: [2] })],
      "ensemble 'e' depends on 'simple' whose required version 3 is not loaded.",
    ],
  ])('refuses %s', (_what, states, message) => {
    const spec = doubleSimple('e');
    spec.steps[1]!.version = 3;
    expect(expectServalError(() => checkDependencies('e', parse(spec), states), 'INVALID_ARG').message).toBe(message);
  });

  it('accepts ready models with the versions the steps name', () => {
    const spec = doubleSimple('e');
    spec.steps[1]!.version = 2;
    expect(() => checkDependencies('e', parse(spec), [state('simple', { ready: [1, 2] })])).not.toThrow();
  });
});
