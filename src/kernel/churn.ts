// Long-lived collections of per-request objects, without a Map or Set holding those objects.
//
// A Map or Set that gains and loses entries all the time rehashes its table into a new one every
// few entries, and V8 keeps each replaced table pointing at its successor and at the entries it
// had (for live iterators) until the next full collection. Once one replaced table is in old
// space, every later table is reachable from it, so every object ever entered stays alive
// through the scavenges and is promoted: measured on `identity_batched` at 16 clients, ~1 MB
// copied and promoted per scavenge, 2-3 ms pauses that every request in flight waits out
// (docs/benchmarks.md, session 19). Here the objects sit in array slots that are cleared when
// freed; a Map, where one is needed, holds only numbers.

/** A count of work in progress, for a drain that waits until none is left. */
export class InFlight {
  private n = 0;
  private waiters: Array<() => void> = [];

  get size(): number {
    return this.n;
  }

  start(): void {
    this.n++;
  }

  end(): void {
    if (--this.n > 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Counts `p` until it settles (its outcome is the caller's to handle). */
  track(p: Promise<unknown>): void {
    this.start();
    p.then(
      () => this.end(),
      () => this.end(),
    );
  }

  /** Resolves once nothing is in flight (at once when nothing is). */
  idle(): Promise<void> {
    return this.n === 0 ? Promise.resolve() : new Promise((r) => this.waiters.push(r));
  }
}

/**
 * Values by numeric id (h2 stream ids, keys sent to a stub): the values sit in array slots, the
 * Map holds only id → slot.
 */
export class IdTable<V> {
  private readonly slots: Array<V | undefined> = [];
  private readonly free: number[] = [];
  private readonly index = new Map<number, number>();

  get size(): number {
    return this.index.size;
  }

  get(id: number): V | undefined {
    const at = this.index.get(id);
    return at === undefined ? undefined : this.slots[at];
  }

  has(id: number): boolean {
    return this.index.has(id);
  }

  set(id: number, value: V): void {
    const at = this.index.get(id);
    if (at !== undefined) {
      this.slots[at] = value;
      return;
    }
    const slot = this.free.pop() ?? this.slots.length;
    this.slots[slot] = value;
    this.index.set(id, slot);
  }

  delete(id: number): boolean {
    const at = this.index.get(id);
    if (at === undefined) return false;
    this.index.delete(id);
    this.slots[at] = undefined;
    this.free.push(at);
    return true;
  }

  clear(): void {
    this.index.clear();
    this.slots.length = 0;
    this.free.length = 0;
  }

  /** The values now held, in id insertion order (a copy: safe to change the table meanwhile). */
  values(): V[] {
    const out: V[] = [];
    for (const at of this.index.values()) out.push(this.slots[at]!);
    return out;
  }

  /** The ids now held, in insertion order (a copy). */
  keys(): number[] {
    return [...this.index.keys()];
  }
}

/**
 * Answers delivered in the order they were issued (preserve_ordering): `deliver(order, fn)` runs
 * fn once every answer issued before `order` has run. Orders are 0, 1, 2, ... each delivered once.
 */
export class InOrder {
  private next = 0;
  /** Waiting deliveries by order − next: a hole for each not yet delivered. */
  private readonly waiting: Array<(() => void) | undefined> = [];

  deliver(order: number, fn: () => void): void {
    this.waiting[order - this.next] = fn;
    while (this.waiting.length && this.waiting[0]) {
      const f = this.waiting.shift()!;
      this.next++;
      f();
    }
  }
}
