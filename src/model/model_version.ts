// A loaded model version: its resolved config, its instances and the scheduler in front of them.
// Load order: raw config → the model file's signature (read once) → auto-complete → resolve (every
// check) → label files and warm-up samples → start instances → warm up. Nothing starts before the
// config is known to be good.
import { readFile } from 'node:fs/promises';
import type { Backend, ExecOutput, InstanceHost, ModelFiles, ModelInstance, ResponseChannel } from '../backends/backend.js';
import type { BackendRegistry } from '../backends/registry.js';
import type { ResponseCache } from '../cache/response_cache.js';
import { resolveConfig } from '../config/resolve.js';
import type { ResolvedModelConfig } from '../config/resolved.js';
import type { ModelConfig } from '../config/types.js';
import { confinedPath, scrubPaths } from '../kernel/confine.js';
import { asServalError, ServalError } from '../kernel/errors.js';
import type { InferOutputTensor, InferRequest, InferResponse, ResponseSink } from '../kernel/types.js';
import { instanceRateLimits, type LimitedInstance, type RateLimiter } from '../scheduler/rate_limiter.js';
import { type ScheduledOutput, Scheduler, type SchedulerRequest, submit } from '../scheduler/scheduler.js';
import { SequenceBatcher, type StateTensor } from '../scheduler/sequence_batcher.js';
import type { ServerLoad } from '../scheduler/server_load.js';
import { ModelStats } from '../stats/model_stats.js';
import { throughCache } from './cache_path.js';
import type { LoadedVersion } from './loaded_version.js';
import { classify, clientShape } from './outputs.js';
import { readInitialStates, sequenceParameters } from './sequence_params.js';
import { classCounts, queueParameters, type ValidatedRequest, validateRequest } from './validate.js';
import { type WarmupSample, warmupRequests } from './warmup.js';

export interface LoadOptions {
  autoComplete: boolean;
  backends: BackendRegistry;
  /** Inference on the server's models, for instances that make requests of their own (Python BLS). */
  host: InstanceHost;
  /** The server's response cache (--cache-config), used by models whose config enables it. */
  responseCache?: ResponseCache;
  /** The server's rate limiter (--rate-limit); its instances execute only when it grants them. */
  rateLimiter?: RateLimiter;
  /** The requests in all the server's schedulers (ExecLayout.lone). */
  load?: ServerLoad;
}

export class ModelVersion implements LoadedVersion {
  readonly stats = new ModelStats();
  private readonly scheduler: Pick<Scheduler, 'enqueue' | 'drain'>;
  /** Set when the config enables the response cache and the server has one; never for sequence models (as in Triton). */
  private readonly cache: ResponseCache | undefined;

  private constructor(
    readonly version: number,
    readonly config: ResolvedModelConfig,
    private readonly instances: readonly ModelInstance[],
    initialStates?: ReadonlyMap<string, StateTensor>,
    responseCache?: ResponseCache,
    private readonly limited?: { limiter: RateLimiter; instances: readonly LimitedInstance[] },
    load?: ServerLoad,
  ) {
    const { name, maxBatchSize, sequence } = config;
    for (const inst of instances) inst.onRestart = () => this.stats.instanceRestarts++;
    this.cache = config.responseCache && !sequence ? responseCache : undefined;
    this.stats.cacheEnabled = this.cache !== undefined;
    // A decoupled version's first responses are recorded as they go (stream()), and its
    // response_stats reported: Serval fills them for its Python models too, which Triton 2.51's
    // Python backend leaves empty (docs/protocol.md, statistics of decoupled models).
    this.stats.decoupled = config.decoupled;
    this.stats.reportsResponseStats = config.decoupled;
    this.scheduler = sequence
      ? new SequenceBatcher(
          instances,
          { name, maxBatchSize, policy: sequence, ...(initialStates && { initialStates }), ...(limited && { limited: limited.instances }) },
          this.stats,
        )
      : new Scheduler(instances, config.batching, this.stats, limited?.instances, load);
  }

  get name(): string {
    return this.config.name;
  }

  /** Loads one version of model `name` (its folder's name) from its raw config; returns it ready. */
  static async load(raw: ModelConfig, name: string, modelDir: string, version: number, opts: LoadOptions): Promise<ModelVersion> {
    const backend = opts.backends.forConfig(raw, name);
    const filename = raw.default_model_filename || backend.defaultModelFilename;
    const files: ModelFiles = {
      modelDir,
      // Inside the version folder by name and inside the model's folder after symlinks (kernel/confine.ts).
      modelPath: await confinedPath(modelDir, String(version), { model: name, field: 'default_model_filename', value: filename }),
    };
    const signature = await backend.readSignature(files);
    const completed = opts.autoComplete ? await backend.autoComplete(raw, signature, files) : raw;
    const labels = await readLabels(completed, name, modelDir);
    const config = resolveConfig(completed, { folderName: name, backend, signature, labels });
    const initialStates = config.sequence ? await readInitialStates(config, modelDir) : undefined;
    const samples = await warmupRequests(config, modelDir, initialStates);
    // Triton registers the instances with its rate limiter as it creates them: a load whose
    // resources could never be granted fails.
    const limiter = opts.rateLimiter?.enabled ? opts.rateLimiter : undefined;
    const limited = limiter && { limiter, instances: limiter.register(instanceRateLimits(config.instanceGroups ?? [], config.instances)) };
    try {
      const instances = await startInstances(backend, config, files, opts.host).catch((e: unknown) => {
        const why = scrubPaths(e instanceof Error ? e.message : String(e), modelDir);
        // The instance's own code stays: Triton's load failure text names it ("Internal: ...").
        const code = e instanceof ServalError ? e.code : 'INVALID_ARG';
        throw new ServalError(code, `failed to load '${name}' version ${version}: ${why}`);
      });
      try {
        await warmUp(config, version, samples, instances);
      } catch (e) {
        await Promise.allSettled(instances.map((i) => i.close()));
        throw e;
      }
      return new ModelVersion(version, config, instances, initialStates, opts.responseCache, limited, opts.load);
    } catch (e) {
      if (limited) limiter.unregister(limited.instances);
      throw e;
    }
  }

  /** Validates a request, queues it, and shapes what the model produced for the client. */
  infer(req: InferRequest, requestStartNs: bigint, secondaryStats?: ModelStats): Promise<InferResponse> {
    let outputs: Promise<InferOutputTensor[]>;
    try {
      const topK = classCounts(req);
      const v = validateRequest(req, this.config);
      const run = () => this.run(req, v, topK, requestStartNs, secondaryStats);
      outputs = this.cache
        ? throughCache(
            { cache: this.cache, model: this.name, version: this.version, stats: this.stats, secondaryStats },
            v,
            topK,
            requestStartNs,
            run,
          )
        : run();
    } catch (e) {
      return Promise.reject(e);
    }
    // One continuation per request on the way back (not one per async layer).
    return outputs.then((o) => ({ modelName: this.name, modelVersion: String(this.version), id: req.id, outputs: o }));
  }

  get decoupled(): boolean {
    return this.config.decoupled;
  }

  /** Queues a checked request and shapes what the model produced for the client. */
  private run(
    req: InferRequest,
    v: ValidatedRequest,
    topK: ReadonlyMap<string, number>,
    requestStartNs: bigint,
    secondaryStats: ModelStats | undefined,
  ): Promise<InferOutputTensor[]> {
    return this.scheduler.enqueue(this.scheduled(req, v, requestStartNs, secondaryStats)).then((produced) => this.shape(produced, v, topK));
  }

  /**
   * A decoupled version's request: each response the model sends is shaped as infer() shapes its
   * one, counted in the response statistics, and passed to `sink` as it comes. The queue's
   * promise settles when the model's execute() has returned; responses may come after it.
   */
  stream(req: InferRequest, requestStartNs: bigint, sink: ResponseSink, secondaryStats?: ModelStats): void {
    const topK = classCounts(req);
    const v = validateRequest(req, this.config);
    let index = 0;
    let lastNs = requestStartNs;
    let done = false;
    let answered = false;
    const responses: ResponseChannel = {
      send: (response, final, parameters) => {
        if (done) return;
        done = final;
        const receivedNs = process.hrtime.bigint();
        const k = index++;
        // As in Triton, the final flag alone is no response: the first one carries outputs or an error.
        if (!answered && response !== undefined) this.stats.recordFirstResponse(Number(receivedNs - requestStartNs));
        answered ||= response !== undefined;
        const inferNs = Number(receivedNs - lastNs);
        lastNs = receivedNs;
        if (response === undefined) {
          this.stats.recordResponse(k, 'empty_response', inferNs, 0);
          sink.response(undefined, final);
          return;
        }
        if (response instanceof Error) {
          const err = asServalError(response);
          this.stats.recordResponse(k, err.code === 'CANCELLED' ? 'cancel' : 'fail', inferNs, 0);
          sink.error(err, final);
          return;
        }
        // Each response's outputs as the model sent them (Triton traces them as the response is sent).
        if (req.trace?.tensors) for (const o of response) req.trace.tensor('TENSOR_BACKEND_OUTPUT', o.name, o.datatype, o.dims, o.data);
        let outputs: InferOutputTensor[];
        try {
          outputs = this.shape(response.map(asScheduled), v, topK);
        } catch (e) {
          this.stats.recordResponse(k, 'fail', inferNs, Number(process.hrtime.bigint() - receivedNs));
          sink.error(asServalError(e), final);
          return;
        }
        this.stats.recordResponse(k, 'success', inferNs, Number(process.hrtime.bigint() - receivedNs));
        const res: InferResponse = { modelName: this.name, modelVersion: String(this.version), id: req.id, outputs };
        if (parameters && Object.keys(parameters).length) res.parameters = parameters;
        sink.response(res, final);
      },
    };
    const scheduled = this.scheduled(req, v, requestStartNs, secondaryStats);
    let queued = false;
    const admitted = scheduled.admitted;
    scheduled.admitted = () => {
      queued = true;
      admitted?.();
    };
    // Released (Triton's REQUEST_END) once both the final response is out and execute() has returned.
    const release = req.trace?.hold?.();
    this.scheduler.enqueue({ ...scheduled, responses }).then(
      () => release?.(),
      // Refused, cancelled while queued, or execute() failed before the model ended the request.
      (e: unknown) => {
        release?.();
        if (done) return;
        done = true;
        const err = asServalError(e);
        // The error is the request's first response, unless the queue refused it (Triton fails the call then).
        if (!answered && queued) this.stats.recordFirstResponse(Number(process.hrtime.bigint() - requestStartNs));
        sink.error(err, true);
      },
    );
  }

  private scheduled(
    req: InferRequest,
    v: ValidatedRequest,
    requestStartNs: bigint,
    secondaryStats: ModelStats | undefined,
  ): SchedulerRequest {
    return {
      batchSize: v.batchSize,
      inputs: v.inputs,
      outputs: v.outputs,
      requestStartNs,
      ...queueParameters(req),
      cancellation: req.cancellation,
      trace: req.trace,
      secondaryStats,
      id: req.id,
      parameters: req.parameters,
      sequence: sequenceParameters(req),
      // A traced request's tensors may still be read for the trace; others may be taken over.
      ownMemory: req.trace ? undefined : req.ownMemory,
      admitted: req.admitted,
    };
  }

  /** What the model produced, as the client gets it: requested outputs in order, reshaped, classified. */
  private shape(produced: readonly ScheduledOutput[], v: ValidatedRequest, topK: ReadonlyMap<string, number>): InferOutputTensor[] {
    const byName = new Map<string, ScheduledOutput>();
    for (const o of produced) byName.set(o.name, o);
    // v.outputs: the requested outputs in request order (validated, no repeats), else all of them;
    // a Python model's go in the order it made them (as Triton's backend adds them), once each.
    // A Python model may leave out an output it was asked for; the response then lacks it, as in Triton.
    const shaped: InferOutputTensor[] = [];
    const add = (name: string): void => {
      const out = byName.get(name);
      if (!out) return;
      const cfg = this.config.outputByName.get(name)!;
      const one = clientShape(out, cfg, v.batchSize);
      const k = topK.get(name);
      shaped.push(k ? classify(one, k, v.batchSize > 0, cfg.labels) : one);
    };
    if (this.config.outputsInModelOrder) {
      for (const name of byName.keys()) if (v.outputs.includes(name)) add(name);
    } else for (const name of v.outputs) add(name);
    return shaped;
  }

  /** Waits for queued and running requests, then stops the instances. */
  async unload(): Promise<void> {
    await this.scheduler.drain();
    if (this.limited) this.limited.limiter.unregister(this.limited.instances);
    await Promise.allSettled(this.instances.map((i) => i.close()));
  }
}

const asScheduled = (o: ExecOutput): ScheduledOutput => ({ name: o.name, datatype: o.datatype, shape: o.dims, data: o.data });

/** The lines of every output's label_filename, by file name. */
export async function readLabels(config: ModelConfig, name: string, modelDir: string): Promise<Map<string, string[]>> {
  const labels = new Map<string, string[]>();
  for (const out of config.output ?? []) {
    const file = out.label_filename;
    if (!file || labels.has(file)) continue;
    const where = await confinedPath(modelDir, '', { model: name, field: `label_filename of output '${out.name}'`, value: file });
    const text = await readFile(where, 'utf8').catch((e: NodeJS.ErrnoException) => {
      const why = e.code === 'ENOENT' ? 'no such file' : (e.code ?? 'error');
      throw ServalError.invalidArg(`model '${name}': cannot read label file '${file}' of output '${out.name}': ${why}`);
    });
    labels.set(
      file,
      text.split(/\r?\n/).filter((l, i, all) => l !== '' || i < all.length - 1),
    );
  }
  return labels;
}

/** Starts every placement; if one fails, stops the others and reports the first failure. */
async function startInstances(
  backend: Backend,
  config: ResolvedModelConfig,
  files: ModelFiles,
  host: InstanceHost,
): Promise<ModelInstance[]> {
  const started = await Promise.allSettled(config.instances.map((p) => backend.startInstance(p, config.instanceSettings, files, host)));
  const instances = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failure = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failure) {
    await Promise.allSettled(instances.map((i) => i.close()));
    throw failure.reason;
  }
  return instances;
}

/**
 * Runs every model_warmup sample `count` times on every instance, straight on the instance as
 * Triton does (no scheduler, no sequence batcher); a failure fails the load with Triton's text.
 */
async function warmUp(
  config: ResolvedModelConfig,
  version: number,
  samples: WarmupSample[],
  instances: readonly ModelInstance[],
): Promise<void> {
  await Promise.all(
    instances.map(async (inst) => {
      for (const s of samples) {
        for (let i = 0; i < s.count; i++) {
          try {
            await submit(inst, [s.req], s.req.batchSize, config.batching.ragged).result;
          } catch (e) {
            throw ServalError.invalidArg(
              `failed to load '${config.name}' version ${version}: failed to run warmup sample '${s.name}': ${(e as Error).message}; `,
            );
          }
        }
      }
    }),
  );
}
