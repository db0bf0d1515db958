/**
 * Requests queued or executing in any of the server's schedulers. A scheduler marks an execution
 * lone (ExecLayout.lone) only when the whole server is nearly idle, not just its own model: a
 * model called by BLS sees one request at a time even when the server is busy.
 */
export class ServerLoad {
  pending = 0;
}
