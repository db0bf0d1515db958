// The HTTP server is half-open: a client may send its whole request, shut down its sending side
// and still read the answer. To the server, that end looks the same as a client that closed its
// socket and left; only a write tells the two apart (a gone client's kernel answers it with a
// reset). So while a request is unanswered after the client's side ended, the server writes an
// interim `100 Continue` (RFC 9110 §15.2: a client must accept 1xx responses before the final
// one, expected or not) and, a moment later, a second one: a reset from the first makes the
// second fail, which closes the request, and a queued or running request of a client that left
// is cancelled as before (the routes cancel on the response's close). A half-closed client that
// is still there skips them and reads its answer.
import type { FastifyInstance } from 'fastify';

/** How long after the end of the client's side an unanswered request is probed (ms). */
const PROBE_AFTER_MS = 50;

/**
 * Once a client's side has ended: while `unanswered()`, writes an interim `100 Continue` after
 * PROBE_AFTER_MS and a second one as long again later (the lean path, fast_infer.ts, probes its
 * connections with this too). Returns what stops the probes.
 */
export function probeAfterEnd(unanswered: () => boolean, writeContinue: () => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  const probe = (left: number): void => {
    timer = undefined;
    if (!unanswered()) return;
    writeContinue();
    if (left > 1) timer = setTimeout(() => probe(left - 1), PROBE_AFTER_MS).unref();
  };
  if (unanswered()) timer = setTimeout(() => probe(2), PROBE_AFTER_MS).unref();
  return () => clearTimeout(timer);
}

export function probeHalfClosedClients(app: FastifyInstance): void {
  app.addHook('onRequest', (req, reply, done) => {
    const socket = req.raw.socket;
    const res = reply.raw;
    let stop: (() => void) | undefined;
    const unanswered = (): boolean => !res.headersSent && !res.writableEnded && !socket.destroyed;
    const ended = (): void => {
      stop = probeAfterEnd(unanswered, () => res.writeContinue());
    };
    if (socket.readableEnded) ended();
    else socket.once('end', ended);
    res.once('close', () => {
      socket.off('end', ended);
      stop?.();
    });
    done();
  });
}
