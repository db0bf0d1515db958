// The one-response case of a ResponseSink: a model that is not decoupled answers once, final.
import { asServalError } from './errors.js';
import type { InferResponse, ResponseSink } from './types.js';

/** Hands the one answer of `result` to `sink`: its response, final, or its error, final. */
export function answerOnce(result: Promise<InferResponse>, sink: ResponseSink): void {
  result.then(
    (res) => sink.response(res, true),
    (e: unknown) => sink.error(asServalError(e), true),
  );
}
