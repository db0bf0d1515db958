// --model-load-thread-count and --model-load-retry-count: how many model loads run at once, and
// how often a failing load is tried again, as tritonserver's load thread pool and retries do.

/** At most `size` tasks run at once; the others wait their turn, first come first served. */
export class LoadSlots {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly size: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await task();
    } finally {
      // The slot passes straight to the next waiter, so `running` counts it without a gap.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/** Runs `attempt` once, then up to `retries` more times while it fails; the last failure is thrown. */
export async function withRetries<T>(
  retries: number,
  attempt: () => Promise<T>,
  onRetry: (error: Error, next: number) => void,
): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await attempt();
    } catch (e) {
      if (n >= retries) throw e;
      onRetry(e as Error, n + 1);
    }
  }
}
