// Finds models in the repository folders, applies each model's version policy, loads the
// versions and keeps their state (READY / UNAVAILABLE with a reason) for the rest of the server.
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { normalizeConfig } from '../config/model_config.js';
import { parseTextProto } from '../config/pbtxt.js';
import { modelConfigType } from '../config/schema.js';
import type { ModelConfig } from '../config/types.js';
import { ServalError } from '../core/errors.js';
import type { Logger } from '../log.js';
import { ModelVersion, type ModelState } from './model.js';

export interface VersionEntry {
  version: number;
  state: ModelState;
  reason: string;
  loaded?: ModelVersion;
}

export interface ModelEntry {
  name: string;
  dir: string;
  config?: ModelConfig;
  /** A problem with the model as a whole (config, duplicate name); versions may be empty then. */
  reason: string;
  versions: Map<number, VersionEntry>;
}

export interface IndexRow {
  name: string;
  version: string;
  state: ModelState | '';
  reason: string;
}

async function isDir(p: string): Promise<boolean> {
  return stat(p).then((s) => s.isDirectory(), () => false);
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

export async function readModelConfig(dir: string, name: string): Promise<ModelConfig> {
  const file = path.join(dir, 'config.pbtxt');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw ServalError.invalidArg(`model '${name}': cannot read ${file}: ${(e as Error).message}`);
  }
  let parsed: ModelConfig;
  try {
    parsed = parseTextProto(text, modelConfigType(), file) as ModelConfig;
  } catch (e) {
    throw ServalError.invalidArg(`model '${name}': failed to parse config: ${(e as Error).message}`);
  }
  return normalizeConfig(parsed, name);
}

export class ModelRepository {
  private readonly models = new Map<string, ModelEntry>();

  constructor(
    private readonly roots: string[],
    private readonly log: Logger,
  ) {}

  /** Scans every repository and loads every model found; failures are recorded, never thrown. */
  async loadAll(): Promise<void> {
    const found = new Map<string, string[]>();
    for (const root of this.roots) {
      let names: string[];
      try {
        names = await readdir(root);
      } catch (e) {
        throw ServalError.invalidArg(`failed to open model repository '${root}': ${(e as Error).message}`);
      }
      for (const n of names.sort()) {
        if (n.startsWith('.')) continue;
        const dir = path.join(root, n);
        if (await isDir(dir)) found.set(n, [...(found.get(n) ?? []), dir]);
      }
    }
    await Promise.all(
      [...found].map(async ([name, dirs]) => {
        if (dirs.length > 1) {
          this.models.set(name, {
            name,
            dir: dirs[0]!,
            reason: `model '${name}' appears in more than one model repository (${dirs.join(', ')})`,
            versions: new Map(),
          });
          return;
        }
        await this.loadModel(name, dirs[0]!);
      }),
    );
  }

  private async loadModel(name: string, dir: string): Promise<void> {
    const entry: ModelEntry = { name, dir, reason: '', versions: new Map() };
    this.models.set(name, entry);
    const available = await versionFolders(dir);
    try {
      entry.config = await readModelConfig(dir, name);
    } catch (e) {
      entry.reason = (e as Error).message;
      for (const v of available.slice(-1)) entry.versions.set(v, { version: v, state: 'UNAVAILABLE', reason: entry.reason });
      this.log.error('model load failed', { model: name, reason: entry.reason });
      return;
    }
    const wanted = selectVersions(entry.config, available);
    for (const v of entry.config.version_policy?.specific?.versions ?? []) {
      if (!available.includes(v)) this.log.error('model version not found', { model: name, version: v, dir });
    }
    if (wanted.length === 0) {
      entry.reason = `model '${name}' has no version folder to serve in ${dir}`;
      this.log.error('model load failed', { model: name, reason: entry.reason });
      return;
    }
    await Promise.all(
      wanted.map(async (v) => {
        const ve: VersionEntry = { version: v, state: 'LOADING', reason: '' };
        entry.versions.set(v, ve);
        try {
          // Each version gets its own copy of the config; instances never share mutable state.
          ve.loaded = await ModelVersion.load(structuredClone(entry.config!), dir, v);
          ve.state = 'READY';
          this.log.info('model version loaded', { model: name, version: v });
        } catch (e) {
          ve.state = 'UNAVAILABLE';
          ve.reason = (e as Error).message;
          this.log.error('model version load failed', { model: name, version: v, reason: ve.reason });
        }
      }),
    );
  }

  /**
   * The version a request names ('' = highest ready), with Triton's errors: an unknown name or
   * version is NOT_FOUND, a version that is not ready UNAVAILABLE.
   */
  get(name: string, version: string): ModelVersion {
    const entry = this.models.get(name);
    if (!entry) throw ServalError.notFound(`Request for unknown model: '${name}' is not found`);
    if (version === '' || version === '-1') {
      const ready = [...entry.versions.values()].filter((v) => v.state === 'READY').sort((a, b) => b.version - a.version);
      if (!ready.length) throw ServalError.notFound(`Request for unknown model: '${name}' has no available versions`);
      return ready[0]!.loaded!;
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
    return [...entry.versions.values()].filter((v) => v.state === 'READY').map((v) => v.version).sort((a, b) => a - b);
  }

  /** All loaded model versions (for statistics). */
  loadedVersions(): ModelVersion[] {
    const out: ModelVersion[] = [];
    for (const e of this.models.values()) for (const v of e.versions.values()) if (v.loaded) out.push(v.loaded);
    return out.sort((a, b) => a.name.localeCompare(b.name) || a.version - b.version);
  }

  /** One row per model version (or per model when it failed before versions), sorted. */
  index(): IndexRow[] {
    const rows: IndexRow[] = [];
    for (const e of [...this.models.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      if (e.versions.size === 0) rows.push({ name: e.name, version: '', state: 'UNAVAILABLE', reason: e.reason });
      for (const v of [...e.versions.values()].sort((a, b) => a.version - b.version)) {
        rows.push({ name: e.name, version: String(v.version), state: v.state, reason: v.reason });
      }
    }
    return rows;
  }

  allReady(): boolean {
    return this.index().every((r) => r.state === 'READY');
  }

  async unloadAll(): Promise<void> {
    const all: Promise<void>[] = [];
    for (const e of this.models.values()) {
      for (const v of e.versions.values()) {
        if (v.loaded) {
          v.state = 'UNLOADING';
          all.push(v.loaded.unload().finally(() => { v.state = 'UNAVAILABLE'; v.reason = 'unloaded'; v.loaded = undefined; }));
        }
      }
    }
    await Promise.allSettled(all);
  }
}
