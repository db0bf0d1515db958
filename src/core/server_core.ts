// The core: implements CoreApi over the model repository. Requests are checked and run by their
// model version (model/model_version.ts); the core adds server state and the lookups.
import { fromTritonConfigJson } from '../config/config_json.js';
import type { ModelConfig } from '../config/types.js';
import { asServalError, ServalError } from '../kernel/errors.js';
import { LogControl, type LogSettingsJson, type LogSettingsUpdate } from '../kernel/log.js';
import { answerOnce } from '../kernel/sink.js';
import type { RequestTrace } from '../kernel/trace.js';
import type { IndexRow, InferRequest, InferResponse, ModelMetadata, ResponseSink, ServerMetadata } from '../kernel/types.js';
import type { LoadedVersion } from '../model/loaded_version.js';
import type { ModelRepository } from '../repository/repository.js';
import { uploadError, uploadFiles } from '../repository/upload.js';
import { type ModelStatisticsJson, statisticsOf } from '../stats/report.js';
import { TRACE_DEFAULTS, type TraceSettingsJson, type TraceSettingsUpdate } from '../trace/settings.js';
import { TraceManager } from '../trace/trace_manager.js';
import type { CoreApi, ModelMetricsRow } from './api.js';
import { SharedMemoryRegistry, type SystemSharedMemoryStatus } from './shared_memory.js';

export interface CoreOptions {
  id: string;
  version: string;
  strictReadiness: boolean;
  extensions: string[];
  /** Trace extension state; without one, tracing starts OFF with Triton's defaults. */
  tracer?: TraceManager;
  /** The server's log settings; without one, the logging extension changes a private LogControl. */
  logging?: LogControl;
  /** --allow-client-shm: clients may register and use system shared memory (default false, as Triton 2.73). */
  allowClientShm?: boolean;
}

export class InferenceCore implements CoreApi {
  private accepting = true;
  /** Registered system shared memory regions: server state, not a model's. */
  private readonly sharedMemory: SharedMemoryRegistry;
  private readonly tracer: TraceManager;
  private readonly logging: LogControl;

  constructor(
    private readonly repository: ModelRepository,
    private readonly options: CoreOptions,
  ) {
    this.logging = options.logging ?? new LogControl();
    this.tracer = options.tracer ?? new TraceManager(TRACE_DEFAULTS);
    this.sharedMemory = new SharedMemoryRegistry(options.allowClientShm ?? false);
  }

  /** Why start-up failed when --exit-on-error=false kept the server running; undefined when it did not. */
  private initFailure: string | undefined;

  /** As tritonserver after a failed initialization: the server answers, but is neither live nor ready. */
  initializationFailed(reason: string): void {
    this.initFailure = reason;
  }

  isLive(): boolean {
    return this.initFailure === undefined;
  }

  /** tritonserver refuses the model and repository APIs of a server that failed to initialize so (503). */
  private requireInitialized(): void {
    if (this.initFailure !== undefined) throw ServalError.unavailable('Server not ready');
  }

  isReady(): boolean {
    if (!this.accepting || this.initFailure !== undefined) return false;
    return this.options.strictReadiness ? this.repository.allReady() : true;
  }

  isAccepting(): boolean {
    return this.accepting;
  }

  /** Shutdown begins: readiness goes false and new inferences are refused. */
  stopAccepting(): void {
    this.accepting = false;
  }

  serverMetadata(): ServerMetadata {
    return { name: this.options.id, version: this.options.version, extensions: this.options.extensions };
  }

  isModelReady(name: string, version: string): boolean {
    this.requireInitialized();
    return this.accepting && this.repository.isReady(name, version);
  }

  modelMetadata(name: string, version: string): ModelMetadata {
    this.requireInitialized();
    const c = this.repository.get(name, version).config;
    const batch = c.maxBatchSize > 0 ? [-1] : [];
    const tensor = (t: { name: string; datatype: string; dims: readonly number[] }) => ({
      name: t.name,
      datatype: t.datatype,
      shape: [...batch, ...t.dims],
    });
    return {
      name: c.name,
      versions: this.repository.readyVersions(name).map(String),
      // Triton reports the backend when the config names no platform (a Python model: "python").
      platform: c.platform || c.backend,
      inputs: c.inputs.map(tensor),
      outputs: c.outputs.map(tensor),
    };
  }

  modelConfig(name: string, version: string): Readonly<Record<string, unknown>> {
    this.requireInitialized();
    return this.repository.get(name, version).config.json;
  }

  statistics(name: string, version: string): ModelStatisticsJson[] {
    this.requireInitialized();
    let versions: LoadedVersion[];
    if (!name) versions = this.repository.loadedVersions();
    else if (version === '' || version === '-1') {
      this.repository.get(name, ''); // Triton's error for an unknown or unready model
      versions = this.repository.loadedVersions().filter((v) => v.name === name);
    } else versions = [this.repository.get(name, version)];
    return versions.map((v) => statisticsOf(v.name, v.version, v.stats));
  }

  metricsSnapshot(): ModelMetricsRow[] {
    return this.repository.loadedVersions().map((v) => ({ model: v.name, version: String(v.version), stats: v.stats }));
  }

  repositoryIndex(readyOnly: boolean): Promise<IndexRow[]> {
    try {
      this.requireInitialized();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.repository.repositoryIndex(readyOnly);
  }

  /**
   * Repository extension load. `parameters.config` is a model config in Triton's JSON form
   * (what tritonclient's load_model(config=...) sends) that replaces config.pbtxt.
   */
  async loadModel(name: string, parameters: Record<string, unknown>): Promise<void> {
    this.requireInitialized();
    let override: ModelConfig | undefined;
    // `file:<path>` parameters (bytes) upload the model's files (repository/upload.ts).
    const files = uploadFiles(name, parameters);
    const config = parameters.config;
    if (config !== undefined) {
      if (typeof config !== 'string')
        throw ServalError.invalidArg(`failed to load '${name}': the 'config' parameter must be a JSON string`);
      try {
        override = fromTritonConfigJson(config) as ModelConfig;
      } catch (e) {
        const why = `invalid 'config' parameter: ${(e as Error).message}`;
        // With uploaded files 2.51 fails while localizing the model: its upload text (500).
        throw files ? uploadError(name, why) : ServalError.invalidArg(`failed to load '${name}': ${why}`);
      }
    }
    await this.repository.load(name, override, files);
  }

  /** Repository extension unload; `parameters.unload_dependents` also unloads what only it used. */
  async unloadModel(name: string, parameters: Record<string, unknown> = {}): Promise<void> {
    this.requireInitialized();
    const dependents = parameters.unload_dependents ?? false;
    if (typeof dependents !== 'boolean') {
      throw ServalError.invalidArg("invalid value type for 'unload_dependents' parameter, expected bool_param.");
    }
    await this.repository.unload(name, dependents);
  }

  infer(req: InferRequest): Promise<InferResponse> {
    const requestStartNs = process.hrtime.bigint();
    try {
      this.requireInitialized();
      if (!this.accepting) throw ServalError.unavailable('Server is shutting down; no new inference requests are accepted');
      const version = this.repository.get(req.modelName, req.modelVersion);
      if (version.decoupled) throw decoupledRefusal(version.name);
      if (req.trace) return this.tracedInfer(req, req.trace, version, requestStartNs);
      // Shared-memory inputs are read before the model's checks, outputs written after it ran.
      return this.sharedMemory.infer(req, (r) => version.infer(r, requestStartNs));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** infer() of a sampled request: the core's own trace records around the model version's work. */
  private tracedInfer(req: InferRequest, trace: RequestTrace, version: LoadedVersion, requestStartNs: bigint): Promise<InferResponse> {
    trace.model(version.name, version.version, req.id);
    trace.stamp('REQUEST_START', requestStartNs);
    return this.sharedMemory
      .infer(req, (r) => version.infer(r, requestStartNs))
      .finally(() => trace.stamp('REQUEST_END', process.hrtime.bigint()));
  }

  inferStream(req: InferRequest, sink: ResponseSink): void {
    let version: LoadedVersion;
    try {
      this.requireInitialized();
      version = this.repository.get(req.modelName, req.modelVersion);
      if (!this.accepting) throw ServalError.unavailable('Server is shutting down; no new inference requests are accepted');
    } catch (e) {
      sink.error(asServalError(e), true);
      return;
    }
    if (!version.decoupled) {
      answerOnce(this.infer(req), sink);
      return;
    }
    const requestStartNs = process.hrtime.bigint();
    const trace = req.trace;
    if (trace) {
      trace.model(version.name, version.version, req.id);
      trace.stamp('REQUEST_START', requestStartNs);
    }
    const ended = (): void => trace?.stamp('REQUEST_END', process.hrtime.bigint());
    try {
      // Shared memory names one place for one response; a decoupled model's many have none.
      if (usesSharedMemory(req)) {
        throw ServalError.unsupported(`model '${version.name}' is decoupled: its requests cannot use shared memory regions`);
      }
      version.stream(req, requestStartNs, {
        response: (res, final) => {
          if (final) ended();
          sink.response(res, final);
        },
        error: (e, final) => {
          if (final) ended();
          sink.error(e, final);
        },
      });
    } catch (e) {
      ended();
      sink.error(asServalError(e), true);
    }
  }

  isDecoupled(name: string, version: string): boolean {
    this.requireInitialized();
    return this.repository.get(name, version).decoupled;
  }

  startTrace(model: string): RequestTrace | undefined {
    return this.tracer.sample(model);
  }

  traceSettings(model: string, update?: TraceSettingsUpdate): TraceSettingsJson {
    // Triton: a model's settings exist only for a model with a ready version.
    if (model !== '' && this.repository.readyVersions(model).length === 0) {
      throw ServalError.invalidArg(`Request for unknown model : ${model}`);
    }
    return update ? this.tracer.update(model, update) : this.tracer.get(model);
  }

  logSettings(update?: LogSettingsUpdate): LogSettingsJson {
    return update ? this.logging.update(update) : this.logging.json();
  }

  registerSystemSharedMemory(name: string, key: string, offset: number, byteSize: number): void {
    this.sharedMemory.register(name, key, offset, byteSize);
  }

  systemSharedMemoryStatus(name: string): SystemSharedMemoryStatus[] {
    return this.sharedMemory.status(name);
  }

  checkClientSharedMemory(): void {
    this.sharedMemory.checkAllowed();
  }

  unregisterSystemSharedMemory(name: string): Promise<void> {
    try {
      this.sharedMemory.checkAllowed();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.sharedMemory.unregister(name);
  }
}

/** core.infer() on a decoupled model: the front-ends check first and answer with their protocol's text. */
function decoupledRefusal(name: string): ServalError {
  return ServalError.unsupported(`model '${name}' is decoupled: its responses can only be streamed`);
}

function usesSharedMemory(req: InferRequest): boolean {
  const named = (p: Record<string, unknown> | undefined): boolean => p?.shared_memory_region !== undefined;
  return req.inputs.some((i) => named(i.parameters)) || (req.outputs ?? []).some((o) => named(o.parameters));
}
