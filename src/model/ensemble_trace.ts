// Tracing an ensemble request as Triton does. Each step's request gets a child of the ensemble
// request's trace (Triton's EnsembleContext::InitStep spawns it and sets the step model's name,
// its actual version and the ensemble's request id); REQUEST_START is stamped as the step is
// handed to its model (InferenceServer::InferAsync, after the step's in-flight limit), REQUEST_END
// when the step's request is done (its release). The step model's scheduler stamps the queue and
// compute times, and at the TENSORS level the tensors, on the child as on any request. The
// ensemble's own trace gets its request's input tensors as it is queued (EnsembleScheduler::
// Enqueue) and its response's output tensors (InferenceResponse::Send).
import { asServalError } from '../kernel/errors.js';
import type { RequestTrace, TensorActivity } from '../kernel/trace.js';
import type { InferRequest, InferResponse, ResponseSink } from '../kernel/types.js';
import type { ModelStats } from '../stats/model_stats.js';
import type { LoadedVersion } from './loaded_version.js';

/**
 * Runs one step's request on its model, under a child trace when the ensemble request is traced.
 * A Python model's BLS call runs here too, its parent the calling request's trace.
 */
export function runStep(
  target: LoadedVersion,
  req: InferRequest,
  parent: RequestTrace | undefined,
  secondaryStats?: ModelStats,
): Promise<InferResponse> {
  const startNs = process.hrtime.bigint();
  if (!parent) return target.infer(req, startNs, secondaryStats);
  const trace = parent.child();
  trace.model(target.name, target.version, req.id);
  trace.stamp('REQUEST_START', startNs);
  req.trace = trace;
  let run: Promise<InferResponse>;
  try {
    run = target.infer(req, startNs, secondaryStats);
  } catch (e) {
    run = Promise.reject(e);
  }
  return run.finally(() => {
    trace.stamp('REQUEST_END', process.hrtime.bigint());
    trace.end();
  });
}

/**
 * Runs one step's request of a decoupled ensemble on its model, each response to `sink`: a
 * decoupled model's any number, another model's one. Under a child trace when the ensemble request
 * is traced, ended with the step's final response. Never throws: a refusal is the final error.
 */
export function streamStep(
  target: LoadedVersion,
  req: InferRequest,
  parent: RequestTrace | undefined,
  secondaryStats: ModelStats | undefined,
  sink: ResponseSink,
): void {
  const startNs = process.hrtime.bigint();
  let out = sink;
  if (parent) {
    const trace = parent.child();
    trace.model(target.name, target.version, req.id);
    trace.stamp('REQUEST_START', startNs);
    req.trace = trace;
    const ended = (final: boolean): void => {
      if (!final) return;
      trace.stamp('REQUEST_END', process.hrtime.bigint());
      trace.end();
    };
    out = {
      response: (res, final) => {
        ended(final);
        sink.response(res, final);
      },
      error: (e, final) => {
        ended(final);
        sink.error(e, final);
      },
    };
  }
  if (!target.decoupled) {
    let run: Promise<InferResponse>;
    try {
      run = target.infer(req, startNs, secondaryStats);
    } catch (e) {
      run = Promise.reject(e);
    }
    run.then(
      (res) => out.response(res, true),
      (e: unknown) => out.error(asServalError(e), true),
    );
    return;
  }
  try {
    target.stream(req, startNs, out, secondaryStats);
  } catch (e) {
    out.error(asServalError(e), true);
  }
}

/** The ensemble's own tensor records (TENSORS level). */
export function traceTensors(
  trace: RequestTrace | undefined,
  activity: TensorActivity,
  tensors: readonly { name: string; datatype: string; shape: readonly number[]; data: Uint8Array }[],
): void {
  if (!trace?.tensors) return;
  for (const t of tensors) trace.tensor(activity, t.name, t.datatype, t.shape, t.data);
}
