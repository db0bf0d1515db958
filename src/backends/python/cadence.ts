// How a Python instance's executions come and go, as two moving averages: how soon each is
// answered, and how soon the next is sent after an answer. They decide, for an execution that is
// its model's only one (ExecLayout.lone), whether the main thread keeps its event loop turning for
// the answer (kernel/awake.ts) and whether the stub polls for its next message after it
// (SPIN_SECONDS in the stub). Both pay off only when what they wait for comes soon: a loop or a
// stub polling for something that comes later takes a core from the threads that produce it
// (a large answer still on its way to the client, a BLS caller still working).

export class Cadence {
  private answerNs = 0n;
  private gapNs = 0n;
  private answeredAtNs = 0n;

  /** `awakeNs`: the longest answer the loop stays awake for; `spinNs`: the longest gap the stub polls for. */
  constructor(
    private readonly awakeNs: bigint,
    private readonly spinNs: bigint,
  ) {}

  /** An execution is sent at `nowNs`. Returns whether the stub should poll for the next one after it. */
  sending(nowNs: bigint, lone: boolean): boolean {
    if (!lone) return false;
    if (this.answeredAtNs > 0n) this.gapNs = (this.gapNs * 3n + (nowNs - this.answeredAtNs)) / 4n;
    return this.gapNs < this.spinNs;
  }

  /** Whether the event loop should stay awake for a lone execution's answer. */
  awake(lone: boolean): boolean {
    return lone && this.answerNs < this.awakeNs;
  }

  /** The execution sent at `sentNs` was answered at `nowNs`. */
  answered(sentNs: bigint, nowNs: bigint): void {
    this.answeredAtNs = nowNs;
    this.answerNs = (this.answerNs * 3n + (nowNs - sentNs)) / 4n;
  }
}
