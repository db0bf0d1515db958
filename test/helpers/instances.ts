// Model instances for scheduler tests: a base that gives every execution its own input buffer,
// so a fake only writes what it does with an assembled batch.
import type { ExecLayout, Execution, ModelInstance, Reservation } from '../../src/backends/backend.js';
import type { InstancePlacement } from '../../src/config/resolved.js';

/** An assembled batch as a fake instance sees it: the reservation's buffer and the layout. */
export type Batch = ExecLayout & { data: Uint8Array };

export abstract class FakeInstanceBase implements ModelInstance {
  abstract readonly placement: InstancePlacement;
  abstract readonly capacity: number;

  reserve(byteLength: number): Reservation {
    const buffer = new Uint8Array(byteLength);
    return { buffer, execute: (layout) => this.run({ data: buffer, ...layout }), release: () => undefined };
  }

  protected abstract run(batch: Batch): Execution;

  /** Executions waiting in `held()` until released, oldest first (tests that hold batches). */
  private readonly gate: (() => void)[] = [];

  /** Lets the oldest held execution finish. */
  release(): void {
    this.gate.shift()?.();
  }

  /** How many executions wait to be released. */
  get held(): number {
    return this.gate.length;
  }

  /** Holds the caller until release() lets it go. */
  protected hold(): Promise<void> {
    return new Promise<void>((r) => this.gate.push(r));
  }

  async close(): Promise<void> {}
}
