// --model-namespacing: each model repository is a namespace of its own, so the same model name
// may be served from several of them. As in Triton (model_repository_manager.cc), a request
// naming a model that more than one namespace holds is refused as ambiguous, an ensemble's steps
// resolve in its own repository first, and a load or unload by name acts on every namespace
// holding that name.
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { ServalError } from '../kernel/errors.js';
import type { Logger } from '../kernel/log.js';
import type { IndexRow } from '../kernel/types.js';
import type { LoadedVersion } from '../model/loaded_version.js';
import type { DependencyState } from './dependencies.js';
import { LoadSlots } from './load_slots.js';
import { ModelRepository, type RepositoryOptions } from './repository.js';

/** Triton's text for a name held by several namespaces (FindModelIdentifier). */
function ambiguous(name: string, count: number): ServalError {
  return ServalError.invalidArg(
    `There are ${count} identifiers of model '${name}' in global map, model namespace must be provided to resolve ambiguity.`,
  );
}

const byRow = (a: IndexRow, b: IndexRow): number => a.name.localeCompare(b.name) || Number(a.version) - Number(b.version);

/** One ModelRepository per repository folder, presented to the server as one. */
export class NamespacedRepository extends ModelRepository {
  private readonly spaces: ModelRepository[];
  private readonly folders: string[];

  constructor(roots: string[], log: Logger, options: RepositoryOptions) {
    super([], log, options);
    this.folders = [...roots];
    // One load pool for the server, as Triton's --model-load-thread-count is one pool.
    const loadSlots = options.loadSlots ?? new LoadSlots(Math.max(1, options.loadThreads ?? 4));
    const outside = {
      version: (name: string, version: string) => this.get(name, version),
      dependency: (name: string) => this.dependencyState(name),
    };
    // Explicit mode: each namespace loads the start-up models it has; one found nowhere is the
    // first namespace's to report, once.
    const wanted = options.startupModels;
    const has = (root: string, name: string): boolean => existsSync(path.join(root, name));
    const startupModels = (root: string, i: number): string[] =>
      wanted.includes('*') ? wanted : wanted.filter((n) => has(root, n) || (i === 0 && !roots.some((r) => has(r, n))));
    this.spaces = roots.map(
      (root, i) =>
        new ModelRepository([root], log, { ...options, startupModels: startupModels(root, i), loadSlots, outside, namespace: root }),
    );
  }

  /** The namespaces holding an entry for the name. */
  private holding(name: string): ModelRepository[] {
    return this.spaces.filter((s) => s.knows(name));
  }

  /** The one namespace a name resolves to; the first when none holds it (its errors are Triton's "unknown model"). */
  private resolve(name: string): ModelRepository {
    const found = this.holding(name);
    if (found.length > 1) throw ambiguous(name, found.length);
    return found[0] ?? this.spaces[0]!;
  }

  /** Namespaces whose repository folder has a folder of that name. */
  private async withFolder(name: string): Promise<ModelRepository[]> {
    const has = await Promise.all(
      this.folders.map((r) =>
        stat(path.join(r, name)).then(
          (s) => s.isDirectory(),
          () => false,
        ),
      ),
    );
    return this.spaces.filter((_, i) => has[i]);
  }

  private async settleEnsembles(): Promise<void> {
    await Promise.all(this.spaces.map((s) => s.retryHeldEnsembles()));
  }

  override async loadAll(): Promise<void> {
    await Promise.all(this.spaces.map((s) => s.loadAll()));
    await this.settleEnsembles();
  }

  override async load(...args: Parameters<ModelRepository['load']>): Promise<void> {
    const [name] = args;
    // Uploaded files make a model of their own, in the namespace that already has the name if one does.
    const targets = args[2] ? [this.resolveOrFirst(name)] : await this.withFolder(name);
    if (targets.length === 0) targets.push(this.spaces[0]!);
    const results = await Promise.allSettled(targets.map((s) => s.load(...args)));
    await this.settleEnsembles();
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  private resolveOrFirst(name: string): ModelRepository {
    const found = this.holding(name);
    return found.length === 1 ? found[0]! : this.spaces[0]!;
  }

  override async unload(name: string, unloadDependents = false): Promise<void> {
    const targets = this.holding(name);
    if (targets.length === 0) targets.push(this.spaces[0]!);
    const results = await Promise.allSettled(targets.map((s) => s.unload(name, unloadDependents)));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  override async poll(): Promise<void> {
    await Promise.all(this.spaces.map((s) => s.poll()));
    await this.settleEnsembles();
  }

  override startPolling(periodSecs: number): void {
    if (this.mode !== 'poll' || periodSecs <= 0) return;
    // One timer for all namespaces, so an ensemble sees its composing models' changes of the same poll.
    super.startPolling(periodSecs);
  }

  override stopPolling(): void {
    super.stopPolling();
    for (const s of this.spaces) s.stopPolling();
  }

  override get(name: string, version: string): LoadedVersion {
    return this.resolve(name).get(name, version);
  }

  override isReady(name: string, version: string): boolean {
    const found = this.holding(name);
    return found.length === 1 && found[0]!.isReady(name, version);
  }

  override readyVersions(name: string): number[] {
    const found = this.holding(name);
    return found.length === 1 ? found[0]!.readyVersions(name) : [];
  }

  override dependencyState(name: string): DependencyState {
    const found = this.holding(name);
    // Ambiguous or unknown: no config, which the ensemble check reports as "not available or ambiguous".
    if (found.length !== 1) return { name, config: undefined, ready: [], reason: '' };
    return found[0]!.dependencyState(name);
  }

  override knows(name: string): boolean {
    return this.holding(name).length > 0;
  }

  override loadedVersions(): LoadedVersion[] {
    return this.spaces.flatMap((s) => s.loadedVersions()).sort((a, b) => a.name.localeCompare(b.name) || a.version - b.version);
  }

  override index(): IndexRow[] {
    return this.spaces.flatMap((s) => s.index()).sort(byRow);
  }

  override async repositoryIndex(readyOnly: boolean): Promise<IndexRow[]> {
    return (await Promise.all(this.spaces.map((s) => s.repositoryIndex(readyOnly)))).flat().sort(byRow);
  }

  override allReady(): boolean {
    return this.spaces.every((s) => s.allReady());
  }

  override async unloadAll(): Promise<void> {
    this.stopPolling();
    await Promise.all(this.spaces.map((s) => s.unloadAll()));
  }

  override async retryHeldEnsembles(): Promise<void> {
    await this.settleEnsembles();
  }
}
