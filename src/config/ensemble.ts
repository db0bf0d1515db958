// Ensemble configs (platform "ensemble"): the steps of an ensemble_scheduling section and Triton's
// two sets of checks, in Triton's words: the section on its own, before anything loads
// (ValidateEnsembleSchedulingConfig: every field set, each tensor written once, data flows from
// the inputs to every output, no unused tensor, which also catches cycles between steps), and each
// step against its composing model's config once that model is loaded (ValidateEnsembleConfig:
// max_batch_size, every input mapped, no unknown input or output, one datatype and shape per
// ensemble tensor, no step fed by two different decoupled models; that walk also tells whether the
// ensemble is decoupled). Pure: no files, no models.
import { type DataType, fromConfigType, toConfigType } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import type { BackendFacts } from './resolve.js';
import type { ResolvedModelConfig } from './resolved.js';
import type { ModelSignature } from './signature.js';
import type { ModelConfig, ModelInput, ModelOutput } from './types.js';

export const ENSEMBLE_PLATFORM = 'ensemble';

/** One step: a composing model and how its tensors map to the ensemble's. */
export interface EnsembleStep {
  readonly index: number;
  readonly modelName: string;
  /** The model_version the step names; -1 is the latest ready version. */
  readonly modelVersion: number;
  /** [model input, ensemble tensor] pairs. */
  readonly inputMap: readonly (readonly [string, string])[];
  /** [model output, ensemble tensor] pairs. */
  readonly outputMap: readonly (readonly [string, string])[];
}

export interface EnsemblePlan {
  readonly steps: readonly EnsembleStep[];
}

/** What resolve.ts needs of "the backend" of an ensemble: it has none, so no instances. */
export const ENSEMBLE_FACTS: BackendFacts<undefined> = {
  name: '',
  platforms: [ENSEMBLE_PLATFORM],
  defaultModelFilename: '',
  placeInstances: () => ({ groups: [], placements: [], settings: undefined }),
};

/** A config the ensemble scheduler runs (Triton routes by the section as much as by the platform). */
export function isEnsembleConfig(config: ModelConfig): boolean {
  return config.platform === ENSEMBLE_PLATFORM || config.ensemble_scheduling !== undefined;
}

/** The models an ensemble's steps name, each once, in step order. */
export function composingModels(config: ModelConfig): string[] {
  return [...new Set((config.ensemble_scheduling?.step ?? []).map((s) => s.model_name ?? '').filter((n) => n !== ''))];
}

/**
 * An ensemble has no model file: the "signature" resolve.ts checks the config against is the
 * config's own tensors, with no shapes to compare.
 */
export function ensembleSignature(config: ModelConfig): ModelSignature {
  const io = (t: ModelInput | ModelOutput) => {
    const rawType = t.data_type ?? 'TYPE_INVALID';
    return { name: t.name ?? '', datatype: fromConfigType(rawType), rawType, dims: undefined };
  };
  return { inputs: (config.input ?? []).map(io), outputs: (config.output ?? []).map(io) };
}

const invalid = (msg: string): ServalError => ServalError.invalidArg(msg);

interface FlowNode {
  readonly name: string;
  written: boolean;
  ready: boolean;
  readonly prev: FlowNode[];
  readonly next: FlowNode[];
}

/**
 * The ensemble_scheduling section checked on its own, as Triton checks it when it reads the
 * config, then its steps. `name` is the ensemble's name.
 */
export function planEnsemble(config: ModelConfig, name: string): EnsemblePlan {
  const platform = config.platform ?? '';
  if (platform === ENSEMBLE_PLATFORM && config.backend) {
    throw invalid(`Ensemble model '${name}' must have platform type '${platform}' and empty backend type`);
  }
  const section = config.ensemble_scheduling;
  if (!section) throw invalid(`ensemble scheduling must be set for ensemble ${name} whose platform is ${ENSEMBLE_PLATFORM}`);
  if (platform !== ENSEMBLE_PLATFORM) {
    throw invalid(`ensemble scheduling cannot be set for model '${name}' whose platform is not ${ENSEMBLE_PLATFORM}`);
  }
  if (config.instance_group?.length) throw invalid(`instance group should not be specified for ensemble '${name}'`);
  if (config.optimization) throw invalid(`optimization should not be specified for ensemble '${name}'`);
  if (config.model_warmup?.length) throw invalid(`model_warmup can not be specified for ensemble '${name}'`);
  const raw = section.step ?? [];
  if (raw.length === 0) throw invalid(`must specify 'step' for ensemble '${name}'`);

  // The data-flow graph: a node per ensemble tensor, edges from a step's inputs to its outputs.
  const nodes = new Map<string, FlowNode>();
  const node = (t: string): FlowNode => {
    let n = nodes.get(t);
    if (!n) {
      n = { name: t, written: false, ready: false, prev: [], next: [] };
      nodes.set(t, n);
    }
    return n;
  };
  const steps = raw.map((s, index): EnsembleStep => {
    const model = s.model_name ?? '';
    if (!model) throw invalid(`must specify 'model_name' in step ${index} of ensemble '${name}'`);
    const inputMap = Object.entries(s.input_map ?? {});
    const outputMap = Object.entries(s.output_map ?? {});
    if (inputMap.length === 0) throw invalid(`must specify 'input_map' in step ${index} of ensemble '${name}'`);
    if (outputMap.length === 0) throw invalid(`must specify 'output_map' in step ${index} of ensemble '${name}'`);
    const written = outputMap.map(([, t]) => {
      const n = node(t);
      if (n.written) throw invalid(`ensemble tensor '${t}' can appear in an output map only once for ensemble '${name}' step ${index}`);
      n.written = true;
      return n;
    });
    for (const [, t] of inputMap) {
      const from = node(t);
      for (const to of written) {
        to.prev.push(from);
        from.next.push(to);
      }
    }
    return { index, modelName: model, modelVersion: Number(s.model_version ?? 0), inputMap, outputMap };
  });

  const ready: FlowNode[] = [];
  for (const input of config.input ?? []) {
    const n = nodes.get(input.name ?? '');
    // Triton's message, quotes as they are.
    if (!n) throw invalid(`ensemble input '${input.name}' for ensemble ${name}' is not used`);
    n.ready = true;
    ready.push(n);
  }
  for (let i = 0; i < ready.length; i++) {
    for (const next of ready[i]!.next) {
      if (next.ready || !next.prev.every((p) => p.ready)) continue;
      next.ready = true;
      ready.push(next);
    }
  }
  const outputs = new Set<string>();
  for (const output of config.output ?? []) {
    const n = nodes.get(output.name ?? '');
    if (!n) throw invalid(`ensemble output '${output.name}' for ensemble ${name}' is not used`);
    if (!n.ready) {
      const source = notConnected(n);
      throw invalid(
        `output '${output.name}' for ensemble '${name}' is not written` +
          (source !== n ? `: at least one of its depending tensors, '${source.name}', is not connected` : ''),
      );
    }
    outputs.add(n.name);
  }
  for (const n of nodes.values()) {
    if (outputs.has(n.name)) continue;
    if (!n.ready || n.next.length === 0) throw invalid(`ensemble tensor '${n.name}' is unused in ensemble '${name}'`);
  }
  return { steps };
}

/** The furthest tensor upstream of `start` that never became ready (cycles stop the walk). */
function notConnected(start: FlowNode): FlowNode {
  let last = start;
  const seen = new Set<string>();
  let prev: FlowNode[] | undefined = start.prev;
  while (prev?.length) {
    const nodes: FlowNode[] = prev;
    prev = undefined;
    for (const n of nodes) {
      if (!n.ready && !seen.has(n.name)) {
        seen.add(n.name);
        last = n;
        prev = n.prev;
        break;
      }
    }
  }
  return last;
}

/** A tensor's datatype and shape as one model (or the ensemble) sees it. */
interface TensorFacts {
  readonly model: string;
  readonly type: string;
  readonly dims: readonly number[];
  /** dims with the batch dimension first when the model batches. */
  readonly full: readonly number[];
}

const sameDims = (a: readonly number[], b: readonly number[]): boolean =>
  a.length === b.length && a.every((d, i) => d === -1 || b[i] === -1 || d === b[i]);
const dimsText = (d: readonly number[]): string => `[${d.join(',')}]`;

/**
 * Each step of a planned ensemble against its composing model's resolved config (`composing`
 * gives it; the caller has made sure the model is loaded), as Triton checks once the composing
 * models are loaded: max_batch_size, the input and output maps, and that every ensemble tensor has
 * one datatype and a compatible shape wherever it is produced or used. A batching and a
 * non-batching model may share a tensor when their shapes agree with the batch dimension counted.
 * Returns whether the ensemble is decoupled: Triton sets its model_transaction_policy from its
 * steps (any decoupled step makes it so), whatever its own config says.
 */
export function checkEnsembleSteps(
  ensemble: ResolvedModelConfig,
  plan: EnsemblePlan,
  composing: (step: EnsembleStep) => ResolvedModelConfig,
): boolean {
  const name = ensemble.name;
  const facts = (model: string, batching: boolean, datatype: DataType, dims: readonly number[]): TensorFacts => ({
    model,
    type: toConfigType(datatype),
    dims,
    full: batching ? [-1, ...dims] : dims,
  });
  const tensors = new Map<string, TensorFacts>();
  const batching = ensemble.maxBatchSize > 0;
  for (const t of ensemble.inputs) tensors.set(t.name, facts(name, batching, t.datatype, t.modelDims));
  for (const t of ensemble.outputs) if (!tensors.has(t.name)) tensors.set(t.name, facts(name, batching, t.datatype, t.modelDims));
  const agree = (tensor: string, seen: TensorFacts): void => {
    const known = tensors.get(tensor);
    if (!known) {
      tensors.set(tensor, seen);
      return;
    }
    const prefix = `in ensemble ${name}, ensemble tensor ${tensor}: `;
    if (known.type !== seen.type) {
      throw invalid(
        `${prefix}inconsistent data type: ${known.type} is inferred from model ${known.model} while ${seen.type} is inferred from model ${seen.model}`,
      );
    }
    if (!sameDims(known.dims, seen.dims) && !sameDims(known.full, seen.full)) {
      throw invalid(
        `${prefix}inconsistent shape: ${dimsText(known.full)} is inferred from model ${known.model} while ${dimsText(seen.full)} is inferred from model ${seen.model}`,
      );
    }
  };

  const decoupledSteps: boolean[] = [];
  for (const step of plan.steps) {
    const model = composing(step);
    const m = step.modelName;
    decoupledSteps.push(model.decoupled);
    if (model.maxBatchSize !== 0 && model.maxBatchSize < ensemble.maxBatchSize) {
      throw invalid(
        `ensemble ${name} allows maximum batch size ${ensemble.maxBatchSize}, but it contains model ${m} which only allows maximum batch size to be ${model.maxBatchSize}`,
      );
    }
    const stepBatching = model.maxBatchSize > 0;
    for (const [input, tensor] of step.inputMap) {
      if (!model.inputByName.has(input)) {
        throw invalid(`in ensemble ${name}, ensemble tensor ${tensor} is mapping to non-existing input ${input} in model ${m}`);
      }
    }
    for (const input of model.inputs) {
      const mapped = step.inputMap.find(([i]) => i === input.name);
      if (!mapped) {
        if (input.optional) continue;
        throw invalid(`in ensemble ${name}, input ${input.name} in model ${m} is not mapped to any ensemble tensors`);
      }
      agree(mapped[1], facts(m, stepBatching, input.datatype, input.dims));
    }
    for (const [output, tensor] of step.outputMap) {
      const out = model.outputByName.get(output);
      if (!out) throw invalid(`in ensemble ${name}, ensemble tensor ${tensor} is mapped from non-existing output ${output} in model ${m}`);
      agree(tensor, facts(m, stepBatching, out.datatype, out.dims));
    }
  }
  const owner = (tensor: string): string => tensors.get(tensor)?.model ?? name;
  return decoupledFlow(ensemble, plan, decoupledSteps, owner);
}

interface LabelNode {
  /** The model the tensor's facts were first taken from (Triton names it in the error). */
  readonly model: string;
  /** Set for a step's output: the step, whose outputs share one label. */
  step: number | undefined;
  decoupled: boolean;
  label: number;
  visited: boolean;
  readonly prev: LabelNode[];
  readonly next: LabelNode[];
}

/**
 * Triton's decoupled walk (ValidateEnsembleConfig): from the inputs (label 0) along the data flow,
 * each decoupled step's outputs get a new label and any other tensor its inputs' label, which
 * must be one: a step, or the ensemble's outputs together (a sink node named after the ensemble),
 * fed from two different decoupled models is refused, since their responses cannot be paired.
 * True when any label was handed out.
 */
function decoupledFlow(
  ensemble: ResolvedModelConfig,
  plan: EnsemblePlan,
  decoupledSteps: readonly boolean[],
  owner: (tensor: string) => string,
): boolean {
  const name = ensemble.name;
  const nodes = new Map<string, LabelNode>();
  const node = (tensor: string): LabelNode => {
    let n = nodes.get(tensor);
    if (!n) {
      n = { model: owner(tensor), step: undefined, decoupled: false, label: 0, visited: false, prev: [], next: [] };
      nodes.set(tensor, n);
    }
    return n;
  };
  // Triton's order: ensemble inputs, ensemble outputs (each linked to the sink first), then the steps.
  for (const t of ensemble.inputs) node(t.name);
  const sink: LabelNode = { model: name, step: undefined, decoupled: false, label: 0, visited: false, prev: [], next: [] };
  for (const t of ensemble.outputs) {
    const n = node(t.name);
    sink.prev.push(n);
    n.next.push(sink);
  }
  for (const step of plan.steps) {
    for (const [, tensor] of step.outputMap) {
      // A tensor first met as an ensemble output is still this step's output.
      const n = node(tensor);
      n.step = step.index;
      n.decoupled = decoupledSteps[step.index]!;
      for (const [, input] of step.inputMap) {
        const p = node(input);
        n.prev.push(p);
        p.next.push(n);
      }
    }
  }
  const stepLabels = new Map<number, number>();
  let labels = 0;
  const queue: LabelNode[] = [];
  for (const t of ensemble.inputs) {
    const n = nodes.get(t.name)!;
    n.visited = true;
    queue.push(n);
  }
  for (let i = 0; i < queue.length; i++) {
    for (const next of queue[i]!.next) {
      if (next.visited || !next.prev.every((p) => p.visited)) continue;
      const label = next.prev[0]?.label ?? 0;
      if (next.prev.some((p) => p.label !== label)) {
        throw invalid(`in ensemble ${name}, step of model '${next.model}' receives inputs originated from different decoupled models`);
      }
      if (next.step === undefined) next.label = label;
      else {
        let shared = stepLabels.get(next.step);
        if (shared === undefined) {
          shared = next.decoupled ? ++labels : label;
          stepLabels.set(next.step, shared);
        }
        next.label = shared;
      }
      next.visited = true;
      queue.push(next);
    }
  }
  return labels !== 0;
}

/**
 * Triton's batch / non-batch conversion of a tensor passed between models: a tensor from a
 * non-batching model going to a batching one gains a batch dimension of 1 when its shape is the
 * model's dims; a batch-of-one tensor going to a non-batching model loses its batch dimension when
 * its full shape is not what the model takes. Otherwise the shape is left as it is.
 */
export function stepShape(configDims: readonly number[], batching: boolean, tensorBatch: number, shape: readonly number[]): number[] {
  if (batching !== (tensorBatch !== 0)) {
    if (batching) {
      if (sameDims(configDims, shape)) return [1, ...shape];
    } else if (!sameDims(configDims, shape) && tensorBatch === 1) {
      return shape.slice(1);
    }
  }
  return [...shape];
}
