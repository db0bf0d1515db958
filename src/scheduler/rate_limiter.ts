// Triton's rate limiter (--rate-limit=execution_count): an instance executes only once the
// resources its instance group's `rate_limiter` lists are free, and instances waiting for them are
// served lowest (executions so far × priority) first, across every loaded model. Off by default,
// as in Triton; then no scheduler asks it anything.
import type { InstancePlacement } from '../config/resolved.js';
import type { ModelInstanceGroup } from '../config/types.js';
import { ServalError } from '../kernel/errors.js';

export type RateLimitMode = 'off' | 'execution_count';

/** One `--rate-limit-resource=NAME:COUNT[:DEVICE]`; no device: the count on every device. */
export interface ExplicitResource {
  readonly name: string;
  readonly count: number;
  readonly device?: number;
}

/** What one instance needs to execute (its group's rate_limiter) and where it runs. */
export interface InstanceRateLimit {
  readonly resources: readonly { readonly name: string; readonly global: boolean; readonly count: number }[];
  readonly priority: number;
  /** The device its per-device resources are counted on (Triton counts CPU instances on device 0). */
  readonly device: number;
}

const GLOBAL = 'global';
type Key = typeof GLOBAL | number;
type Counts = Map<Key, Map<string, number>>;

/**
 * tritonserver's `--rate-limit-resource` value, with its message for a bad one. Triton reads the
 * count and device with stoi; a count or device that is not a whole number is refused here too.
 */
export function parseRateLimitResource(arg: string): ExplicitResource {
  const bad = (): Error =>
    new Error(`--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got ${arg}`);
  const parts = arg.split(':');
  if (parts.length < 2 || parts.length > 3) throw bad();
  const int = (s: string): number => {
    if (!/^\s*[+-]?\d+$/.test(s)) throw new Error(`Invalid option value. Got ${s}`);
    const n = Number(s);
    if (!Number.isSafeInteger(n) || n > 2 ** 31 - 1 || n < -(2 ** 31)) throw new Error(`Provided option value is out of bound. Got ${s}`);
    return n;
  };
  const count = int(parts[1]!);
  if (count < 0) throw bad();
  return parts.length === 3 ? { name: parts[0]!, count, device: int(parts[2]!) } : { name: parts[0]!, count };
}

/**
 * Each placement's rate_limiter, from the instance group it was placed from (a placement is named
 * `<group name>_<index>[_gpu<device>]`, the longest group name that prefixes it).
 */
export function instanceRateLimits(groups: readonly ModelInstanceGroup[], placements: readonly InstancePlacement[]): InstanceRateLimit[] {
  return placements.map((p) => {
    let group: ModelInstanceGroup | undefined;
    for (const g of groups) {
      const n = g.name ?? '';
      if (p.name.startsWith(`${n}_`) && (!group || n.length > (group.name ?? '').length)) group = g;
    }
    const rl = group?.rate_limiter;
    return {
      resources: (rl?.resources ?? []).map((r) => ({ name: r.name ?? '', global: r.global ?? false, count: r.count ?? 0 })),
      priority: rl?.priority ?? 0,
      device: Math.max(p.deviceId, 0),
    };
  });
}

/** One instance's side of the limiter (Triton's ModelInstanceContext). */
export class LimitedInstance {
  /** Executions it was granted and finished: its share of the scheduling. */
  execCount = 0;
  /** The grant callback while it waits for its resources. */
  onGrant: (() => void) | undefined;
  /** Order it was staged in: ties go to the earlier one. */
  stagedAt = 0;
  holding = false;

  constructor(
    private readonly limiter: RateLimiter,
    readonly needs: Counts,
    readonly priority: number,
  ) {}

  /** Triton's ScaledPriority: a priority of 0 counts as 1; the lowest value runs next. */
  get scaledPriority(): number {
    return this.execCount * Math.max(1, this.priority);
  }

  /** Waits for its resources; `grant` is called once they are held for it. */
  request(grant: () => void): void {
    this.limiter.stage(this, grant);
  }

  /**
   * Gives its resources back; `executed` when the grant was used for an execution. `next` waits
   * again at once, before the resources go to another instance, as Triton stages an instance
   * with pending requests before it reallocates what it released.
   */
  release(executed: boolean, next?: () => void): void {
    if (executed) this.execCount++;
    this.limiter.free(this, next);
  }
}

export class RateLimiter {
  private readonly instances = new Set<LimitedInstance>();
  private max: Counts = new Map();
  private readonly allocated: Counts = new Map();
  private readonly staged: LimitedInstance[] = [];
  private stageCounter = 0;
  private allocating = false;

  constructor(
    readonly mode: RateLimitMode,
    private readonly explicit: readonly ExplicitResource[] = [],
  ) {}

  get enabled(): boolean {
    return this.mode !== 'off';
  }

  /**
   * Adds a model version's instances, or refuses them with Triton's text when the resource
   * counts cannot let one of them ever run (the server's counts stay as they were).
   */
  register(limits: readonly InstanceRateLimit[]): LimitedInstance[] {
    const added = limits.map((l) => {
      const needs: Counts = new Map();
      for (const r of l.resources) {
        const key: Key = r.global ? GLOBAL : l.device;
        if (!needs.has(key)) needs.set(key, new Map());
        needs.get(key)!.set(r.name, r.count);
      }
      return new LimitedInstance(this, needs, l.priority);
    });
    const all = [...this.instances, ...added];
    this.max = this.limits(all);
    for (const i of added) this.instances.add(i);
    return added;
  }

  /** Removes instances of an unloaded version; their resources count no more. */
  unregister(list: readonly LimitedInstance[]): void {
    for (const i of list) {
      this.instances.delete(i);
      const at = this.staged.indexOf(i);
      if (at >= 0) this.staged.splice(at, 1);
    }
    this.max = this.limits([...this.instances]);
    this.allocate();
  }

  /** The resource counts on each device (Triton's UpdateResourceLimits), checked. */
  private limits(instances: readonly LimitedInstance[]): Counts {
    const max: Counts = new Map();
    for (const inst of instances) {
      for (const [key, names] of inst.needs) {
        if (!max.has(key)) max.set(key, new Map());
        const m = max.get(key)!;
        for (const [name, n] of names) m.set(name, Math.max(m.get(name) ?? 0, n));
      }
    }
    if (this.explicit.length) {
      for (const [key, names] of max) {
        for (const [name, needed] of names) {
          // Given on the command line: what it says (0 when it names other resources only); a
          // global resource takes the largest count given for its name on any device.
          let count = 0;
          for (const e of this.explicit) {
            if (e.name !== name) continue;
            if (key === GLOBAL || e.device === undefined || e.device === key) count = Math.max(count, e.count);
          }
          if (count < needed) {
            throw ServalError.invalidArg(
              `Resource count for "${name}" is limited to ${count} which will prevent scheduling of one or more model instances, the minimum required count is ${needed}`,
            );
          }
          names.set(name, count);
        }
      }
    }
    for (const name of max.get(GLOBAL)?.keys() ?? []) {
      for (const [key, names] of max) {
        if (key !== GLOBAL && names.has(name)) {
          throw ServalError.invalidArg(
            `Resource "${name}" is present as both global and device-specific resource in the model configuration.`,
          );
        }
      }
    }
    return max;
  }

  stage(inst: LimitedInstance, grant: () => void): void {
    this.enter(inst, grant);
    this.allocate();
  }

  private enter(inst: LimitedInstance, grant: () => void): void {
    if (!this.instances.has(inst) || inst.onGrant || inst.holding) throw ServalError.internal('rate limiter: instance staged twice');
    inst.onGrant = grant;
    inst.stagedAt = this.stageCounter++;
    this.staged.push(inst);
  }

  free(inst: LimitedInstance, next?: () => void): void {
    if (!inst.holding) return;
    inst.holding = false;
    for (const [key, names] of inst.needs) {
      const a = this.allocated.get(key)!;
      for (const [name, n] of names) a.set(name, a.get(name)! - n);
    }
    if (next && this.instances.has(inst)) this.enter(inst, next);
    this.allocate();
  }

  /**
   * Grants resources to staged instances in priority order while the next one's fit. Triton tries
   * one instance per stage or release; trying until one does not fit grants the same order sooner.
   */
  private allocate(): void {
    if (this.allocating) return;
    this.allocating = true;
    try {
      while (this.staged.length) {
        let best = 0;
        for (let i = 1; i < this.staged.length; i++) {
          const a = this.staged[i]!;
          const b = this.staged[best]!;
          if (a.scaledPriority < b.scaledPriority || (a.scaledPriority === b.scaledPriority && a.stagedAt < b.stagedAt)) best = i;
        }
        const inst = this.staged[best]!;
        if (!this.fits(inst)) return;
        this.staged.splice(best, 1);
        for (const [key, names] of inst.needs) {
          if (!this.allocated.has(key)) this.allocated.set(key, new Map());
          const a = this.allocated.get(key)!;
          for (const [name, n] of names) a.set(name, (a.get(name) ?? 0) + n);
        }
        inst.holding = true;
        const grant = inst.onGrant!;
        inst.onGrant = undefined;
        grant();
      }
    } finally {
      this.allocating = false;
    }
  }

  private fits(inst: LimitedInstance): boolean {
    for (const [key, names] of inst.needs) {
      for (const [name, n] of names) {
        const used = this.allocated.get(key)?.get(name) ?? 0;
        if (used + n > (this.max.get(key)?.get(name) ?? 0)) return false;
      }
    }
    return true;
  }
}

/** The server's rate limiter from `--rate-limit` and `--rate-limit-resource`, with tritonserver's texts for bad values. */
export function rateLimiterFromOptions(mode: string, resources: readonly string[]): RateLimiter {
  const m = mode.toLowerCase();
  if (m !== 'off' && m !== 'execution_count') throw new Error('invalid argument for --rate-limit');
  return new RateLimiter(m, resources.map(parseRateLimitResource));
}
