// The global in-flight byte budget (--max-inflight-bytes): the payload bytes of requests admitted
// and not yet answered, over both protocols. A request that would go over it is refused at once
// with UNAVAILABLE (HTTP 503) — "server busy", retry later — instead of buffering more data than
// the machine holds and getting the whole server killed; requests within the budget go on.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { ServalError } from './errors.js';

/** The default budget: this share of the memory the process may use (machine or cgroup limit). */
export const DEFAULT_BUDGET_SHARE = 0.25;

/** The memory limit of the process: the machine's, or the cgroup's when that is lower. */
export function memoryLimit(): number {
  let limit = os.totalmem();
  for (const file of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    try {
      const n = Number(readFileSync(file, 'utf8').trim());
      // cgroup v2 says "max", v1 a huge number when there is no limit.
      if (Number.isFinite(n) && n > 0 && n < limit) limit = n;
    } catch {
      // No such cgroup file: not limited by it.
    }
  }
  return limit;
}

export function defaultInflightBytes(): number {
  return Math.floor(memoryLimit() * DEFAULT_BUDGET_SHARE);
}

/** The bytes one request holds against the budget; release is idempotent. */
export interface BudgetTicket {
  readonly bytes: number;
  /** Holds `delta` more bytes (a body still arriving); throws the busy error when they do not fit. */
  grow(delta: number): void;
  release(): void;
}

export class ByteBudget {
  private used = 0;

  /** `limit` 0 = no budget (every request admitted, still counted). */
  constructor(readonly limit: number) {}

  get inFlight(): number {
    return this.used;
  }

  /** Admits a request of `bytes` (0 when its size is not known yet; grow the ticket as it arrives). */
  admit(bytes: number): BudgetTicket {
    this.take(bytes);
    let held = bytes;
    let released = false;
    return {
      get bytes() {
        return held;
      },
      grow: (delta: number) => {
        if (released) return;
        this.take(delta, held);
        held += delta;
      },
      release: () => {
        if (released) return;
        released = true;
        this.used -= held;
      },
    };
  }

  private take(bytes: number, already = 0): void {
    if (this.limit > 0 && this.used + bytes > this.limit) {
      const size = already + bytes;
      if (size > this.limit) {
        throw ServalError.unavailable(
          `Server busy: the request's ${size} bytes exceed the in-flight byte budget of ${this.limit} bytes. Use --max-inflight-bytes to increase the budget.`,
        );
      }
      throw ServalError.unavailable(
        `Server busy: ${this.used - already} bytes of other requests are in flight and this request's ${size} bytes would exceed ` +
          `the in-flight byte budget of ${this.limit} bytes; retry later (--max-inflight-bytes sets the budget).`,
      );
    }
    this.used += bytes;
  }
}
