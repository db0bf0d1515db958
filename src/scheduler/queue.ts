// The dynamic batcher's queue: one FIFO per priority level, each with its queue policy
// (max_queue_size, default timeout, REJECT or DELAY on timeout), as Triton's ModelQueuePolicy.
import type { QueueConfig, QueuePolicy } from '../config/resolved.js';
import { ServalError } from '../kernel/errors.js';

export interface Entry {
  /** Request parameters that steer queueing. */
  priority: number;
  timeoutUs: number;
  /** Called when the entry leaves the queue because its timeout expired with REJECT. */
  expire(err: ServalError): void;
  /** The queue's own record of the entry while it is queued (the queue sets and reads it). */
  queued?: unknown;
}

interface Slot<T extends Entry> {
  level: number;
  timer?: NodeJS.Timeout;
  delayed: boolean;
  item: T;
}

export class PriorityQueue<T extends Entry> {
  private readonly levels: Slot<T>[][];
  /** Timed-out DELAY entries: served after every entry that has not timed out. */
  private readonly delayed: Slot<T>[] = [];
  private count = 0;

  constructor(private readonly config: QueueConfig) {
    this.levels = Array.from({ length: config.levels }, () => []);
  }

  get size(): number {
    return this.count;
  }

  /** Triton: priority 0 or beyond the configured levels means the default level. */
  levelOf(priority: number): number {
    return priority >= 1 && priority <= this.config.levels ? priority : this.config.defaultLevel;
  }

  /** Adds an entry, or throws UNAVAILABLE when its level's queue is full. */
  push(item: T): void {
    const level = this.levelOf(item.priority);
    const policy = this.config.policies[level - 1]!;
    const fifo = this.levels[level - 1]!;
    if (policy.maxQueueSize > 0 && fifo.length >= policy.maxQueueSize) {
      throw ServalError.unavailable('Exceeds maximum queue size');
    }
    const slot: Slot<T> = { level, delayed: false, item };
    const timeoutUs = effectiveTimeout(policy, item.timeoutUs);
    if (timeoutUs > 0) {
      slot.timer = setTimeout(() => this.onTimeout(slot, policy), timeoutUs / 1000);
    }
    fifo.push(slot);
    item.queued = slot;
    this.count++;
  }

  /** Entries in service order: levels from highest priority, then the delayed ones. */
  ordered(): T[] {
    const out: T[] = [];
    for (const fifo of this.levels) for (const s of fifo) out.push(s.item);
    for (const s of this.delayed) out.push(s.item);
    return out;
  }

  first(): T | undefined {
    for (const fifo of this.levels) if (fifo.length) return fifo[0]!.item;
    return this.delayed[0]?.item;
  }

  /** Removes an entry; false when it was not queued. */
  remove(item: T): boolean {
    const slot = item.queued as Slot<T> | undefined;
    if (!slot) return false;
    item.queued = undefined;
    this.count--;
    if (slot.timer) clearTimeout(slot.timer);
    const list = slot.delayed ? this.delayed : this.levels[slot.level - 1]!;
    list.splice(list.indexOf(slot), 1);
    return true;
  }

  private onTimeout(slot: Slot<T>, policy: QueuePolicy): void {
    slot.timer = undefined;
    if (slot.item.queued !== slot) return;
    if (policy.timeoutAction === 'DELAY') {
      const fifo = this.levels[slot.level - 1]!;
      fifo.splice(fifo.indexOf(slot), 1);
      slot.delayed = true;
      this.delayed.push(slot);
      return;
    }
    this.remove(slot.item);
    slot.item.expire(ServalError.unavailable('Request timeout expired'));
  }
}

/**
 * A request's own `timeout` applies when the policy allows overrides, and may only shorten a
 * configured default (Triton's allow_timeout_override).
 */
export function effectiveTimeout(policy: QueuePolicy, requestUs: number): number {
  if (policy.allowTimeoutOverride && requestUs > 0) {
    return policy.defaultTimeoutUs > 0 ? Math.min(requestUs, policy.defaultTimeoutUs) : requestUs;
  }
  return policy.defaultTimeoutUs;
}
