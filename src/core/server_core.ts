// The in-process API both front-ends call: health, metadata, config, statistics and inference.
// Front-ends only translate wire formats to and from these calls.
import type { ModelConfig, ModelOutput } from '../config/types.js';
import type { IndexRow, ModelRepository } from '../repository/repository.js';
import { fromTritonConfigJson } from '../config/config_json.js';
import type { ModelVersion } from '../repository/model.js';
import type { ScheduledOutput } from '../scheduler/scheduler.js';
import { elementCount, fromConfigType, joinBytes, typedView, halfToFloat, type DataType } from './datatypes.js';
import { ServalError } from './errors.js';
import type { InferOutputTensor, InferRequest, InferResponse, ModelMetadata, ServerMetadata } from './types.js';
import { validateRequest } from './validate.js';
import { statisticsOf, type ModelStatisticsJson } from '../stats/report.js';

export interface CoreOptions {
  id: string;
  version: string;
  strictReadiness: boolean;
  extensions: string[];
}

export class InferenceCore {
  private accepting = true;

  constructor(
    readonly repository: ModelRepository,
    private readonly options: CoreOptions,
  ) {}

  isLive(): boolean {
    return true;
  }

  /** Ready while serving; with --strict-readiness only when every model is ready too. */
  isReady(): boolean {
    if (!this.accepting) return false;
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

  model(name: string, version: string): ModelVersion {
    return this.repository.get(name, version);
  }

  isModelReady(name: string, version: string): boolean {
    return this.accepting && this.repository.isReady(name, version);
  }

  modelMetadata(name: string, version: string): ModelMetadata {
    const mv = this.repository.get(name, version);
    const c = mv.config;
    const batch = (c.max_batch_size ?? 0) > 0 ? [-1] : [];
    const tensor = (t: { name?: string; data_type?: string; dims?: number[] }) => ({
      name: t.name!,
      datatype: fromConfigType(t.data_type!)!,
      shape: [...batch, ...(t.dims ?? [])],
    });
    return {
      name: mv.name,
      versions: this.repository.readyVersions(name).map(String),
      platform: c.platform ?? '',
      inputs: (c.input ?? []).map(tensor),
      outputs: (c.output ?? []).map(tensor),
    };
  }

  modelConfig(name: string, version: string): ModelConfig {
    return this.repository.get(name, version).config;
  }

  statistics(name: string, version: string): ModelStatisticsJson[] {
    let versions: ModelVersion[];
    if (!name) versions = this.repository.loadedVersions();
    else if (version === '' || version === '-1') {
      this.repository.get(name, ''); // Triton's error for an unknown or unready model
      versions = this.repository.loadedVersions().filter((v) => v.name === name);
    } else versions = [this.repository.get(name, version)];
    return versions.map(statisticsOf);
  }

  /** Repository extension: the index, as rows of name/version/state/reason. */
  repositoryIndex(readyOnly: boolean): Promise<IndexRow[]> {
    return this.repository.repositoryIndex(readyOnly);
  }

  /**
   * Repository extension load. `parameters.config` is a model config in Triton's JSON form
   * (what tritonclient's load_model(config=...) sends) that replaces config.pbtxt.
   */
  async loadModel(name: string, parameters: Record<string, unknown>): Promise<void> {
    let override: ModelConfig | undefined;
    for (const key of Object.keys(parameters)) {
      if (key.startsWith('file:')) {
        throw ServalError.unsupported(`failed to load '${name}': model file overrides ('${key}') are not supported by this server`);
      }
    }
    const config = parameters.config;
    if (config !== undefined) {
      if (typeof config !== 'string') throw ServalError.invalidArg(`failed to load '${name}': the 'config' parameter must be a JSON string`);
      try {
        override = fromTritonConfigJson(config) as ModelConfig;
      } catch (e) {
        throw ServalError.invalidArg(`failed to load '${name}': invalid 'config' parameter: ${(e as Error).message}`);
      }
    }
    await this.repository.load(name, override);
  }

  async unloadModel(name: string): Promise<void> {
    await this.repository.unload(name);
  }

  async infer(req: InferRequest): Promise<InferResponse> {
    const requestStartNs = process.hrtime.bigint();
    if (!this.accepting) throw ServalError.unavailable('Server is shutting down; no new inference requests are accepted');
    const mv = this.repository.get(req.modelName, req.modelVersion);
    const v = validateRequest(req, mv.config);
    const produced = await mv.scheduler.enqueue({
      batchSize: v.batchSize,
      inputs: v.inputs,
      outputs: v.outputs,
      requestStartNs,
      priority: uintParam(req, 'priority'),
      timeoutUs: uintParam(req, 'timeout'),
      cancellation: req.cancellation,
    });
    const byName = new Map(produced.map((o) => [o.name, o]));
    const wanted = req.outputs && req.outputs.length ? req.outputs : v.outputs.map((name) => ({ name, classCount: undefined }));
    const outputs: InferOutputTensor[] = wanted.map((o) => {
      const out = byName.get(o.name)!;
      const cfg = mv.config.output!.find((c) => c.name === o.name)!;
      const shaped = clientShape(out, cfg, v.batchSize);
      if (o.classCount !== undefined && o.classCount > 0) {
        return classify(shaped, o.classCount, v.batchSize > 0, mv.labels.get(o.name));
      }
      return shaped;
    });
    return { modelName: mv.name, modelVersion: String(mv.version), id: req.id, outputs };
  }
}

/** A request parameter that must be a non-negative integer (Triton's `priority`, `timeout`). */
function uintParam(req: InferRequest, key: string): number {
  const v = req.parameters[key];
  if (v === undefined) return 0;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw ServalError.invalidArg(`request parameter '${key}' must be a non-negative integer, got ${JSON.stringify(String(v))}`);
  }
  return n;
}

/** Undo an output `reshape`: clients see the config's `dims` (after the batch dimension). */
function clientShape(out: ScheduledOutput, cfg: ModelOutput, batchSize: number): InferOutputTensor {
  if (!cfg.reshape) return { name: out.name, datatype: out.datatype, shape: out.shape, data: out.data };
  const dims = cfg.dims ?? [];
  const count = elementCount(batchSize > 0 ? out.shape.slice(1) : out.shape);
  const fixed = elementCount(dims.filter((d) => d !== -1));
  const shape = dims.map((d) => (d === -1 ? count / fixed : d));
  return { name: out.name, datatype: out.datatype, shape: batchSize > 0 ? [batchSize, ...shape] : shape, data: out.data };
}

/** Classification extension: the top-k entries per batch item as "value:index[:label]" BYTES. */
function classify(t: InferOutputTensor, k: number, batched: boolean, labels: string[] | undefined): InferOutputTensor {
  if (t.datatype === 'BYTES') throw ServalError.invalidArg("class result not available for output due to unsupported type 'BYTES'");
  const values = numericValues(t.datatype, t.data);
  const rows = batched ? t.shape[0]! : 1;
  const per = values.length / Math.max(1, rows);
  const top = Math.min(k, per);
  const strings: string[] = [];
  for (let r = 0; r < rows; r++) {
    const idx = Array.from({ length: per }, (_, i) => i);
    const base = r * per;
    idx.sort((a, b) => values[base + b]! - values[base + a]! || a - b);
    for (const i of idx.slice(0, top)) {
      const label = labels?.[i];
      strings.push(`${values[base + i]!.toFixed(6)}:${i}${label !== undefined ? `:${label}` : ''}`);
    }
  }
  return { name: t.name, datatype: 'BYTES', shape: batched ? [rows, top] : [top], data: joinBytes(strings) };
}

function numericValues(dt: Exclude<DataType, 'BYTES'>, data: Uint8Array): number[] {
  const view = typedView(dt, data);
  if (dt === 'FP16') return Array.from(view as Uint16Array, halfToFloat);
  return Array.from(view as ArrayLike<number | bigint>, (x) => Number(x));
}
