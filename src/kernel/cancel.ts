// Cancellation of one inference request (client disconnect or gRPC cancel). An AbortController
// costs an EventTarget per request and a DOMException on every abort (grpc-js reports
// 'cancelled' after many completed calls too); this has the one listener the scheduler needs.
export class Cancellation {
  private listener: (() => void) | undefined;
  private done = false;

  get cancelled(): boolean {
    return this.done;
  }

  cancel(): void {
    if (this.done) return;
    this.done = true;
    const l = this.listener;
    this.listener = undefined;
    l?.();
  }

  /** Sets the listener called on cancel (replacing any earlier one); undefined clears it. */
  onCancel(fn: (() => void) | undefined): void {
    this.listener = fn;
  }

  /** Clears the listener only if it is still `fn`: a later owner's (the instance's) stays. */
  offCancel(fn: () => void): void {
    if (this.listener === fn) this.listener = undefined;
  }
}
