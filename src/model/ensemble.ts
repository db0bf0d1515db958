// An ensemble version (platform "ensemble"): no model file, no backend, no instances. A request
// runs the steps as a graph, as Triton's ensemble scheduler does: a step starts as soon as the
// tensors it reads are there (independent steps run at once), each step is an inference request to
// its composing model through that model's own scheduler (so its dynamic batching applies), and
// tensors pass from step to step as the same byte views, never copied here. Steps no requested
// output depends on are not run. The first step error fails the request once the steps in flight
// have finished, with the step's error text after "in ensemble '<name>', ".

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
import type { DataType } from '../kernel/datatypes.js';
import { asServalError, ServalError } from '../kernel/errors.js';
import type { InferInputTensor, InferOutputTensor, InferRequest, InferResponse, Params } from '../kernel/types.js';
import { ModelStats, type RequestTiming } from '../stats/model_stats.js';
import { throughCache } from './cache_path.js';
import { runStep, traceTensors } from './ensemble_trace.js';
import type { LoadedVersion, VersionLookup } from './loaded_version.js';
import { readLabels } from './model_version.js';
import { classify } from './outputs.js';
import { classCounts, validateRequest } from './validate.js';

const now = (): bigint => process.hrtime.bigint();

/** An ensemble tensor: a request input or a step output, with the batch size it was made with. */
export interface EnsembleTensor {
  datatype: DataType;
  /** Full shape, batch dimension first when batchSize > 0. */
  shape: number[];
  data: Uint8Array;
  /** 0 when the model that made it (or the ensemble request) does not batch. */
  batchSize: number;
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
      const step = g.steps[i]!;
      const model = g.models[i]!;
      const batching = model.maxBatchSize > 0;
      const inputs: InferInputTensor[] = [];
      for (const [name, tensor] of step.inputMap) {
        const t = tensors.get(tensor);
        if (!t) continue; // an optional input the request left out: the model's must be optional too
        const dims = model.inputByName.get(name)?.dims ?? [];
        inputs.push({ name, datatype: t.datatype, shape: stepShape(dims, batching, t.batchSize, t.shape), data: t.data });
      }
      const batchSize = batching ? (inputs[0]?.shape[0] ?? 0) : 0;
      const cancellation = new Cancellation();
      if (g.cancellation?.cancelled) cancellation.cancel();
      inflight.add(cancellation);
      const req: InferRequest = {
        modelName: step.modelName,
        modelVersion: stepVersion(step),
        id: g.requestId,
        inputs,
        outputs: step.outputMap.map(([name]) => ({ name })),
        parameters: g.parameters,
        cancellation,
      };
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
            for (const [output, tensor] of step.outputMap) {
              const out = res.outputs.find((o) => o.name === output);
              tensors.set(tensor, out ? { datatype: out.datatype, shape: out.shape, data: out.data, batchSize } : null);
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

export class EnsembleVersion implements LoadedVersion {
  readonly stats = new ModelStats();
  private closed = false;
  private readonly running = new Set<Promise<unknown>>();
  private readonly limiters: StepLimiter[];
  private readonly cache: ResponseCache | undefined;

  private constructor(
    readonly version: number,
    readonly config: ResolvedModelConfig,
    private readonly plan: EnsemblePlan,
    private readonly lookup: VersionLookup,
    maxInflight: number,
    responseCache?: ResponseCache,
  ) {
    this.limiters = plan.steps.map(() => new StepLimiter(maxInflight));
    // Top-level ensemble requests are cached when the ensemble's own config enables it (recent Triton releases).
    this.cache = config.responseCache ? responseCache : undefined;
    this.stats.cacheEnabled = this.cache !== undefined;
  }

  get name(): string {
    return this.config.name;
  }

  get decoupled(): boolean {
    return this.config.decoupled;
  }

  stream(): void {
    throw ServalError.unsupported(`ensemble '${this.name}': decoupled ensembles are not served yet`);
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
    const labels = await readLabels(raw, name, modelDir);
    // Triton sets an ensemble's transaction policy from its steps': none of Serval's is decoupled.
    const completed: ModelConfig = { ...raw, model_transaction_policy: { ...raw.model_transaction_policy, decoupled: false } };
    const config = resolveConfig(completed, { folderName: name, backend: ENSEMBLE_FACTS, signature: ensembleSignature(raw), labels });
    checkEnsembleSteps(config, plan, (step) => lookup(step.modelName, stepVersion(step)).config);
    return new EnsembleVersion(version, config, plan, lookup, Number(raw.ensemble_scheduling?.max_inflight_requests ?? 0), responseCache);
  }

  /** The steps against their composing models as they are now (one of them changed); throws Triton's error. */
  recheck(): void {
    checkEnsembleSteps(this.config, this.plan, (step) => this.lookup(step.modelName, stepVersion(step)).config);
  }

  infer(req: InferRequest, requestStartNs: bigint, secondaryStats?: ModelStats): Promise<InferResponse> {
    if (this.closed) return Promise.reject(ServalError.unavailable('model is being unloaded'));
    const run = this.cache
      ? this.cachedRun(this.cache, req, requestStartNs, secondaryStats)
      : this.run(req, requestStartNs, secondaryStats);
    const tracked = run.then(
      () => undefined,
      () => undefined,
    );
    this.running.add(tracked);
    void tracked.finally(() => this.running.delete(tracked));
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
        });
      } catch (e) {
        const err = asServalError(e);
        throw new ServalError(err.code, `in ensemble '${this.name}', ${err.message}`);
      }
      const outputs: InferOutputTensor[] = v.outputs.flatMap((name) => {
        const t = tensors.get(name);
        if (!t) return []; // a composing model left it out: so does the response, as in Triton
        const cfg = this.config.outputByName.get(name)!;
        const shaped: InferOutputTensor = {
          name,
          datatype: t.datatype,
          shape: stepShape(cfg.modelDims, v.batchSize > 0, t.batchSize, t.shape),
          data: t.data,
        };
        const k = topK.get(name);
        return [k ? classify(shaped, k, v.batchSize > 0, cfg.labels) : shaped];
      });
      const end = now();
      const timing: RequestTiming = {
        requestStartNs,
        queueStartNs,
        computeStartNs,
        computeInputNs: steps.computeInput.ns,
        computeInferNs: steps.computeInfer.ns,
        computeOutputNs: steps.computeOutput.ns,
      };
      const batch = Math.max(1, v.batchSize);
      this.stats.recordSuccess(batch, timing, end);
      this.stats.recordExecution(batch, timing.computeInputNs, timing.computeInferNs, timing.computeOutputNs);
      secondaryStats?.recordSuccess(batch, timing, end);
      traceTensors(req.trace, 'TENSOR_BACKEND_OUTPUT', outputs);
      return { modelName: this.name, modelVersion: String(this.version), id: req.id, outputs };
    } catch (e) {
      this.stats.recordFailure(requestStartNs, now(), 'OTHER');
      throw e;
    } finally {
      this.stats.pending -= 1;
    }
  }

  /** Stops taking requests and waits for the running ones; the composing models are the repository's. */
  async unload(): Promise<void> {
    this.closed = true;
    while (this.running.size) await Promise.allSettled([...this.running]);
  }
}
