// Where finished traces go, as Triton's TraceFile writes them: with a log frequency, each batch of
// traces becomes its own complete JSON array in `<file>.<n>` (n from 0); without one, batches are
// appended to `<file>` itself as one array that is closed (`]`) when the server shuts down.
// Writes are asynchronous but queued one after another, so their order is the order of saves.
import { type FileHandle, open, writeFile } from 'node:fs/promises';
import type { Logger } from '../kernel/log.js';

export class TraceFile {
  private index = 0;
  private handle: FileHandle | undefined;
  private opened = false;
  private closed = false;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    readonly name: string,
    private readonly log: Logger,
  ) {}

  /** Saves comma-joined trace records: to the next `<file>.<n>` or appended to `<file>`. */
  save(records: string, toIndexFile: boolean): void {
    if (toIndexFile) {
      const name = `${this.name}.${this.index++}`;
      this.enqueue(() => writeFile(name, `[${records}]`));
      return;
    }
    if (this.closed) return;
    const first = !this.opened;
    this.opened = true;
    this.enqueue(async () => {
      if (first) this.handle = await open(this.name, 'w');
      await this.handle?.write(first ? `[${records}` : `,${records}`);
    });
  }

  /** Closes the appended array; the returned promise settles once every queued write is done. */
  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.enqueue(async () => {
        const h = this.handle;
        this.handle = undefined;
        if (!h) return;
        try {
          await h.write(']');
        } finally {
          await h.close();
        }
      });
    }
    return this.queue;
  }

  private enqueue(write: () => Promise<unknown>): void {
    this.queue = this.queue.then(write).then(
      () => undefined,
      (e: Error) => this.log.error('failed creating trace file', { file: this.name, error: e.message }),
    );
  }
}
