// Where each model instance runs: expands `instance_group` into one placement per instance,
// following Triton's rules, and checks that what a group asks for exists on this machine.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { InstancePlacement, PlacedInstances } from '../../config/resolved.js';
import type { ModelConfig, ModelInstanceGroup } from '../../config/types.js';
import { ServalError } from '../../kernel/errors.js';

export interface DeviceEnvironment {
  /** CUDA device ids visible to this process. */
  gpus: number[];
  /** Whether ONNX Runtime's CUDA execution provider library is installed. */
  cudaProvider: boolean;
  /** Where the CUDA provider library was looked for (for error messages). */
  cudaProviderPath: string;
  cpus: number;
}

let cachedEnv: DeviceEnvironment | undefined;

/** Probes the machine once: visible GPUs (nvidia-smi) and the CUDA provider library. */
export function probeDevices(): DeviceEnvironment {
  if (cachedEnv) return cachedEnv;
  let gpus: number[] = [];
  try {
    const out = execFileSync('nvidia-smi', ['-L'], { encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'ignore'] });
    gpus = out
      .split('\n')
      .filter((l) => /^GPU \d+/.test(l))
      .map((_, i) => i);
  } catch {
    gpus = [];
  }
  const visible = process.env.CUDA_VISIBLE_DEVICES;
  if (visible !== undefined && gpus.length) {
    const n = visible.split(',').filter((s) => s.trim() !== '' && Number(s) >= 0).length;
    gpus = gpus.slice(0, n);
  }
  const require = createRequire(import.meta.url);
  const pkgDir = path.dirname(require.resolve('onnxruntime-node/package.json'));
  const cudaProviderPath = path.join(pkgDir, 'bin', 'napi-v6', process.platform, process.arch, 'libonnxruntime_providers_cuda.so');
  cachedEnv = { gpus, cudaProvider: existsSync(cudaProviderPath), cudaProviderPath, cpus: os.availableParallelism() };
  return cachedEnv;
}

/**
 * Triton's normalisation of `instance_group`: no groups means one KIND_AUTO group named `<model>`;
 * each other group gets a name (`<model>_<index>`) and a count (1); KIND_AUTO becomes KIND_GPU when a usable
 * GPU exists, else KIND_CPU. The result is what the model's /config reports.
 */
export function normalizeInstanceGroups(
  modelName: string,
  groups: ModelInstanceGroup[] | undefined,
  env: DeviceEnvironment,
): ModelInstanceGroup[] {
  // The group Triton adds to a config without one is named after the model itself.
  const list: ModelInstanceGroup[] = groups?.length ? groups : [{ name: modelName, kind: 'KIND_AUTO' }];
  const gpuUsable = env.gpus.length > 0 && env.cudaProvider;
  return list.map((g, gi) => {
    const kind = (g.kind ?? 'KIND_AUTO') === 'KIND_AUTO' ? (gpuUsable ? 'KIND_GPU' : 'KIND_CPU') : (g.kind ?? 'KIND_AUTO');
    return { ...g, name: g.name || `${modelName}_${gi}`, kind, count: g.count ?? 1 };
  });
}

/**
 * Triton's instance placement: each group gives `count` instances; a GPU group gives `count`
 * instances on each of its `gpus` (default: every visible GPU).
 */
export function placeInstances(modelName: string, groups: ModelInstanceGroup[] | undefined, env: DeviceEnvironment): InstancePlacement[] {
  return placeNormalized(modelName, normalizeInstanceGroups(modelName, groups, env), env);
}

function placeNormalized(modelName: string, groups: ModelInstanceGroup[], env: DeviceEnvironment): InstancePlacement[] {
  const out: InstancePlacement[] = [];
  for (const g of groups) {
    const groupName = g.name ?? '';
    const count = g.count ?? 1;
    const kind = g.kind ?? 'KIND_AUTO';
    if (!Number.isInteger(count) || count < 0) {
      throw ServalError.invalidArg(`instance group '${groupName}' of model '${modelName}' has invalid count ${count}`);
    }
    if (kind === 'KIND_CPU') {
      if (g.gpus?.length) {
        // Triton's texts (ValidateInstanceGroup), so the error people search for is the same.
        throw ServalError.invalidArg(`instance group ${groupName} of model ${modelName} has kind KIND_CPU but specifies one or more GPUs`);
      }
      for (let c = 0; c < count; c++) out.push({ name: `${groupName}_${c}`, kind: 'KIND_CPU', deviceId: -1 });
      continue;
    }
    if (kind !== 'KIND_GPU') {
      throw ServalError.unsupported(
        `instance group '${groupName}' of model '${modelName}' has kind ${kind}, which the onnxruntime backend does not support`,
      );
    }
    if (env.gpus.length === 0) {
      throw ServalError.invalidArg(
        `instance group ${groupName} of model ${modelName} has kind KIND_GPU but no GPUs are available ` +
          `(nvidia-smi found none${process.env.CUDA_VISIBLE_DEVICES !== undefined ? `, CUDA_VISIBLE_DEVICES='${process.env.CUDA_VISIBLE_DEVICES}'` : ''}); ` +
          `use KIND_CPU or KIND_AUTO to run on the CPU`,
      );
    }
    if (!env.cudaProvider) {
      throw ServalError.unavailable(
        `instance group '${groupName}' of model '${modelName}' has kind KIND_GPU, but ONNX Runtime's CUDA execution provider ` +
          `is not installed (${env.cudaProviderPath} is missing); install onnxruntime-node with its CUDA binaries ` +
          `(ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.js, see README "GPU deployment")`,
      );
    }
    const devices = g.gpus?.length ? g.gpus : env.gpus;
    for (const d of devices) {
      if (!env.gpus.includes(d)) {
        // Triton's text; Serval does not check the compute capability, so it names Triton's default minimum.
        throw ServalError.invalidArg(
          `instance group ${groupName} of model ${modelName} specifies invalid or unsupported gpu id ${d}. ` +
            `GPUs with at least the minimum required CUDA compute compatibility of 6.000000 are: ${env.gpus.join(', ')}`,
        );
      }
      for (let c = 0; c < count; c++) out.push({ name: `${groupName}_${c}_gpu${d}`, kind: 'KIND_GPU', deviceId: d });
    }
  }
  if (out.length === 0) throw ServalError.invalidArg(`model '${modelName}' has no model instances (every instance group has count 0)`);
  return out;
}

/**
 * Per-instance thread settings: intra-op threads from the model's parameter, else the cores shared
 * among its CPU instances; ORT's intra-op spinning from `session.intra_op.allow_spinning`, else off.
 */
export function threadCounts(
  parameters: Record<string, { string_value?: string }> | undefined,
  cpuInstances: number,
  cpus: number,
): Pick<OrtSettings, 'intraOpThreads' | 'interOpThreads' | 'allowSpinning' | 'sharedIntraOpThreads'> {
  const read = (key: string): number | undefined => {
    const v = parameters?.[key]?.string_value;
    if (v === undefined || v === '') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw ServalError.invalidArg(`parameter '${key}' must be a non-negative integer, got '${v}'`);
    return n;
  };
  // 0 means "runtime default" in Triton's ORT backend, which is all cores: oversubscribed with
  // several instances, so Serval divides the cores instead.
  const explicitIntra = read('intra_op_thread_count');
  const intra = explicitIntra || Math.max(1, Math.floor(cpus / Math.max(1, cpuInstances)));
  const inter = read('inter_op_thread_count') || 1;
  // Spinning intra-op threads keep a core busy after every run, taking it from the main thread
  // that decodes the next requests (measured in docs/benchmarks.md); ORT's own default is on.
  const spin = parameters?.['session.intra_op.allow_spinning']?.string_value;
  if (spin !== undefined && spin !== '0' && spin !== '1') {
    throw ServalError.invalidArg(`parameter 'session.intra_op.allow_spinning' must be '0' or '1', got '${spin}'`);
  }
  // On a shared worker one session runs at a time, so a pool of its own per session would be
  // idle threads: one (the worker itself) unless the model asks for more.
  return { intraOpThreads: intra, interOpThreads: inter, allowSpinning: spin === '1', sharedIntraOpThreads: explicitIntra || 1 };
}

/** What every instance of a model starts its session with. */
export interface OrtSettings {
  intraOpThreads: number;
  interOpThreads: number;
  /** ORT's session.intra_op.allow_spinning: idle intra-op threads busy-wait for work. */
  allowSpinning: boolean;
  graphOptimizationLevel: 'disabled' | 'basic' | 'extended' | 'all';
  /** intraOpThreads when the instance runs on a shared worker (host.ts); 1 if not given. */
  sharedIntraOpThreads?: number;
}

/** `--backend-config=onnxruntime,...`: how small CPU instances share worker threads (host.ts). */
export interface SharingSettings {
  /** Shared workers at most; 0: every instance has a worker of its own. */
  sharedWorkers: number;
  /** A CPU instance shares a worker when its model's files (the version directory) total at most this. */
  sharedModelMaxBytes: number;
}

export const SHARING_KEYS = ['shared-workers', 'shared-model-max-bytes'] as const;

export function defaultSharing(cpus: number = os.availableParallelism()): SharingSettings {
  return { sharedWorkers: Math.max(1, cpus), sharedModelMaxBytes: 256 * 1024 };
}

/**
 * Reads the sharing settings from the onnxruntime backend's `--backend-config` entries; throws on a
 * bad value. Other keys are left alone: Triton command lines pass its ORT backend's own settings.
 */
export function parseSharing(entries: ReadonlyMap<string, string> | undefined, cpus?: number): SharingSettings {
  const out = defaultSharing(cpus);
  for (const [key, value] of entries ?? []) {
    if (!(SHARING_KEYS as readonly string[]).includes(key)) continue;
    const n = Number(value);
    if (value.trim() === '' || !Number.isInteger(n) || n < 0) {
      throw new Error(`--backend-config: onnxruntime,${key} must be a non-negative integer, got '${value}'`);
    }
    if (key === 'shared-workers') out.sharedWorkers = n;
    else out.sharedModelMaxBytes = n;
  }
  return out;
}

/** What the choice of a shared worker needs to know of one. */
export interface SharedWorkerLoad {
  sessions: number;
  /** Model keys (model file paths) it hosts. */
  models: ReadonlySet<string>;
}

/**
 * The shared worker slot for an instance of `model`: the least loaded one that hosts no other
 * instance of the same model (a worker runs one session at a time, so two instances of a model on
 * one worker would take turns instead of running in parallel); an empty slot counts as a worker
 * with no sessions (started on demand). Undefined: every slot hosts this model, so the instance
 * gets a worker of its own.
 */
export function chooseSharedWorker(slots: readonly (SharedWorkerLoad | undefined)[], model: string): number | undefined {
  let best: number | undefined;
  let bestLoad = Number.POSITIVE_INFINITY;
  slots.forEach((w, i) => {
    if (w?.models.has(model)) return;
    const load = w?.sessions ?? 0;
    if (load < bestLoad) {
      best = i;
      bestLoad = load;
    }
  });
  return best;
}

/** The whole placement of a model on this machine: groups, one placement per instance, settings. */
export function placeModel(config: ModelConfig, env: DeviceEnvironment = probeDevices()): PlacedInstances<OrtSettings> {
  const name = config.name ?? '';
  const groups = normalizeInstanceGroups(name, config.instance_group, env);
  const placements = placeNormalized(name, groups, env);
  const cpuInstances = placements.filter((p) => p.kind === 'KIND_CPU').length;
  const level = config.optimization?.graph?.level;
  return {
    groups,
    placements,
    settings: { ...threadCounts(config.parameters, cpuInstances, env.cpus), graphOptimizationLevel: level === -1 ? 'basic' : 'all' },
  };
}
