// Finds models in the repository folders, applies each model's version policy, loads the
// versions and keeps their state (READY / UNAVAILABLE with a reason) for the rest of the server.
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { InstanceHost } from '../backends/backend.js';
import type { BackendRegistry } from '../backends/registry.js';
import { isEnsembleConfig, planEnsemble } from '../config/ensemble.js';
import { parseTextProto } from '../config/pbtxt.js';
import { modelConfigType } from '../config/schema.js';
import type { ModelConfig } from '../config/types.js';
import { validateIo, validateModelConfig } from '../config/validate_config.js';
import { asServalError, ServalError, statusText } from '../kernel/errors.js';
import type { Logger } from '../kernel/log.js';
import type { IndexRow, ModelState } from '../kernel/types.js';
import { EnsembleVersion } from '../model/ensemble.js';
import { runStep, streamStep } from '../model/ensemble_trace.js';
import type { LoadedVersion, VersionLookup } from '../model/loaded_version.js';
import { type LoadOptions, ModelVersion } from '../model/model_version.js';
import { checkDependencies, circularDependency, type DependencyState, dependenciesOf } from './dependencies.js';
import { checkInstanceLimits, type InstanceLimits } from './instance_limit.js';
import { LoadSlots, withRetries } from './load_slots.js';
import { type UploadedModel, type UploadFiles, writeUploadedModel } from './upload.js';

export interface VersionEntry {
  version: number;
  state: ModelState;
  reason: string;
  loaded?: LoadedVersion;
}

export interface ModelEntry {
  name: string;
  dir: string;
  config?: ModelConfig;
  /** A problem with the model as a whole (config, duplicate name); versions may be empty then. */
  reason: string;
  /** The folder's fingerprint when it was last loaded (poll mode). */
  fingerprint: string;
  versions: Map<number, VersionEntry>;
}

async function isDir(p: string): Promise<boolean> {
  return stat(p).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/** Numeric version folders of a model, ascending. */
async function versionFolders(dir: string): Promise<number[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const out: number[] = [];
  for (const n of names) {
    if (/^\d+$/.test(n) && (await isDir(path.join(dir, n)))) out.push(Number(n));
  }
  return out.sort((a, b) => a - b);
}

/** Whether the model's version folders hold model.py and none holds model.onnx. */
async function pythonFolder(dir: string): Promise<boolean> {
  const files = await Promise.all((await versionFolders(dir)).map((v) => readdir(path.join(dir, String(v))).catch(() => [] as string[])));
  return files.some((f) => f.includes('model.py')) && !files.some((f) => f.includes('model.onnx'));
}

/**
 * Which of the available versions the policy serves. As in Triton, a `specific` version without
 * a folder is skipped (and reported by the caller), not loaded as a failure.
 */
export function selectVersions(config: ModelConfig, available: number[]): number[] {
  const policy = config.version_policy ?? { latest: { num_versions: 1 } };
  if (policy.all) return [...available];
  if (policy.specific) {
    return [...(policy.specific.versions ?? [])].filter((v) => available.includes(v)).sort((a, b) => a - b);
  }
  const n = policy.latest?.num_versions ?? 1;
  return available.slice(Math.max(0, available.length - n));
}

/**
 * The config file a model loads with: with --model-config-name NAME, configs/NAME.pbtxt when the
 * folder has one, else config.pbtxt (Triton's fallback, so one flag serves mixed repositories).
 */
export async function modelConfigFile(dir: string, configName = ''): Promise<string> {
  if (configName) {
    const custom = path.join(dir, 'configs', `${configName}.pbtxt`);
    if (
      await stat(custom).then(
        (s) => s.isFile(),
        () => false,
      )
    )
      return custom;
  }
  return path.join(dir, 'config.pbtxt');
}

export async function readModelConfig(dir: string, name: string, allowMissing = false, configName = ''): Promise<ModelConfig> {
  const file = await modelConfigFile(dir, configName);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    // Without a config file, auto-complete builds the whole config from the model file; as in
    // Triton, a version folder with model.py (and no model.onnx) makes it a Python model.
    if (allowMissing && (e as NodeJS.ErrnoException).code === 'ENOENT')
      return (await pythonFolder(dir)) ? { name, backend: 'python' } : { name };
    throw ServalError.invalidArg(
      `model '${name}': cannot read ${name}/${path.relative(dir, file)}: ${(e as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
  let parsed: ModelConfig;
  try {
    parsed = parseTextProto(text, modelConfigType(), path.basename(file)) as ModelConfig;
  } catch (e) {
    throw ServalError.invalidArg(`model '${name}': failed to parse config: ${(e as Error).message}`);
  }
  return named(parsed, name);
}

/** The config as written, named after its folder when it names no model (checked at load). */
function named(config: ModelConfig, name: string): ModelConfig {
  return { ...config, name: config.name || name };
}

export type ControlMode = 'none' | 'poll' | 'explicit';

export interface RepositoryOptions {
  mode: ControlMode;
  /** Models to load at start-up in explicit mode ('*' = all). */
  startupModels: string[];
  autoComplete: boolean;
  /** The backends models may name. */
  backends: BackendRegistry;
  /** The server's response cache (--cache-config), handed to every model version it loads. */
  responseCache?: LoadOptions['responseCache'];
  /** The server's rate limiter (--rate-limit), handed to every model version it loads. */
  rateLimiter?: LoadOptions['rateLimiter'];
  /** The requests in all the server's schedulers, shared by every model version it loads. */
  load?: LoadOptions['load'];
  /** Bounds on the instances a load starts (instance_limit.ts); absent: none. */
  instanceLimits?: InstanceLimits;
  /** --model-config-name: configs/NAME.pbtxt instead of config.pbtxt where a model has it. */
  configName?: string;
  /** --model-load-thread-count: models whose versions load at once (default 4, Triton's). */
  loadThreads?: number;
  /** --model-load-retry-count: further attempts after a version fails to load (default 0). */
  loadRetries?: number;
  /** Shared by the repositories of one server (--model-namespacing); absent: one of its own. */
  loadSlots?: LoadSlots;
  /**
   * --model-namespacing: where a name this repository does not hold resolves (the other
   * repositories), for ensemble steps and BLS requests; absent: nowhere.
   */
  outside?: { version: VersionLookup; dependency: (name: string) => DependencyState };
  /** --model-namespacing: this repository's folder as given, which 2.51's load/unload log lines put before a name. */
  namespace?: string;
}

/** A model folder name that cannot leave the repository (no separators, no dot names, not blank). */
export function isPlainModelName(name: string): boolean {
  return /^[^/\\\0]+$/.test(name) && name.trim() !== '' && name !== '.' && name !== '..' && !name.startsWith('.');
}

/** Triton's answer to a load of a name no model folder answers to (INTERNAL, as tritonserver's). */
function notPolled(name: string): ServalError {
  return ServalError.internal(`failed to load '${name}', failed to poll from model repository`);
}

/**
 * 2.51's text for versions that failed to load (ModelLifeCycle): each version's state and its
 * error as Triton prints a status ("Internal: ..."), without the per-version prefix Serval logs.
 */
function loadFailed(name: string, failures: readonly (readonly [number, ServalError])[]): string {
  const prefix = (v: number): string => `failed to load '${name}' version ${v}: `;
  const why = (v: number, e: ServalError): string => (e.message.startsWith(prefix(v)) ? e.message.slice(prefix(v).length) : e.message);
  return `load failed for model '${name}': ${failures.map(([v, e]) => `version ${v} is at UNAVAILABLE state: ${statusText(e.code)}: ${why(v, e)};\n`).join('')}`;
}

/** A cheap fingerprint of a model folder (names, sizes, mtimes) for poll-mode change detection. */
async function fingerprint(dir: string, depth = 0): Promise<string> {
  const names = (await readdir(dir).catch(() => [] as string[])).sort();
  const parts: string[] = [];
  for (const n of names) {
    const p = path.join(dir, n);
    const st = await stat(p).catch(() => undefined);
    if (!st) continue;
    if (st.isDirectory()) parts.push(`${n}/{${depth < 3 ? await fingerprint(p, depth + 1) : ''}}`);
    else parts.push(`${n}:${st.size}:${st.mtimeMs}`);
  }
  return parts.join(',');
}

/**
 * An ensemble the repository should serve: the config it was loaded (or failed) with, and the
 * state of its composing models it was last checked against. A held ensemble does not serve
 * because of a composing model; it loads again when one of them changes.
 */
interface EnsembleState {
  config: ModelConfig;
  seen: string;
  held: boolean;
}

export class ModelRepository {
  private readonly models = new Map<string, ModelEntry>();
  /** One lifecycle operation per model at a time (loads, unloads, polls). */
  private readonly busy = new Map<string, Promise<void>>();
  /** Counts each model's lifecycle operations: what an ensemble compares its composing models by. */
  private readonly generations = new Map<string, number>();
  private readonly ensembles = new Map<string, EnsembleState>();
  /** Models loaded by name (start-up, a load request), not only as an ensemble's composing model. */
  private readonly explicitlyLoaded = new Set<string>();
  /** Models serving from a folder of uploaded files (load API `file:` parameters), by name. */
  private readonly uploads = new Map<string, UploadedModel>();
  /** How an ensemble reaches its composing models: as a request names a model. */
  private readonly lookup: VersionLookup = (name, version) =>
    this.options.outside && !this.models.has(name) ? this.options.outside.version(name, version) : this.get(name, version);
  private pollTimer: NodeJS.Timeout | undefined;
  /** Loads of models' versions running at once (--model-load-thread-count). */
  private readonly loadSlots: LoadSlots;
  /** What instances call to run requests of their own (Python BLS): the named model, as a client's request. */
  private readonly host: InstanceHost = {
    // A traced call (`parent`) gets a child trace, as an ensemble's step does.
    infer: async (req, parent) => {
      const version = this.lookup(req.modelName, req.modelVersion);
      if (version.decoupled) throw blsDecoupledRefusal(version.name);
      return runStep(version, req, parent);
    },
    stream: (req, sink, parent) => {
      try {
        streamStep(this.lookup(req.modelName, req.modelVersion), req, parent, undefined, sink);
      } catch (e) {
        sink.error(asServalError(e), true);
      }
    },
  };

  constructor(
    private readonly roots: string[],
    private readonly log: Logger,
    private readonly options: RepositoryOptions,
  ) {
    this.loadSlots = options.loadSlots ?? new LoadSlots(Math.max(1, options.loadThreads ?? 4));
  }

  get mode(): ControlMode {
    return this.options.mode;
  }

  /** Model folders across the repositories: name → folders (more than one is a conflict). */
  private async scan(): Promise<Map<string, string[]>> {
    const found = new Map<string, string[]>();
    for (const root of this.roots) {
      let names: string[];
      try {
        names = await readdir(root);
      } catch (e) {
        throw ServalError.invalidArg(`failed to open model repository '${root}': ${(e as Error).message}`);
      }
      for (const n of names.sort()) {
        if (!isPlainModelName(n)) continue;
        const dir = path.join(root, n);
        if (await isDir(dir)) found.set(n, [...(found.get(n) ?? []), dir]);
      }
    }
    return found;
  }

  /** Start-up: every model (modes none and poll) or the --load-model ones (explicit). */
  async loadAll(): Promise<void> {
    const found = await this.scan();
    let names = [...found.keys()];
    if (this.options.mode === 'explicit') {
      const wanted = this.options.startupModels;
      names = wanted.includes('*') ? names : wanted;
    }
    for (const n of names) this.explicitlyLoaded.add(n);
    // Failures are recorded in the index (and the status table), never thrown from here. All
    // start at once: an ensemble waits for its composing models' loads (prepareEnsemble).
    await Promise.all(
      names.map((n) =>
        this.change(n, () => this.loadFrom(n, found.get(n) ?? [])).catch((e: Error) => {
          if (!this.models.has(n)) this.recordFailure(n, '', e.message, undefined);
        }),
      ),
    );
  }

  /** A lifecycle operation of one model, then what it changes for the ensembles that use it. */
  private async change(name: string, op: () => Promise<void>): Promise<void> {
    try {
      await this.serialize(name, op);
    } finally {
      this.changed(name);
      await this.reviseEnsembles();
    }
  }

  private changed(name: string): void {
    this.generations.set(name, (this.generations.get(name) ?? 0) + 1);
  }

  /** The state of an ensemble's composing models, to tell when one of them has changed. */
  private composingState(config: ModelConfig): string {
    return dependenciesOf(config)
      .map((m) => `${m}@${this.generations.get(m) ?? 0}`)
      .join(',');
  }

  /**
   * After a lifecycle change: each ensemble whose composing models changed since it was last
   * checked is checked again (Triton re-validates an ensemble when a model it uses changes); one
   * that no longer fits is unloaded and held, a held one loads again.
   */
  private async reviseEnsembles(): Promise<void> {
    const ops: Promise<void>[] = [];
    for (const [name, state] of this.ensembles) {
      const seen = this.composingState(state.config);
      if (seen === state.seen) continue;
      state.seen = seen;
      if (state.held) {
        ops.push(this.change(name, () => this.loadHeld(name, state.config)));
        continue;
      }
      const entry = this.models.get(name);
      const versions = [...(entry?.versions.values() ?? [])].flatMap((v) => (v.loaded instanceof EnsembleVersion ? [v.loaded] : []));
      try {
        for (const v of versions) v.recheck();
      } catch (e) {
        const reason = (e as Error).message;
        this.log.error('ensemble unloaded: a composing model changed', { model: name, reason });
        state.held = true;
        ops.push(this.change(name, () => this.unloadEntry(name)));
      }
    }
    await Promise.all(ops.map((op) => op.catch(() => undefined)));
  }

  /**
   * A held ensemble loads again with the config it had (Triton keeps a model's config until it is
   * polled), without loading composing models that are not there: that takes a load request.
   */
  private async loadHeld(name: string, config: ModelConfig): Promise<void> {
    if (this.ensembles.get(name)?.held !== true) return;
    const entry = this.models.get(name);
    const dirs = entry?.dir ? [entry.dir] : ((await this.scan()).get(name) ?? []);
    await this.loadFrom(name, dirs, config, false);
  }

  /** Runs lifecycle operations of one model one after another. */
  private serialize(name: string, op: () => Promise<void>): Promise<void> {
    const prev = this.busy.get(name) ?? Promise.resolve();
    const next = prev.then(op, op);
    // The queue entry never rejects; the caller gets `next` with the operation's outcome.
    const tracked: Promise<void> = next
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        if (this.busy.get(name) === tracked) this.busy.delete(name);
      });
    this.busy.set(name, tracked);
    return next;
  }

  /**
   * Loads (or reloads) a model from its folder. The versions that serve now keep serving until
   * every new version is ready; then the new ones take over at once and the old ones drain.
   * If the new load fails, the serving versions stay and the failure is reported.
   */
  private async loadFrom(name: string, dirs: string[], override?: ModelConfig, loadDependencies = true): Promise<void> {
    const old = this.models.get(name);
    if (dirs.length === 0) {
      this.log.error(`failed to poll model '${name}': model not found in any model repository.`);
      throw notPolled(name);
    }
    if (dirs.length > 1) {
      const reason = `model '${name}' appears in more than one model repository (${dirs.length} of them)`;
      this.log.error(`failed to poll model '${name}': not unique across all model repositories`, { dirs: dirs.join(', ') });
      this.recordFailure(name, dirs[0]!, reason, old);
      throw notPolled(name);
    }
    const dir = dirs[0]!;
    const print = await fingerprint(dir);
    const available = await versionFolders(dir);
    let config: ModelConfig;
    try {
      config = override ? named(override, name) : await readModelConfig(dir, name, this.options.autoComplete, this.options.configName);
      // Triton checks the config before it looks for versions, so a broken config shows its own error.
      validateModelConfig(config, name);
      // Without auto-complete the tensors are final already, and Triton checks them here too.
      if (!this.options.autoComplete) validateIo(config, name);
      if (isEnsembleConfig(config)) planEnsemble(config, name);
    } catch (e) {
      this.recordFailure(name, dir, (e as Error).message, old, available, print);
      throw e;
    }
    const wanted = selectVersions(config, available);
    for (const v of config.version_policy?.specific?.versions ?? []) {
      if (!available.includes(v)) this.log.error('model version not found', { model: name, version: v, dir });
    }
    if (wanted.length === 0) {
      const reason = `at least one version must be available under the version policy of model '${name}'`;
      this.recordFailure(name, dir, reason, old, [], print);
      throw ServalError.invalidArg(reason);
    }
    // Before anything starts: a count the machine cannot carry is refused like a config error.
    if (this.options.instanceLimits && !isEnsembleConfig(config)) {
      try {
        checkInstanceLimits(name, config, wanted.length, this.instancesBesides(name), this.options.instanceLimits);
      } catch (e) {
        this.recordFailure(name, dir, (e as Error).message, old, wanted, print);
        throw e;
      }
    }
    // A first load shows LOADING; a reload keeps the serving entry visible meanwhile.
    if (!old || !hasLoaded(old)) {
      const entry: ModelEntry = { name, dir, reason: '', versions: new Map(), fingerprint: print };
      for (const v of wanted) entry.versions.set(v, { version: v, state: 'LOADING', reason: '' });
      this.models.set(name, entry);
    }
    const ensemble = isEnsembleConfig(config);
    if (ensemble) {
      try {
        await this.prepareEnsemble(name, config, loadDependencies);
      } catch (e) {
        this.recordFailure(name, dir, (e as Error).message, old, wanted, print);
        throw e;
      }
    }
    // A slot is taken only here, after an ensemble's composing models loaded: holding one while
    // waiting for them could leave those loads no slot.
    const results = await this.loadSlots.run(() =>
      Promise.allSettled(
        wanted.map((v) =>
          withRetries<LoadedVersion>(
            this.options.loadRetries ?? 0,
            () =>
              ensemble
                ? EnsembleVersion.load(config, name, dir, v, this.lookup, this.options.responseCache)
                : ModelVersion.load(config, name, dir, v, {
                    autoComplete: this.options.autoComplete,
                    backends: this.options.backends,
                    host: this.host,
                    ...(this.options.responseCache && { responseCache: this.options.responseCache }),
                    ...(this.options.rateLimiter && { rateLimiter: this.options.rateLimiter }),
                    ...(this.options.load && { load: this.options.load }),
                  }),
            (e, attempt) =>
              this.log.warn(`failed to load '${name}' version ${v}, retrying (retry ${attempt} of ${this.options.loadRetries})`, {
                reason: e.message,
              }),
          ),
        ),
      ),
    );
    const failures = results.flatMap((r, i) => (r.status === 'rejected' ? [[wanted[i]!, (r.reason as Error).message] as const] : []));
    const loaded: LoadedVersion[] = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    if (ensemble) this.noteEnsemble(name, config, loaded.length === 0);
    if (failures.length && old && hasLoaded(old)) {
      // Keep serving what serves; report why the new files did not take.
      await Promise.allSettled(loaded.map((mv) => mv.unload()));
      old.reason = `reload failed, still serving the previous version(s): ${failures.map(([v, r]) => `version ${v}: ${r}`).join('; ')}`;
      old.fingerprint = print;
      this.log.error('model reload failed', { model: name, reason: old.reason });
      throw ServalError.invalidArg(`failed to load '${name}': ${old.reason}`);
    }
    const entry: ModelEntry = { name, dir, config, reason: '', versions: new Map(), fingerprint: print };
    for (const mv of loaded) entry.versions.set(mv.version, { version: mv.version, state: 'READY', reason: '', loaded: mv });
    for (const [v, reason] of failures) entry.versions.set(v, { version: v, state: 'UNAVAILABLE', reason });
    this.models.set(name, entry); // the switch: new requests go to the new versions from here on
    // tritonserver's texts, so greps written for its logs find these lines.
    for (const _ of loaded) this.log.info(`successfully loaded '${this.logName(name)}'`); // 2.51 names no version here
    if (old) await this.drainEntry(old);
    if (failures.length) {
      for (const [v, reason] of failures) this.log.error(`failed to load '${name}' version ${v}: ${reason}`);
      const errors = results.flatMap((r, i) => (r.status === 'rejected' ? [[wanted[i]!, asServalError(r.reason)] as const] : []));
      throw ServalError.invalidArg(loadFailed(name, errors));
    }
  }

  /**
   * Before an ensemble's versions load: its section's own checks and no cycle through it (its
   * fault: it is not retried), then its composing models loaded first (a load under way finishes;
   * explicit mode loads the missing ones, as Triton's load follows an ensemble's steps), then each
   * of them there and ready (else it is held until one of them changes).
   */
  private async prepareEnsemble(name: string, config: ModelConfig, loadDependencies: boolean): Promise<void> {
    try {
      planEnsemble(config, name);
      const configs = await this.configsReachable(config);
      const cycle = circularDependency(name, (n) => (n === name ? config : configs.get(n)));
      if (cycle) throw ServalError.invalidArg(cycle);
    } catch (e) {
      this.ensembles.delete(name);
      throw e;
    }
    const deps = dependenciesOf(config);
    const found = this.options.mode === 'explicit' && loadDependencies ? await this.scan() : undefined;
    await Promise.all(
      deps.map(async (m) => {
        await this.busy.get(m);
        const dirs = found?.get(m);
        if (!dirs?.length) return;
        const entry = this.models.get(m);
        if (entry && hasReady(entry) && dirs.length === 1 && entry.fingerprint === (await fingerprint(dirs[0]!))) return;
        await this.serialize(m, () => this.loadFrom(m, dirs)).catch(() => undefined);
        this.changed(m);
      }),
    );
    try {
      checkDependencies(
        name,
        config,
        deps.map((m) => this.dependencyState(m)),
      );
    } catch (e) {
      this.noteEnsemble(name, config, true);
      throw e;
    }
  }

  /** Remembers an ensemble to serve, held or not, against its composing models as they are now. */
  private noteEnsemble(name: string, config: ModelConfig, held: boolean): void {
    this.ensembles.set(name, { config, seen: this.composingState(config), held });
  }

  /** The configs of the models an ensemble reaches through its steps (loaded ones', else the folder's). */
  private async configsReachable(config: ModelConfig): Promise<Map<string, ModelConfig>> {
    const configs = new Map<string, ModelConfig>();
    let found: Map<string, string[]> | undefined;
    const todo = dependenciesOf(config);
    for (let m = todo.pop(); m !== undefined; m = todo.pop()) {
      if (configs.has(m)) continue;
      let c = this.models.get(m)?.config ?? this.ensembles.get(m)?.config;
      if (!c) {
        found ??= await this.scan();
        const dirs = found.get(m);
        if (dirs?.length === 1)
          c = await readModelConfig(dirs[0]!, m, this.options.autoComplete, this.options.configName).catch(() => undefined);
      }
      if (!c) continue;
      configs.set(m, c);
      todo.push(...dependenciesOf(c));
    }
    return configs;
  }

  /** What an ensemble being loaded needs to know of one of its composing models. */
  dependencyState(name: string): DependencyState {
    if (this.options.outside && !this.models.has(name) && !this.ensembles.has(name)) return this.options.outside.dependency(name);
    const entry = this.models.get(name);
    const config = entry?.config ?? this.ensembles.get(name)?.config;
    const failed = [...(entry?.versions.values() ?? [])].find((v) => v.reason && v.reason !== 'unloaded');
    return { name, config, ready: this.readyVersions(name), reason: entry?.reason || failed?.reason || '' };
  }

  /** The instances of every loaded version of the models other than `name`. */
  private instancesBesides(name: string): number {
    let n = 0;
    for (const [m, entry] of this.models) {
      if (m === name) continue;
      for (const v of entry.versions.values()) n += v.loaded?.config.instances.length ?? 0;
    }
    return n;
  }

  private recordFailure(name: string, dir: string, reason: string, old: ModelEntry | undefined, versions: number[] = [], print = ''): void {
    this.log.error('model load failed', { model: name, reason });
    if (old && hasLoaded(old)) {
      old.reason = `reload failed, still serving the previous version(s): ${reason}`;
      old.fingerprint = print;
      return;
    }
    const entry: ModelEntry = { name, dir, reason, versions: new Map(), fingerprint: print };
    for (const v of versions.slice(-1)) entry.versions.set(v, { version: v, state: 'UNAVAILABLE', reason });
    this.models.set(name, entry);
  }

  /** A model's name in log lines: `<repository>::<name>` under --model-namespacing, as 2.51's. */
  private logName(name: string): string {
    return this.options.namespace === undefined ? name : `${this.options.namespace}::${name}`;
  }

  /** Waits for an entry's in-flight requests, then stops its instances. */
  private async drainEntry(entry: ModelEntry): Promise<void> {
    await Promise.allSettled(
      [...entry.versions.values()].map(async (v) => {
        if (!v.loaded) return;
        v.state = 'UNLOADING';
        await v.loaded.unload();
        v.state = 'UNAVAILABLE';
        v.reason = 'unloaded';
        v.loaded = undefined;
        this.log.info(`successfully unloaded '${this.logName(entry.name)}' version ${v.version}`); // tritonserver's line
      }),
    );
  }

  /**
   * Repository API load (explicit mode): loads or reloads, optionally with a config override and
   * uploaded model files (upload.ts: they replace the repository's folder for this model; a later
   * load without files loads from the repository again, as in Triton).
   */
  async load(name: string, override?: ModelConfig, files?: UploadFiles): Promise<void> {
    this.requireExplicit();
    // A name that is not a plain folder name (empty, blank, '..', a path) names no model: Triton's
    // answer for it, without ever looking outside the repositories.
    if (!isPlainModelName(name)) {
      this.log.error(`failed to poll model '${name}': model not found in any model repository.`);
      throw notPolled(name);
    }
    const upload = files && (await writeUploadedModel(name, files));
    const found = upload ? undefined : await this.scan();
    this.explicitlyLoaded.add(name);
    try {
      await this.change(name, () => this.loadFrom(name, upload ? [upload.dir] : (found?.get(name) ?? []), override));
    } finally {
      await this.settleUploads(name, upload);
    }
  }

  /**
   * After a load or unload of `name`: the uploaded folder its versions now load from is kept, any
   * other (the one they used before, or a new one whose load failed) is removed. The entry's old
   * versions were drained by then.
   */
  private async settleUploads(name: string, fresh?: UploadedModel): Promise<void> {
    const entry = this.models.get(name);
    const serving = (u: UploadedModel | undefined): boolean => u !== undefined && entry?.dir === u.dir && hasLoaded(entry);
    const current = this.uploads.get(name);
    if (fresh && serving(fresh)) this.uploads.set(name, fresh);
    else await fresh?.remove();
    if (current && (this.uploads.get(name) !== current || !serving(current))) {
      if (this.uploads.get(name) === current) this.uploads.delete(name);
      await current.remove();
    }
  }

  /**
   * Repository API unload (explicit mode): in-flight requests finish first. The ensembles that use
   * the model stop serving (held: they serve again when it loads again). With `unloadDependents`,
   * an ensemble's composing models go too, those that were loaded only for it (not by name) and
   * that no other ensemble uses, as Triton's unload_dependents does.
   */
  async unload(name: string, unloadDependents = false): Promise<void> {
    this.requireExplicit();
    const config = this.models.get(name)?.config ?? this.ensembles.get(name)?.config;
    this.explicitlyLoaded.delete(name);
    this.ensembles.delete(name);
    await this.change(name, async () => {
      const entry = this.models.get(name);
      if (!entry || !hasLoaded(entry)) {
        if (entry) return;
        throw ServalError.invalidArg(`failed to unload '${name}': model is not loaded`);
      }
      await this.unloadEntry(name);
    });
    await this.settleUploads(name);
    if (!unloadDependents) return;
    for (const m of dependenciesOf(config)) {
      const used = [...this.ensembles.values()].some((e) => dependenciesOf(e.config).includes(m));
      if (used || this.explicitlyLoaded.has(m) || !this.readyVersions(m).length) continue;
      await this.unload(m, true);
    }
  }

  /** Stops a model's versions (in-flight requests finish first); it stays in the index as unloaded. */
  private async unloadEntry(name: string): Promise<void> {
    const entry = this.models.get(name);
    if (!entry || !hasLoaded(entry)) return;
    const gone: ModelEntry = { name, dir: entry.dir, reason: '', versions: new Map(), fingerprint: '' };
    for (const v of entry.versions.keys()) gone.versions.set(v, { version: v, state: 'UNLOADING', reason: '' });
    this.models.set(name, gone);
    await this.drainEntry(entry);
    for (const v of gone.versions.values()) {
      v.state = 'UNAVAILABLE';
      v.reason = 'unloaded';
    }
  }

  private requireExplicit(): void {
    if (this.options.mode !== 'explicit') {
      throw ServalError.unavailable('explicit model load / unload is not allowed if polling is enabled');
    }
  }

  /** Poll mode: load new folders, reload changed ones, unload removed ones. */
  async poll(): Promise<void> {
    let found: Map<string, string[]>;
    try {
      found = await this.scan();
    } catch (e) {
      this.log.error('failed to poll model repository', { reason: (e as Error).message });
      return;
    }
    // Every change is known before any starts: an ensemble then waits for its models' reloads.
    const changed: [string, string[]][] = [];
    for (const [name, dirs] of found) {
      const entry = this.models.get(name);
      const print = dirs.length === 1 ? await fingerprint(dirs[0]!) : 'conflict';
      if (entry && entry.fingerprint === print) continue;
      changed.push([name, dirs]);
    }
    const ops = changed.map(([name, dirs]) => this.change(name, () => this.loadFrom(name, dirs)).catch(() => undefined));
    for (const [name, entry] of this.models) {
      if (found.has(name)) continue;
      this.ensembles.delete(name);
      if (!hasLoaded(entry)) {
        this.models.delete(name);
        continue;
      }
      ops.push(
        this.change(name, async () => {
          const e = this.models.get(name);
          if (!e) return;
          this.models.delete(name);
          await this.drainEntry(e);
          this.log.info('model unloaded (folder removed)', { model: name });
        }),
      );
    }
    await Promise.all(ops);
  }

  startPolling(periodSecs: number): void {
    if (this.options.mode !== 'poll' || periodSecs <= 0) return;
    const tick = (): void => {
      this.pollTimer = setTimeout(() => void this.poll().finally(() => this.pollTimer && tick()), periodSecs * 1000);
    };
    tick();
  }

  stopPolling(): void {
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
  }

  /**
   * The version a request names ('' = highest ready), with Triton's errors: an unknown name or
   * version is NOT_FOUND, a version that is not ready UNAVAILABLE.
   */
  get(name: string, version: string): LoadedVersion {
    const entry = this.models.get(name);
    if (!entry) throw ServalError.notFound(`Request for unknown model: '${name}' is not found`);
    if (version === '' || version === '-1') {
      // The highest ready version, without allocating: this runs for every request, some times over.
      let best: VersionEntry | undefined;
      for (const v of entry.versions.values()) if (v.state === 'READY' && (!best || v.version > best.version)) best = v;
      if (!best) throw ServalError.notFound(`Request for unknown model: '${name}' has no available versions`);
      return best.loaded!;
    }
    if (!/^\d+$/.test(version)) {
      throw ServalError.invalidArg(`failed to parse model version '${version}' of model '${name}': versions are non-negative integers`);
    }
    const ve = entry.versions.get(Number(version));
    if (!ve) throw ServalError.notFound(`Request for unknown model: '${name}' version ${version} is not found`);
    if (ve.state !== 'READY') {
      throw ServalError.unavailable(`Request for unknown model: '${name}' version ${version} is not at ready state`);
    }
    return ve.loaded!;
  }

  /** Held ensembles try again: with --model-namespacing a composing model in another repository may have changed. */
  async retryHeldEnsembles(): Promise<void> {
    const held = [...this.ensembles].filter(([, state]) => state.held);
    await Promise.all(held.map(([name, state]) => this.change(name, () => this.loadHeld(name, state.config)).catch(() => undefined)));
  }

  /** Whether the repository has an entry for the name (loaded, loading or failed). */
  knows(name: string): boolean {
    return this.models.has(name);
  }

  /** True when the name (and version, if given) is known and ready. */
  isReady(name: string, version: string): boolean {
    try {
      this.get(name, version);
      return true;
    } catch {
      return false;
    }
  }

  readyVersions(name: string): number[] {
    const entry = this.models.get(name);
    if (!entry) return [];
    return [...entry.versions.values()]
      .filter((v) => v.state === 'READY')
      .map((v) => v.version)
      .sort((a, b) => a - b);
  }

  /** All loaded model versions (for statistics). */
  loadedVersions(): LoadedVersion[] {
    const out: LoadedVersion[] = [];
    for (const e of this.models.values()) for (const v of e.versions.values()) if (v.loaded && v.state === 'READY') out.push(v.loaded);
    return out.sort((a, b) => a.name.localeCompare(b.name) || a.version - b.version);
  }

  /** One row per model version (or per model when it failed before versions), sorted. */
  index(): IndexRow[] {
    const rows: IndexRow[] = [];
    for (const e of [...this.models.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      if (e.versions.size === 0) rows.push({ name: e.name, version: '', state: 'UNAVAILABLE', reason: e.reason });
      for (const v of [...e.versions.values()].sort((a, b) => a.version - b.version)) {
        rows.push({ name: e.name, version: String(v.version), state: v.state, reason: v.reason || e.reason });
      }
    }
    return rows;
  }

  /** The repository index API: every model folder, with state where the model was loaded. */
  async repositoryIndex(readyOnly: boolean): Promise<IndexRow[]> {
    const found = await this.scan();
    const rows = this.index().filter((r) => found.has(r.name) || r.state !== 'UNAVAILABLE' || r.reason !== 'unloaded');
    const known = new Set(rows.map((r) => r.name));
    for (const name of found.keys()) if (!known.has(name)) rows.push({ name, version: '', state: '', reason: '' });
    rows.sort((a, b) => a.name.localeCompare(b.name) || Number(a.version) - Number(b.version));
    return readyOnly ? rows.filter((r) => r.state === 'READY') : rows;
  }

  allReady(): boolean {
    return this.index().every((r) => r.state === 'READY');
  }

  async unloadAll(): Promise<void> {
    this.stopPolling();
    // Ensembles first: their requests in flight still reach their composing models.
    const entries = [...this.models.values()];
    const ensemble = (e: ModelEntry): boolean => [...e.versions.values()].some((v) => v.loaded instanceof EnsembleVersion);
    await Promise.allSettled(entries.filter(ensemble).map((e) => this.drainEntry(e)));
    await Promise.allSettled(entries.filter((e) => !ensemble(e)).map((e) => this.drainEntry(e)));
    await Promise.allSettled([...this.uploads.values()].map((u) => u.remove()));
    this.uploads.clear();
  }
}

function hasLoaded(entry: ModelEntry): boolean {
  return [...entry.versions.values()].some((v) => v.loaded !== undefined);
}

function hasReady(entry: ModelEntry): boolean {
  return [...entry.versions.values()].some((v) => v.state === 'READY');
}

/** Triton's Python backend's answer to a one-response BLS request (exec() without decoupled=True) into a decoupled model, stray quote included. */
function blsDecoupledRefusal(model: string): ServalError {
  return ServalError.invalidArg(
    `Model ${model} - Error when running inference: Model ${model} is using the decoupled. The current BLS request call doesn't support models using the decoupled transaction policy. Please use 'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled models.'`,
  );
}
