// Helpers for the in-process front-end tests (test/unit/http_frontend.test.ts,
// test/unit/grpc_frontend.test.ts): a captured logger and a fake CoreApi. Tensors as bytes are in
// tensors.ts, the binary tensor extension in http.ts, the gRPC client in grpc.ts.
import type { CoreApi } from '../../src/core/api.js';
import { ServalError } from '../../src/kernel/errors.js';
import { createLogger, type Logger } from '../../src/kernel/log.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';

/** A logger whose lines (errors and warnings; verbose 0) are kept for the test to read. */
export function capturedLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger(0, (l) => lines.push(l)), lines };
}

const unused = (what: string) => (): never => {
  throw new Error(`fake core: ${what} was not expected to be called`);
};

/**
 * A CoreApi that is not InferenceCore. Its `infer` and `modelMetadata` fail according to the
 * model name, so the front-ends' one error path can be driven with any kind of error:
 *   boom        → a plain `new Error('boom')` thrown synchronously (an unexpected fault)
 *   boom_async  → a plain `new Error('boom')` as a rejected promise
 *   internal    → ServalError INTERNAL
 *   busy        → ServalError UNAVAILABLE
 *   invalid     → ServalError INVALID_ARG
 *   unsupported → ServalError UNSUPPORTED
 * Every call to `infer` is recorded in `requests`.
 */
export function fakeCore(): CoreApi & { requests: InferRequest[] } {
  const requests: InferRequest[] = [];
  const fail = (model: string, what: string): never => {
    switch (model) {
      case 'boom':
      case 'boom_async':
        throw new Error('boom');
      case 'internal':
        throw ServalError.internal(`${what} exploded inside the core`);
      case 'busy':
        throw ServalError.unavailable('Exceeds maximum queue size');
      case 'invalid':
        throw ServalError.invalidArg(`[request id: <id_unknown>] ${what}: bad request for model '${model}'`);
      case 'unsupported':
        throw ServalError.unsupported(`${what}: not supported by the fake core`);
      default:
        throw ServalError.notFound(`Request for unknown model: '${model}' is not found`);
    }
  };
  return {
    requests,
    isLive: () => true,
    isReady: () => true,
    isAccepting: () => true,
    serverMetadata: () => ({ name: 'fake', version: '9.9.9', extensions: [] }),
    isModelReady: () => false,
    modelMetadata: (name: string) => fail(name, 'metadata'),
    modelConfig: (name: string) => fail(name, 'config'),
    statistics: unused('statistics'),
    metricsSnapshot: () => [],
    repositoryIndex: async () => [],
    loadModel: unused('loadModel'),
    unloadModel: unused('unloadModel'),
    infer(req: InferRequest): Promise<InferResponse> {
      requests.push(req);
      if (req.modelName === 'boom_async') return Promise.reject(new Error('boom'));
      return fail(req.modelName, 'infer');
    },
  };
}

/** Lines of a captured log at level=error. */
export const errorLines = (lines: string[]): string[] => lines.filter((l) => / level=error /.test(l));
