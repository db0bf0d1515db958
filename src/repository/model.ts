// A loaded model version: its config, its instances and the scheduler in front of them.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ModelInstance } from '../backends/backend.js';
import { OrtInstance } from '../backends/onnxruntime/instance.js';
import { normalizeInstanceGroups, placeInstances, probeDevices, threadCounts } from '../backends/onnxruntime/placement.js';
import { DEFAULT_MODEL_FILENAME, normalizeConfig, validateAgainstModel } from '../config/model_config.js';
import { autoCompleteConfig } from '../config/autocomplete.js';
import { warmupRequests } from './warmup.js';
import type { ModelConfig } from '../config/types.js';
import { ServalError } from '../core/errors.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { batchingPolicy } from '../scheduler/policy.js';
import { ModelStats } from '../stats/model_stats.js';

export type ModelState = 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';

export class ModelVersion {
  /** Labels per output name, from each output's label_filename. */
  readonly labels = new Map<string, string[]>();

  private constructor(
    readonly name: string,
    readonly version: number,
    readonly config: ModelConfig,
    readonly instances: ModelInstance[],
    readonly scheduler: Scheduler,
    readonly stats: ModelStats,
  ) {}

  /**
   * Loads one version from a parsed (not yet normalised) config: starts the instances, fills
   * the config from the model file when auto-complete is on, validates it against the model
   * file, runs the warm-up samples on every instance, and only then returns (ready).
   */
  static async load(
    parsed: ModelConfig,
    modelDir: string,
    version: number,
    opts: { autoComplete: boolean } = { autoComplete: true },
  ): Promise<ModelVersion> {
    let config = parsed;
    const name = config.name || path.basename(modelDir);
    const file = path.join(modelDir, String(version), config.default_model_filename || DEFAULT_MODEL_FILENAME);
    const env = probeDevices();
    const placements = placeInstances(name, config.instance_group, env);
    const cpuInstances = placements.filter((p) => p.kind === 'KIND_CPU').length;
    const threads = threadCounts(config.parameters, cpuInstances, env.cpus);
    const level = config.optimization?.graph?.level;
    const started = await Promise.allSettled(
      placements.map((p) =>
        OrtInstance.start(p, {
          modelPath: file,
          intraOpThreads: threads.intra,
          interOpThreads: threads.inter,
          allowSpinning: threads.allowSpinning,
          cudaDeviceId: p.deviceId,
          graphOptimizationLevel: level === -1 ? 'basic' : 'all',
        }),
      ),
    );
    const instances = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failure = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    try {
      if (failure) {
        const reason = failure.reason instanceof Error ? failure.reason.message : String(failure.reason);
        throw ServalError.invalidArg(`failed to load '${name}' version ${version}: ${reason}`);
      }
      const signature = instances[0]!.signature;
      if (opts.autoComplete) config = autoCompleteConfig(config, signature);
      config = normalizeConfig(config, name);
      config.instance_group = normalizeInstanceGroups(name, config.instance_group, env);
      validateAgainstModel(config, signature);
      await warmUp(config, modelDir, instances);
      const labels = new Map<string, string[]>();
      for (const out of config.output ?? []) {
        if (!out.label_filename) continue;
        const text = await readFile(path.join(modelDir, out.label_filename), 'utf8').catch((e: Error) => {
          throw ServalError.invalidArg(`model '${name}': cannot read label file '${out.label_filename}' of output '${out.name}': ${e.message}`);
        });
        labels.set(out.name!, text.split(/\r?\n/).filter((l, i, all) => l !== '' || i < all.length - 1));
      }
      const stats = new ModelStats();
      const scheduler = new Scheduler(instances, batchingPolicy(config), stats);
      const mv = new ModelVersion(name, version, config, instances, scheduler, stats);
      for (const [k, v] of labels) mv.labels.set(k, v);
      return mv;
    } catch (e) {
      await Promise.allSettled(instances.map((i) => i.close()));
      throw e;
    }
  }

  /** Waits for queued and running requests, then stops the instances. */
  async unload(): Promise<void> {
    await this.scheduler.drain();
    await Promise.allSettled(this.instances.map((i) => i.close()));
  }
}

/** Runs every model_warmup sample `count` times on every instance (Triton warms each instance). */
async function warmUp(config: ModelConfig, modelDir: string, instances: ModelInstance[]): Promise<void> {
  const samples = await warmupRequests(config, modelDir);
  if (!samples.length) return;
  await Promise.all(
    instances.map(async (inst) => {
      for (const s of samples) {
        for (let i = 0; i < Math.max(1, s.count); i++) {
          await inst.execute(s.req).catch((e: Error) => {
            throw ServalError.invalidArg(`model '${config.name}': warmup sample '${s.name}' failed on ${inst.placement.name}: ${e.message}`);
          });
        }
      }
    }),
  );
}
