// An ensemble version (platform "ensemble"): no model file, no backend, no instances. A request
// runs the steps as a graph, as Triton's ensemble scheduler does: a step starts as soon as the
// tensors it reads are there (independent steps run at once), each step is an inference request to
// its composing model through that model's own scheduler (so its dynamic batching applies), and
// tensors pass from step to step as the same byte views, never copied here. Steps no requested
// output depends on are not run. The first step error fails the request once the steps in flight
// have finished, with the step's error text after "in ensemble '<name>', ".
//
// An ensemble with a decoupled step is decoupled itself (Triton completes its config so) and runs
// through stream() (streamEnsembleGraph): each response of a step feeds the steps after it once
// more, each time the wanted outputs are complete a response goes out, and the last one (or the
// final flag alone) comes once no step request is left running.

import type { ResponseCache } from '../cache/response_cache.js';
import {
  checkEnsembleSteps,
  ENSEMBLE_FACTS,
  type EnsemblePlan,
  type EnsembleStep,
  ensembleSignature,
  planEnsemble,
  stepShape,
} from '../config/ensemble.js';
import { resolveConfig } from '../config/resolve.js';
import type { ResolvedModelConfig } from '../config/resolved.js';
import type { ModelConfig } from '../config/types.js';
import { Cancellation } from '../kernel/cancel.js';
import { InFlight } from '../kernel/churn.js';
import type { DataType } from '../kernel/datatypes.js';
import { asServalError, ServalError } from '../kernel/errors.js';
import { keepMemory } from '../kernel/memory.js';
import { answerOnce } from '../kernel/sink.js';
import type { InferInputTensor, InferOutputTensor, InferRequest, InferResponse, Params, ResponseSink } from '../kernel/types.js';
import type { SequenceFlags } from '../scheduler/sequence_batcher.js';
import { ModelStats, type RequestTiming } from '../stats/model_stats.js';
import { throughCache } from './cache_path.js';
import { runStep, streamStep, traceTensors } from './ensemble_trace.js';
import type { LoadedVersion, VersionLookup } from './loaded_version.js';
import { readLabels } from './model_version.js';
import { classify, clientShape } from './outputs.js';
import { sequenceParameters } from './sequence_params.js';
import { classCounts, type ValidatedRequest, validateRequest } from './validate.js';

const now = (): bigint => process.hrtime.bigint();

/** An ensemble tensor: a request input or a step output, with the batch size it was made with. */
export interface EnsembleTensor {
  datatype: DataType;
  /** Full shape, batch dimension first when batchSize > 0. */
  shape: number[];
  data: Uint8Array;
  /** 0 when the model that made it (or the ensemble request) does not batch. */
  batchSize: number;
  /**
   * The sequence fields of the step request that made it, where they differ from the ensemble
   * request's: a step response that sets sequence_id / sequence_start / sequence_end (Triton's
   * parameter override) passes them to the steps that read its tensors and to the response.
   */
  sequence?: SequenceFlags;
}

/** A step response's own sequence fields, when it sets any (each absent one: the step's id, false). */
function overriddenSequence(res: InferResponse, step: SequenceFlags | undefined): SequenceFlags | undefined {
  const p = res.parameters;
  if (!p || (p.sequence_id === undefined && p.sequence_start === undefined && p.sequence_end === undefined)) return undefined;
  const raw = p.sequence_id;
  const id =
    typeof raw === 'string' || typeof raw === 'bigint'
      ? raw
      : typeof raw === 'number' && Number.isSafeInteger(raw)
        ? BigInt(raw)
        : (step?.id ?? 0n);
  return { id, start: p.sequence_start === true, end: p.sequence_end === true };
}

/**
 * The sequence fields an ensemble response carries, as Triton's do once an output came from a
 * step: the request's own (or a step's override), an integer ID as Triton's int64 parameter.
 * Undefined when no wanted output is there.
 */
export function responseSequence(
  tensors: ReadonlyMap<string, EnsembleTensor | null>,
  wanted: readonly string[],
  own: SequenceFlags | undefined,
): Params | undefined {
  let any = false;
  let seq = own;
  for (const name of wanted) {
    const t = tensors.get(name);
    if (!t) continue;
    if (!any && t.sequence) seq = t.sequence;
    any = true;
  }
  if (!any) return undefined;
  const id = seq?.id ?? 0n;
  return {
    sequence_id: typeof id === 'string' ? id : BigInt.asIntN(64, id),
    sequence_start: seq?.start ?? false,
    sequence_end: seq?.end ?? false,
  };
}

/** The version a step names: model_version -1 is the latest ready version. */
export function stepVersion(step: EnsembleStep): string {
  return step.modelVersion < 0 ? '' : String(step.modelVersion);
}

export interface GraphRun {
  requestId: string;
  parameters: Params;
  steps: readonly EnsembleStep[];
  /** The composing model's config for each step (its inputs' dims, whether it batches). */
  models: readonly ResolvedModelConfig[];
  /** The request's tensors by ensemble tensor name; null is an optional input it left out. */
  inputs: ReadonlyMap<string, EnsembleTensor | null>;
  /** The ensemble outputs asked for. */
  wanted: readonly string[];
  /** Runs step `index` as a request to its model. */
  call(index: number, req: InferRequest): Promise<InferResponse>;
  cancellation?: Cancellation;
  /** The ensemble request's sequence fields, if any. */
  sequence?: SequenceFlags;
}

/** The steps an output in `wanted` depends on: the rest are not run (Triton prunes them too). */
function neededSteps(steps: readonly EnsembleStep[], wanted: readonly string[]): Set<number> {
  const producer = new Map<string, number>();
  for (const s of steps) for (const [, t] of s.outputMap) producer.set(t, s.index);
  const needed = new Set<number>();
  const todo = [...wanted];
  for (let t = todo.pop(); t !== undefined; t = todo.pop()) {
    const i = producer.get(t);
    if (i === undefined || needed.has(i)) continue;
    needed.add(i);
    for (const [, input] of steps[i]!.inputMap) todo.push(input);
  }
  return needed;
}

/**
 * Step `index`'s request to its model, with the ensemble tensors `tensor` gives (null or absent:
 * an optional input the request left out, so left out here too) in the shapes its model takes,
 * and a cancellation of its own (already cancelled when the ensemble request is). Its outputs are
 * of its batch size, as Triton records it when the step starts.
 */
function stepRequest(
  g: Pick<GraphRun, 'steps' | 'models' | 'requestId' | 'parameters' | 'cancellation'>,
  index: number,
  tensor: (name: string) => EnsembleTensor | null | undefined,
): { req: InferRequest; cancellation: Cancellation; batchSize: number; sequence?: SequenceFlags } {
  const step = g.steps[index]!;
  const model = g.models[index]!;
  const batching = model.maxBatchSize > 0;
  const inputs: InferInputTensor[] = [];
  // The first input made under a step's overridden sequence fields gives them to this step (Triton
  // keeps the first when inputs disagree).
  let sequence: SequenceFlags | undefined;
  for (const [name, ensembleName] of step.inputMap) {
    const t = tensor(ensembleName);
    if (!t) continue;
    sequence ??= t.sequence;
    const dims = model.inputByName.get(name)?.dims ?? [];
    inputs.push({ name, datatype: t.datatype, shape: stepShape(dims, batching, t.batchSize, t.shape), data: t.data });
  }
  const cancellation = new Cancellation();
  if (g.cancellation?.cancelled) cancellation.cancel();
  const req: InferRequest = {
    modelName: step.modelName,
    modelVersion: stepVersion(step),
    id: g.requestId,
    inputs,
    outputs: step.outputMap.map(([name]) => ({ name })),
    parameters: sequence
      ? { ...g.parameters, sequence_id: sequence.id, sequence_start: sequence.start, sequence_end: sequence.end }
      : g.parameters,
    cancellation,
  };
  return { req, cancellation, batchSize: batching ? (inputs[0]?.shape[0] ?? 0) : 0, ...(sequence && { sequence }) };
}

/**
 * Runs an ensemble's steps for one request and resolves with every ensemble tensor (null where a
 * step left an output out). Rejects with the first step's error, bare (the caller names the
 * ensemble), once no step is in flight.
 */
export function runEnsembleGraph(g: GraphRun): Promise<Map<string, EnsembleTensor | null>> {
  return new Promise((resolve, reject) => {
    const tensors = new Map(g.inputs);
    const needed = neededSteps(g.steps, g.wanted);
    const started = new Set<number>();
    const inflight = new Set<Cancellation>();
    let failure: ServalError | undefined;
    let finished = false;
    // A cancelled ensemble request cancels the steps in flight and every step started after.
    g.cancellation?.onCancel(() => {
      for (const c of inflight) c.cancel();
    });
    const finish = (err?: ServalError): void => {
      finished = true;
      g.cancellation?.onCancel(undefined);
      if (err) reject(err);
      else resolve(tensors);
    };
    const settle = (): void => {
      if (finished) return;
      if (failure) {
        if (inflight.size === 0) finish(failure);
        return;
      }
      if (g.wanted.every((t) => tensors.has(t))) finish();
      else if (inflight.size === 0) {
        finish(
          ServalError.invalidArg(
            `[request id: ${g.requestId || '<id_unknown>'}] unexpected deadlock, at least one output is not set while no more ensemble steps can be made`,
          ),
        );
      }
    };
    const launch = (i: number): void => {
      started.add(i);
      const { req, cancellation, batchSize, sequence } = stepRequest(g, i, (t) => tensors.get(t));
      inflight.add(cancellation);
      let call: Promise<InferResponse>;
      try {
        call = g.call(i, req);
      } catch (e) {
        call = Promise.reject(e);
      }
      call.then(
        (res) => {
          inflight.delete(cancellation);
          if (!failure && !finished) {
            const seq = overriddenSequence(res, sequence ?? g.sequence) ?? sequence;
            for (const [output, tensor] of g.steps[i]!.outputMap) {
              const out = res.outputs.find((o) => o.name === output);
              // Later steps and the ensemble's response share it: no sender may free it.
              if (out) keepMemory(out.data.buffer);
              tensors.set(
                tensor,
                out ? { datatype: out.datatype, shape: out.shape, data: out.data, batchSize, ...(seq && { sequence: seq }) } : null,
              );
            }
            advance();
          }
          settle();
        },
        (e: unknown) => {
          inflight.delete(cancellation);
          failure ??= asServalError(e);
          settle();
        },
      );
    };
    const advance = (): void => {
      for (const { index, inputMap } of g.steps) {
        if (!needed.has(index) || started.has(index) || failure) continue;
        if (inputMap.every(([, t]) => tensors.has(t))) launch(index);
      }
    };
    advance();
    settle();
  });
}

/** A decoupled ensemble's run: GraphRun's request, each step's responses to a sink, and the ensemble's to these. */
export interface StreamGraphRun extends Omit<GraphRun, 'call'> {
  /** Runs step `index` as a request to its model: its responses (any number, the last final) to `sink`. */
  call(index: number, req: InferRequest, sink: ResponseSink): void;
  /** The wanted outputs of one wave (null where a step left one out); `final` when nothing more can come. */
  response(outputs: ReadonlyMap<string, EnsembleTensor | null>, final: boolean): void;
  /** Nothing more can come and the last response went without the final flag (or there was none). */
  final(): void;
  /** The first step error, bare (the caller names the ensemble), once no step request is running. */
  error(e: ServalError): void;
}

/** One response's tensor of an ensemble tensor, and how many readers have still to take it. */
interface Slot {
  tensor: EnsembleTensor | null;
  refs: number;
}

/** An ensemble tensor's tensors by iteration: Triton counts each tensor's arrivals on their own. */
interface TensorSlots {
  next: number;
  /** The needed steps that read it, plus one when it is a wanted output. */
  readonly refs: number;
  readonly slots: Map<number, Slot>;
}

type Updated = [tensor: string, iteration: number];

/** A step request of a decoupled ensemble, ready to start. */
interface Started {
  index: number;
  req: InferRequest;
  cancellation: Cancellation;
  batchSize: number;
  sequence?: SequenceFlags;
}

const byTensorThenIteration = (a: Updated, b: Updated): number => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]);

/**
 * Runs a decoupled ensemble's steps for one request, as Triton's ensemble scheduler does. Every
 * response a step sends adds one tensor to each ensemble tensor it maps (a left-out output adds an
 * empty one, to keep the counts paired), numbered by that tensor's own count; a step whose inputs
 * all have a tensor of the same number starts with them, so each response of a decoupled step feeds
 * the steps after it once. When the wanted outputs all have a tensor of the number just made, they
 * go out as one response. A step request is running until its final response: once none is, the
 * last response carries the final flag, or the flag goes alone (zero responses is no error for a
 * decoupled ensemble). The first error is reported once no step request is running, and no step
 * starts after it. A cancelled request cancels the step requests running and every later one.
 */
export function streamEnsembleGraph(g: StreamGraphRun): void {
  const needed = neededSteps(g.steps, g.wanted);
  const wanted = new Set(g.wanted);
  const readers = new Map<string, number[]>();
  for (const { index, inputMap } of g.steps) {
    if (!needed.has(index)) continue;
    for (const t of new Set(inputMap.map(([, t]) => t))) {
      const list = readers.get(t);
      if (list) list.push(index);
      else readers.set(t, [index]);
    }
  }
  const data = new Map<string, TensorSlots>();
  const slotsOf = (t: string): TensorSlots => {
    let d = data.get(t);
    if (!d) {
      d = { next: 0, refs: (readers.get(t)?.length ?? 0) + (wanted.has(t) ? 1 : 0), slots: new Map() };
      data.set(t, d);
    }
    return d;
  };
  const add = (t: string, tensor: EnsembleTensor | null): Updated => {
    const d = slotsOf(t);
    const iteration = d.next++;
    // A tensor nothing reads (its readers were pruned) is counted but not kept.
    if (d.refs > 0) d.slots.set(iteration, { tensor, refs: d.refs });
    return [t, iteration];
  };
  const take = (t: string, iteration: number): EnsembleTensor | null => {
    const d = data.get(t)!;
    const slot = d.slots.get(iteration)!;
    if (--slot.refs === 0) d.slots.delete(iteration);
    return slot.tensor;
  };
  const has = (t: string, iteration: number): boolean => data.get(t)?.slots.has(iteration) ?? false;

  const inflight = new Set<Cancellation>();
  let running = 0;
  let failure: ServalError | undefined;
  let finished = false;
  g.cancellation?.onCancel(() => {
    for (const c of inflight) c.cancel();
  });
  const end = (): void => {
    finished = true;
    g.cancellation?.onCancel(undefined);
  };

  /** The steps the updated tensors make ready, each with its iteration's inputs taken. */
  const prepare = (updated: readonly Updated[]): Started[] => {
    const ready: [index: number, iteration: number][] = [];
    const seen = new Set<string>();
    for (const [t, iteration] of updated) {
      for (const index of readers.get(t) ?? []) {
        const key = `${index}:${iteration}`;
        if (seen.has(key) || !g.steps[index]!.inputMap.every(([, input]) => has(input, iteration))) continue;
        seen.add(key);
        ready.push([index, iteration]);
      }
    }
    // Triton starts them in step order, then iteration order.
    ready.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    return ready.map(([index, iteration]) => {
      const taken = new Map<string, EnsembleTensor | null>();
      for (const [, t] of g.steps[index]!.inputMap) if (!taken.has(t)) taken.set(t, take(t, iteration));
      return { index, ...stepRequest(g, index, (t) => taken.get(t)) };
    });
  };

  /** The wave the updated tensors complete, if any: the last updated wanted output decides, as in Triton. */
  const wave = (updated: readonly Updated[]): Map<string, EnsembleTensor | null> | undefined => {
    let ready = false;
    let iteration = 0;
    for (const [t, it] of updated) {
      if (!wanted.has(t)) continue;
      iteration = it;
      ready = g.wanted.every((w) => has(w, it));
    }
    if (!ready) return undefined;
    return new Map(g.wanted.map((w) => [w, take(w, iteration)]));
  };

  /** After each step response: what it made ready, the response it completes, the end. */
  const proceed = (updated: Updated[]): void => {
    updated.sort(byTensorThenIteration);
    let next = failure ? [] : prepare(updated);
    const outputs = failure ? undefined : wave(updated);
    // Counted before any starts: a step answering at once must not end the request early.
    running += next.length;
    for (const s of next) inflight.add(s.cancellation);
    if (!failure) {
      const final = running === 0;
      try {
        if (outputs) g.response(outputs, final);
        else if (final) g.final();
        if (final) end();
      } catch (e) {
        // A response that cannot be made fails the request, as a step error does: the steps
        // just made ready do not start.
        failure = asServalError(e);
        running -= next.length;
        for (const s of next) inflight.delete(s.cancellation);
        next = [];
      }
    }
    if (failure) {
      if (running === 0 && !finished) {
        end();
        g.error(failure);
      }
      return;
    }
    for (const s of next) launch(s);
  };

  const stepDone = (s: Started, final: boolean, res: InferResponse | undefined, err?: ServalError): void => {
    if (finished) return;
    if (final) {
      running -= 1;
      inflight.delete(s.cancellation);
    }
    const updated: Updated[] = [];
    if (err) failure ??= err;
    else if (res && !failure) {
      const batchSize = s.batchSize;
      const seq = overriddenSequence(res, s.sequence ?? g.sequence) ?? s.sequence;
      for (const [output, tensor] of g.steps[s.index]!.outputMap) {
        const out = res.outputs.find((o) => o.name === output);
        // Later steps and the ensemble's response share it: no sender may free it.
        if (out) keepMemory(out.data.buffer);
        updated.push(
          add(tensor, out ? { datatype: out.datatype, shape: out.shape, data: out.data, batchSize, ...(seq && { sequence: seq }) } : null),
        );
      }
    }
    proceed(updated);
  };

  const launch = (s: Started): void => {
    let ended = false;
    const sink: ResponseSink = {
      response: (res, final) => {
        if (ended) return;
        ended = final;
        stepDone(s, final, res);
      },
      error: (e, final) => {
        if (ended) return;
        ended = final;
        stepDone(s, final, undefined, e);
      },
    };
    try {
      g.call(s.index, s.req, sink);
    } catch (e) {
      sink.error(asServalError(e), true);
    }
  };

  // The request's own tensors are iteration 0 of theirs.
  proceed([...g.inputs].map(([t, tensor]) => add(t, tensor)));
}

/** Triton's max_inflight_requests: at most `max` requests of one step in flight (0 = no limit). */
class StepLimiter {
  private count = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly max: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.max > 0 && this.count >= this.max) await new Promise<void>((r) => this.waiting.push(r));
    this.count += 1;
    try {
      return await fn();
    } finally {
      this.count -= 1;
      this.waiting.shift()?.();
    }
  }
}

/** What resolving an ensemble's config takes besides the decoupled flag. */
interface EnsembleSource {
  readonly raw: ModelConfig;
  readonly name: string;
  readonly labels: ReadonlyMap<string, string[]>;
}

/**
 * The ensemble's config with the decoupled flag Triton completes (ValidateEnsembleConfig sets
 * model_transaction_policy.decoupled from the steps); resolving checks it again as Triton's
 * Model::Init does, so a response cache on a decoupled ensemble is refused here.
 */
function resolveEnsemble(src: EnsembleSource, decoupled: boolean): ResolvedModelConfig {
  const completed: ModelConfig = { ...src.raw, model_transaction_policy: { ...src.raw.model_transaction_policy, decoupled } };
  return resolveConfig(completed, {
    folderName: src.name,
    backend: ENSEMBLE_FACTS,
    signature: ensembleSignature(src.raw),
    labels: src.labels,
  });
}

export class EnsembleVersion implements LoadedVersion {
  readonly stats = new ModelStats();
  private closed = false;
  /** Requests running (counted, not kept in a set: kernel/churn.ts). */
  private readonly running = new InFlight();
  private readonly limiters: StepLimiter[];
  private readonly cache: ResponseCache | undefined;

  private constructor(
    readonly version: number,
    private current: ResolvedModelConfig,
    private readonly source: EnsembleSource,
    private readonly plan: EnsemblePlan,
    private readonly lookup: VersionLookup,
    maxInflight: number,
    responseCache?: ResponseCache,
  ) {
    this.limiters = plan.steps.map(() => new StepLimiter(maxInflight));
    // Top-level ensemble requests are cached when the ensemble's own config enables it (recent Triton releases).
    this.cache = current.responseCache ? responseCache : undefined;
    this.stats.cacheEnabled = this.cache !== undefined;
    // A decoupled version's first responses are recorded as they go (stream()), not at completion.
    this.stats.decoupled = current.decoupled;
  }

  /** The completed config; recheck() replaces it when a composing model's change flips the decoupled flag. */
  get config(): ResolvedModelConfig {
    return this.current;
  }

  get name(): string {
    return this.current.name;
  }

  get decoupled(): boolean {
    return this.current.decoupled;
  }

  /**
   * Loads one version of ensemble `name`: the section's own checks, the config resolved like any
   * model's, then every step against its composing model, which the caller has loaded first.
   */
  static async load(
    raw: ModelConfig,
    name: string,
    modelDir: string,
    version: number,
    lookup: VersionLookup,
    responseCache?: ResponseCache,
  ): Promise<EnsembleVersion> {
    const plan = planEnsemble(raw, name);
    const source: EnsembleSource = { raw, name, labels: await readLabels(raw, name, modelDir) };
    // First as written (Triton's checks of the config as read), then with the flag the steps decide.
    let config = resolveEnsemble(source, raw.model_transaction_policy?.decoupled ?? false);
    const decoupled = checkEnsembleSteps(config, plan, (step) => lookup(step.modelName, stepVersion(step)).config);
    if (decoupled !== config.decoupled) config = resolveEnsemble(source, decoupled);
    const maxInflight = Number(raw.ensemble_scheduling?.max_inflight_requests ?? 0);
    return new EnsembleVersion(version, config, source, plan, lookup, maxInflight, responseCache);
  }

  /**
   * The steps against their composing models as they are now (one of them changed); throws Triton's
   * error. A model that became (or stopped being) decoupled changes the ensemble's flag, as Triton's
   * reload of the ensemble would; requests already running keep the config they started with.
   */
  recheck(): void {
    const decoupled = checkEnsembleSteps(this.current, this.plan, (step) => this.lookup(step.modelName, stepVersion(step)).config);
    if (decoupled === this.current.decoupled) return;
    this.current = resolveEnsemble(this.source, decoupled);
    this.stats.decoupled = decoupled;
  }

  infer(req: InferRequest, requestStartNs: bigint, secondaryStats?: ModelStats): Promise<InferResponse> {
    if (this.closed) return Promise.reject(ServalError.unavailable('model is being unloaded'));
    // The core refuses it first (with the front-ends' texts); this is for callers that do not ask (BLS).
    if (this.current.decoupled)
      return Promise.reject(ServalError.unsupported(`model '${this.name}' is decoupled: its responses can only be streamed`));
    const run = this.cache
      ? this.cachedRun(this.cache, req, requestStartNs, secondaryStats)
      : this.run(req, requestStartNs, secondaryStats);
    this.running.track(run);
    return run;
  }

  /** run() behind the response cache: the request is checked first, so the key is of a valid request. */
  private async cachedRun(
    cache: ResponseCache,
    req: InferRequest,
    requestStartNs: bigint,
    secondaryStats: ModelStats | undefined,
  ): Promise<InferResponse> {
    const topK = classCounts(req);
    const v = validateRequest(req, this.config);
    const use = { cache, model: this.name, version: this.version, stats: this.stats, secondaryStats };
    const outputs = await throughCache(
      use,
      v,
      topK,
      requestStartNs,
      async () => (await this.run(req, requestStartNs, secondaryStats)).outputs,
    );
    return { modelName: this.name, modelVersion: String(this.version), id: req.id, outputs };
  }

  private async run(req: InferRequest, requestStartNs: bigint, secondaryStats: ModelStats | undefined): Promise<InferResponse> {
    const topK = classCounts(req);
    // The ensemble's own config checks the request, as for any model; each step's model checks its part.
    const v = validateRequest(req, this.config);
    const sequence = sequenceParameters(req);
    const queueStartNs = now();
    req.trace?.stamp('QUEUE_START', queueStartNs);
    req.admitted?.();
    traceTensors(req.trace, 'TENSOR_QUEUE_INPUT', req.inputs);
    // The composing requests' times, summed: the ensemble's compute times (Triton's context aggregator).
    const steps = new ModelStats();
    this.stats.pending += 1;
    try {
      let tensors: Map<string, EnsembleTensor | null>;
      let computeStartNs: bigint;
      try {
        // As Triton, every composing model is taken when the request starts: a missing one fails it at once.
        const targets = this.plan.steps.map((s) => this.lookup(s.modelName, stepVersion(s)));
        computeStartNs = now();
        const inputs = new Map<string, EnsembleTensor | null>(this.config.inputs.map((t) => [t.name, null]));
        for (const t of v.inputs) inputs.set(t.name, { datatype: t.datatype, shape: t.shape, data: t.data, batchSize: v.batchSize });
        tensors = await runEnsembleGraph({
          requestId: req.id,
          parameters: req.parameters,
          steps: this.plan.steps,
          models: targets.map((t) => t.config),
          inputs,
          wanted: v.outputs,
          call: (i, stepReq) => this.limiters[i]!.run(() => runStep(targets[i]!, stepReq, req.trace, steps)),
          cancellation: req.cancellation,
          ...(sequence && { sequence }),
        });
      } catch (e) {
        const err = asServalError(e);
        throw new ServalError(err.code, `in ensemble '${this.name}', ${err.message}`);
      }
      const outputs = this.shapeOutputs(v, topK, tensors);
      this.recordSuccess(v, { requestStartNs, queueStartNs, computeStartNs }, steps, secondaryStats);
      traceTensors(req.trace, 'TENSOR_BACKEND_OUTPUT', outputs);
      // Triton's ensemble responses carry the sequence fields of the steps that made their outputs.
      const parameters = responseSequence(tensors, v.outputs, sequence);
      return { modelName: this.name, modelVersion: String(this.version), id: req.id, outputs, ...(parameters && { parameters }) };
    } catch (e) {
      this.stats.recordFailure(requestStartNs, now(), 'OTHER');
      throw e;
    } finally {
      this.stats.pending -= 1;
    }
  }

  /**
   * A request completed: its end-to-end time, and its steps' summed compute times as the
   * ensemble's (Triton's context aggregator), counted as one execution of its batch size.
   */
  private recordSuccess(
    v: ValidatedRequest,
    at: Pick<RequestTiming, 'requestStartNs' | 'queueStartNs' | 'computeStartNs'>,
    steps: ModelStats,
    secondaryStats: ModelStats | undefined,
  ): void {
    const end = now();
    const timing: RequestTiming = {
      ...at,
      computeInputNs: steps.computeInput.ns,
      computeInferNs: steps.computeInfer.ns,
      computeOutputNs: steps.computeOutput.ns,
    };
    const batch = Math.max(1, v.batchSize);
    this.stats.recordSuccess(batch, timing, end);
    this.stats.recordExecution(batch, timing.computeInputNs, timing.computeInferNs, timing.computeOutputNs);
    secondaryStats?.recordSuccess(batch, timing, end);
  }

  /** The wanted outputs as the client gets them: the ensemble's shapes, classified when asked. */
  private shapeOutputs(
    v: ValidatedRequest,
    topK: ReadonlyMap<string, number>,
    tensors: ReadonlyMap<string, EnsembleTensor | null>,
  ): InferOutputTensor[] {
    return v.outputs.flatMap((name) => {
      const t = tensors.get(name);
      if (!t) return []; // a composing model left it out: so does the response, as in Triton
      const cfg = this.current.outputByName.get(name)!;
      const shape = stepShape(cfg.modelDims, v.batchSize > 0, t.batchSize, t.shape);
      // The ensemble's own output reshape applies as to any model's response (Triton's
      // InferenceResponse::AddOutput): clients see its dims.
      const shaped = clientShape(
        { name, datatype: t.datatype, shape, data: t.data },
        cfg,
        this.current.maxBatchSize > 0 ? (shape[0] ?? 0) : 0,
      );
      const k = topK.get(name);
      return [k ? classify(shaped, k, v.batchSize > 0, cfg.labels) : shaped];
    });
  }

  /**
   * One request of a decoupled ensemble: the ensemble's checks (thrown, as infer() rejects), then
   * the steps as streamEnsembleGraph runs them, each response to `sink` as a wave completes. The
   * ensemble's statistics count the request once, when its last response has gone, as Triton's
   * RequestTracker does: success or failure, its end-to-end time and its steps' compute times;
   * Triton's first-response time is the ensemble's own first response (or error). No response
   * cache: Triton refuses one on a decoupled model.
   */
  stream(req: InferRequest, requestStartNs: bigint, sink: ResponseSink, secondaryStats?: ModelStats): void {
    if (!this.current.decoupled) {
      answerOnce(this.infer(req, requestStartNs, secondaryStats), sink);
      return;
    }
    if (this.closed) throw ServalError.unavailable('model is being unloaded');
    const config = this.current;
    const topK = classCounts(req);
    const v = validateRequest(req, config);
    const sequence = sequenceParameters(req);
    const queueStartNs = now();
    req.trace?.stamp('QUEUE_START', queueStartNs);
    req.admitted?.();
    traceTensors(req.trace, 'TENSOR_QUEUE_INPUT', req.inputs);
    const steps = new ModelStats();
    this.stats.pending += 1;
    let computeStartNs = queueStartNs;
    let answered = false;
    let done!: () => void;
    const tracked = new Promise<void>((r) => {
      done = r;
    });
    this.running.track(tracked);
    const first = (): void => {
      if (answered) return;
      answered = true;
      this.stats.recordFirstResponse(Number(now() - requestStartNs));
    };
    const succeed = (): void => {
      this.stats.pending -= 1;
      this.recordSuccess(v, { requestStartNs, queueStartNs, computeStartNs }, steps, secondaryStats);
      done();
    };
    const fail = (e: ServalError): void => {
      this.stats.pending -= 1;
      this.stats.recordFailure(requestStartNs, now(), 'OTHER');
      first();
      done();
      sink.error(new ServalError(e.code, `in ensemble '${this.name}', ${e.message}`), true);
    };
    let targets: LoadedVersion[];
    try {
      // As Triton, every composing model is taken when the request starts: a missing one fails it at once.
      targets = this.plan.steps.map((s) => this.lookup(s.modelName, stepVersion(s)));
    } catch (e) {
      fail(asServalError(e));
      return;
    }
    computeStartNs = now();
    const inputs = new Map<string, EnsembleTensor | null>(config.inputs.map((t) => [t.name, null]));
    for (const t of v.inputs) inputs.set(t.name, { datatype: t.datatype, shape: t.shape, data: t.data, batchSize: v.batchSize });
    streamEnsembleGraph({
      requestId: req.id,
      parameters: req.parameters,
      steps: this.plan.steps,
      models: targets.map((t) => t.config),
      inputs,
      wanted: v.outputs,
      call: (i, stepReq, stepSink) => {
        // The step's in-flight slot is held until its final response.
        void this.limiters[i]!.run(
          () =>
            new Promise<void>((released) => {
              const end = (final: boolean): void => {
                if (final) released();
              };
              streamStep(targets[i]!, stepReq, req.trace, steps, {
                response: (res, final) => {
                  end(final);
                  stepSink.response(res, final);
                },
                error: (e, final) => {
                  end(final);
                  stepSink.error(e, final);
                },
              });
            }),
        );
      },
      cancellation: req.cancellation,
      ...(sequence && { sequence }),
      response: (tensors, final) => {
        // Throws only when an output cannot be classified: the graph then fails the request.
        const outputs = this.shapeOutputs(v, topK, tensors);
        first();
        traceTensors(req.trace, 'TENSOR_BACKEND_OUTPUT', outputs);
        if (final) succeed();
        // Triton's ensemble responses carry the sequence fields of the steps that made their
        // outputs (docs/reference/decoupled.md, ensembles); its empty final does not.
        const parameters = responseSequence(tensors, v.outputs, sequence);
        sink.response(
          { modelName: this.name, modelVersion: String(this.version), id: req.id, outputs, ...(parameters && { parameters }) },
          final,
        );
      },
      final: () => {
        succeed();
        sink.response(undefined, true);
      },
      error: fail,
    });
  }

  /** Stops taking requests and waits for the running ones; the composing models are the repository's. */
  async unload(): Promise<void> {
    this.closed = true;
    while (this.running.size) await this.running.idle();
  }
}
