// Triton's TraceManager: one global trace setting, optional per-model settings that override it
// field by field, sampling, and the hand-off of finished traces to the trace files.
//
// A model setting copies every field it does not specify from the global setting, and follows
// later global updates of those fields; clearing all of a model's fields removes its setting, so
// the model falls back to the global one. Clearing a global field restores its start-up value.
// An update replaces the setting object rather than changing it: traces already sampled finish
// under the setting that sampled them, which writes out its remaining traces when the last of
// them ends. Sampling: the rate-th, 2·rate-th, ... request of a setting is traced while its count
// (traces left; -1 = unlimited) is not 0. Traces reach the file in batches of `log_frequency`
// (file.0, file.1, ...); with 0 they are written to the file itself when the setting is replaced
// or the server stops. When the count runs out, the traces collected so far go to the next
// indexed file at once, as Triton does.
import { ServalError } from '../kernel/errors.js';
import type { Logger } from '../kernel/log.js';
import type { RequestTrace } from '../kernel/trace.js';
import {
  checkUpdate,
  invalidReason,
  type NewTraceValues,
  settingsJson,
  type TraceSettingsJson,
  type TraceSettingsUpdate,
  type TraceValues,
} from './settings.js';
import { Trace, type TraceSink } from './trace.js';
import { TraceFile } from './trace_file.js';

type Field = 'level' | 'rate' | 'count' | 'logFrequency';
const FIELDS: readonly Field[] = ['level', 'rate', 'count', 'logFrequency'];

class TraceSetting implements TraceSink {
  readonly reason: string;
  /** Traces left to sample; -1 = unlimited. Decreases as traces are sampled. */
  count: number;
  private sampled = 0;
  private created = 0;
  private collected = 0;
  private pending: string[] = [];
  private live = 0;
  private retired = false;

  constructor(
    readonly values: Readonly<TraceValues>,
    /** Which fields this setting specifies itself; the others mirror its fallback. */
    readonly specified: ReadonlySet<Field>,
    readonly file: TraceFile,
    private readonly manager: TraceManager,
  ) {
    this.count = values.count;
    this.reason = invalidReason(values);
  }

  /** The values as reported: the count is what is left. */
  current(): TraceValues {
    return { ...this.values, count: this.count };
  }

  valid(): boolean {
    return this.reason === '' && this.count !== 0;
  }

  sample(id: () => number): Trace | undefined {
    if (!this.valid()) return undefined;
    if (++this.sampled % this.values.rate !== 0) return undefined;
    if (this.count > 0) {
      this.count -= 1;
      this.created += 1;
      if (this.count === 0) this.manager.refresh();
    }
    this.live += 1;
    // Its children (ensemble steps) draw their ids from the same counter and are not counted here.
    return new Trace(id(), this.values.level, { sink: this, newId: id });
  }

  collect(records: string[]): void {
    this.live -= 1;
    this.collected += 1;
    if (records.length > 0) this.pending.push(records.join(','));
    const { logFrequency } = this.values;
    if ((this.count === 0 && this.collected === this.created) || (logFrequency !== 0 && this.pending.length >= logFrequency)) {
      this.save(true);
    }
    if (this.retired && this.live === 0) {
      this.flush();
      this.manager.forget(this);
    }
  }

  /**
   * No longer sampled from: writes its remaining traces once the last live one has ended. True
   * when that is already the case.
   */
  retire(): boolean {
    this.retired = true;
    if (this.live !== 0) return false;
    this.flush();
    return true;
  }

  /** Writes the traces not yet written (Triton's ~TraceSetting). */
  flush(): void {
    this.save(this.values.logFrequency !== 0);
  }

  private save(toIndexFile: boolean): void {
    if (this.pending.length === 0) return;
    const text = this.pending.join(',');
    this.pending = [];
    this.file.save(text, toIndexFile);
  }
}

export interface TraceManagerOptions extends TraceValues {
  /** Where trace file write failures are reported. */
  log?: Logger;
}

const NO_LOG: Logger = { error() {}, warn() {}, info() {}, debug() {} };

export class TraceManager {
  /** The start-up values: what a cleared global field returns to. */
  private readonly defaults: TraceSetting;
  private global: TraceSetting;
  private readonly models = new Map<string, TraceSetting>();
  /** Models whose setting mirrors some global fields, re-derived on every global update. */
  private readonly mirroring = new Set<string>();
  private readonly files = new Map<string, TraceFile>();
  /** Settings replaced while some of their traces were still running. */
  private readonly retired = new Set<TraceSetting>();
  private readonly log: Logger;
  private nextId = 1;
  private readonly newId = (): number => this.nextId++;
  /** Whether any setting can sample: the one check an untraced request pays. */
  private active = false;

  constructor(opts: TraceManagerOptions) {
    const { log, ...values } = opts;
    this.log = log ?? NO_LOG;
    const file = this.fileFor(values.file);
    this.defaults = new TraceSetting(values, new Set(), file, this);
    this.global = new TraceSetting(values, new Set(), file, this);
    this.refresh();
  }

  /** A trace for the next request to `model` when sampling picks it, else undefined. */
  sample(model: string): RequestTrace | undefined {
    if (!this.active) return undefined;
    return (this.models.get(model) ?? this.global).sample(this.newId);
  }

  /** The settings of `model` ('' = global), the model's own or else the global ones. */
  get(model: string): TraceSettingsJson {
    return settingsJson((this.models.get(model) ?? this.global).current());
  }

  /** Applies an update to `model`'s setting ('' = global) and returns the settings after it. */
  update(model: string, update: TraceSettingsUpdate): TraceSettingsJson {
    const change = checkUpdate(update);
    this.apply(model, change);
    if (model === '') {
      for (const name of [...this.mirroring]) this.apply(name, {});
    }
    this.refresh();
    return this.get(model);
  }

  /** Recomputes whether any setting can sample (after updates, and when a count runs out). */
  refresh(): void {
    this.active = this.global.valid() || [...this.models.values()].some((s) => s.valid());
  }

  /** Writes every collected trace and closes the files (server shutdown). */
  async close(): Promise<void> {
    this.active = false;
    for (const s of [this.global, ...this.models.values(), ...this.retired]) s.flush();
    await Promise.all([...this.files.values()].map((f) => f.close()));
  }

  private apply(model: string, change: NewTraceValues): void {
    const current = model === '' ? this.global : this.models.get(model);
    const fallback = model === '' ? this.defaults : this.global;
    const values: TraceValues = fallback.current();
    const specified = new Set<Field>();
    for (const f of FIELDS) {
      const next = change[f];
      if (next === null) continue; // cleared: mirrors the fallback again
      if (next !== undefined) {
        values[f] = next;
        specified.add(f);
      } else if (current?.specified.has(f)) {
        values[f] = f === 'count' ? current.count : current.values[f];
        specified.add(f);
      }
    }
    if (model !== '') {
      if (specified.size === 0) {
        this.mirroring.delete(model);
        const old = this.models.get(model);
        this.models.delete(model);
        if (old) this.replace(old);
        return;
      }
      if (specified.size === FIELDS.length) this.mirroring.delete(model);
      else this.mirroring.add(model);
    }
    const setting = new TraceSetting(values, specified, this.fileFor(values.file), this);
    // The one invalid setting allowed is one that turns tracing off.
    if (setting.reason !== '' && values.level !== 0) {
      throw ServalError.invalidArg(`Attempting to set invalid trace setting :${setting.reason}`);
    }
    if (setting.reason === '' && setting.count === 0 && change.count === 0) {
      throw ServalError.invalidArg('Attempting to set invalid trace setting :trace count must be -1 (unlimited) or positive');
    }
    const old = current;
    if (model === '') this.global = setting;
    else this.models.set(model, setting);
    if (old) this.replace(old);
  }

  private replace(old: TraceSetting): void {
    if (!old.retire()) this.retired.add(old);
  }

  /** A replaced setting whose last trace has ended and been written. */
  forget(setting: TraceSetting): void {
    this.retired.delete(setting);
  }

  private fileFor(name: string): TraceFile {
    let file = this.files.get(name);
    if (!file) {
      file = new TraceFile(name, this.log);
      this.files.set(name, file);
    }
    return file;
  }
}
