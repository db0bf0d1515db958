// Helpers for the in-process front-end tests (test/unit/http_frontend.test.ts,
// test/unit/grpc_frontend.test.ts): a captured logger and a fake CoreApi. Tensors as bytes are in
// tensors.ts, the binary tensor extension in http.ts, the gRPC client in grpc.ts.
import type { CoreApi, SystemSharedMemoryStatus } from '../../src/core/api.js';
import type { DataType } from '../../src/kernel/datatypes.js';
import { ServalError } from '../../src/kernel/errors.js';
import { createLogger, LogControl, type Logger, type LogSettingsJson, type LogSettingsUpdate } from '../../src/kernel/log.js';
import { answerOnce } from '../../src/kernel/sink.js';
import type { RequestTrace } from '../../src/kernel/trace.js';
import type { InferRequest, InferResponse, ResponseSink } from '../../src/kernel/types.js';
import type { TraceSettingsJson, TraceSettingsUpdate } from '../../src/trace/settings.js';

/**
 * A logger whose lines (errors and warnings; verbose 0) are kept for the test to read, in the
 * `logfmt` format (`--log-format logfmt`): the tests read its fields.
 */
export function capturedLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger(new LogControl({ info: false, format: 'logfmt' }, (l) => lines.push(l))), lines };
}

const unused = (what: string) => (): never => {
  throw new Error(`fake core: ${what} was not expected to be called`);
};

/** The trace settings the fake core answers with, whatever it is asked. */
export const FAKE_TRACE_SETTINGS: TraceSettingsJson = {
  trace_level: ['TIMESTAMPS'],
  trace_rate: '1',
  trace_count: '-1',
  log_frequency: '0',
  trace_file: 'trace.json',
  trace_mode: 'triton',
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
 * Every call to `infer` is recorded in `requests`. Requests to model `traced` are traced (a
 * RecordedTrace each, in `traces`) and answered with no outputs. Trace and log settings calls
 * are recorded in `settingsCalls`; a model or log setting named like a case above fails that way.
 * System shared memory regions live in `regions`;
 * registering a region named after one of the cases above fails that way.
 */
export function fakeCore(): CoreApi & {
  requests: InferRequest[];
  /** Requests of `decoupled_async_N` / `decoupled_forever` that saw their cancellation. */
  cancelled: InferRequest[];
  regions: Map<string, SystemSharedMemoryStatus>;
  traces: RecordedTrace[];
  settingsCalls: { kind: 'trace' | 'log'; model?: string; update?: TraceSettingsUpdate | LogSettingsUpdate }[];
} {
  const requests: InferRequest[] = [];
  const cancelled: InferRequest[] = [];
  const traces: RecordedTrace[] = [];
  const settingsCalls: { kind: 'trace' | 'log'; model?: string; update?: TraceSettingsUpdate | LogSettingsUpdate }[] = [];
  const failing = ['boom', 'internal', 'busy', 'invalid', 'unsupported'];
  const regions = new Map<string, SystemSharedMemoryStatus>();
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
      if (req.modelName === 'traced') return Promise.resolve({ modelName: 'traced', modelVersion: '1', id: req.id, outputs: [] });
      return fail(req.modelName, 'infer');
    },
    /**
     * Model `decoupled_N` answers N responses (each with the request's inputs as outputs, the
     * last final), then nothing more; `decoupled_0` only the final flag; `decoupled_fail` one
     * response, then an error that ends it. `decoupled_async_N` answers as `decoupled_N` does,
     * each response a few milliseconds after the one before, from a timer; `decoupled_forever`
     * answers once at once, then nothing until the request is cancelled, which it records in
     * `cancelled` and ends with a final CANCELLED error (as does `decoupled_async_N` when
     * cancelled meanwhile). Any other model answers as infer() does.
     */
    inferStream(req: InferRequest, sink: ResponseSink): void {
      requests.push(req);
      const paced = /^decoupled_(async_(\d+)|forever)$/.exec(req.modelName);
      if (paced) {
        streamUntilCancelled(req, sink, paced[2] === undefined ? undefined : Number(paced[2]), cancelled);
        return;
      }
      const m = /^decoupled_(\d+|fail)$/.exec(req.modelName);
      if (!m) {
        requests.pop();
        answerOnce(this.infer(req), sink);
        return;
      }
      const response = (): InferResponse => ({
        modelName: req.modelName,
        modelVersion: '1',
        id: req.id,
        outputs: req.inputs.map((t) => ({ name: t.name, datatype: t.datatype as DataType, shape: t.shape, data: t.data })),
      });
      if (m[1] === 'fail') {
        sink.response(response(), false);
        sink.error(ServalError.internal('the model failed after its first response'), true);
        return;
      }
      const n = Number(m[1]);
      if (n === 0) sink.response(undefined, true);
      for (let i = 0; i < n; i++) sink.response(response(), i === n - 1);
    },
    isDecoupled: (name: string) => name.startsWith('decoupled_'),
    startTrace(model: string): RequestTrace | undefined {
      if (model !== 'traced') return undefined;
      const t = new RecordedTrace(traces.length + 1);
      traces.push(t);
      return t;
    },
    traceSettings(model: string, update?: TraceSettingsUpdate): TraceSettingsJson {
      settingsCalls.push({ kind: 'trace', model, update });
      if (failing.includes(model)) fail(model, 'trace setting');
      return { ...FAKE_TRACE_SETTINGS, trace_level: [...FAKE_TRACE_SETTINGS.trace_level] };
    },
    logSettings(update?: LogSettingsUpdate): LogSettingsJson {
      settingsCalls.push({ kind: 'log', update });
      for (const key of Object.keys(update ?? {})) if (failing.includes(key)) fail(key, 'log setting');
      return { log_file: '', log_info: true, log_warning: true, log_error: false, log_verbose_level: 3, log_format: 'ISO8601' };
    },
    registerSystemSharedMemory(name: string, key: string, offset: number, byteSize: number): void {
      if (['boom', 'internal', 'busy', 'invalid', 'unsupported'].includes(name)) fail(name, 'register');
      regions.set(name, { name, key, offset, byte_size: byteSize });
    },
    systemSharedMemoryStatus(name: string): SystemSharedMemoryStatus[] {
      if (!name) return [...regions.values()];
      const r = regions.get(name);
      if (!r) throw ServalError.notFound(`Unable to find system shared memory region: '${name}'`);
      return [r];
    },
    async unregisterSystemSharedMemory(name: string): Promise<void> {
      if (name) regions.delete(name);
      else regions.clear();
    },
    regions,
    traces,
    settingsCalls,
    cancelled,
  };
}

/** Each input back as an output of the same name: a response of the fake core's decoupled models. */
function echoResponse(req: InferRequest): InferResponse {
  return {
    modelName: req.modelName,
    modelVersion: '1',
    id: req.id,
    outputs: req.inputs.map((t) => ({ name: t.name, datatype: t.datatype as DataType, shape: t.shape, data: t.data })),
  };
}

/**
 * `n` echo responses a few milliseconds apart (the last final), or with `n` undefined one at once
 * and then none; a cancel stops it, is recorded in `cancelled`, and ends it with a final CANCELLED error.
 */
function streamUntilCancelled(req: InferRequest, sink: ResponseSink, n: number | undefined, cancelled: InferRequest[]): void {
  let timer: NodeJS.Timeout | undefined;
  let ended = false;
  const cancel = (): void => {
    if (ended) return;
    ended = true;
    clearTimeout(timer);
    cancelled.push(req);
    sink.error(ServalError.cancelled('request was cancelled'), true);
  };
  if (req.cancellation?.cancelled) {
    cancel();
    return;
  }
  req.cancellation?.onCancel(cancel);
  if (n === undefined) {
    sink.response(echoResponse(req), false);
    return;
  }
  let sent = 0;
  const next = (): void => {
    if (ended) return;
    if (sent === n) {
      ended = true;
      sink.response(undefined, true);
      return;
    }
    sent += 1;
    ended = sent === n;
    sink.response(echoResponse(req), ended);
    if (!ended) timer = setTimeout(next, 3);
  };
  timer = setTimeout(next, 3);
}

/** A trace that keeps what the front-end stamped on it. */
export class RecordedTrace implements RequestTrace {
  readonly stamps: { name: string; ns: bigint }[] = [];
  readonly tensorRecords: { activity: string; name: string; datatype: string; shape: number[]; bytes: number }[] = [];
  modelRecord: { name: string; version: number; requestId: string } | undefined;
  ended = 0;
  constructor(
    readonly id: number,
    readonly tensors = false,
  ) {}
  model(name: string, version: number, requestId: string): void {
    this.modelRecord = { name, version, requestId };
  }
  stamp(name: string, ns: bigint): void {
    this.stamps.push({ name, ns });
  }
  tensor(activity: string, name: string, datatype: string, shape: readonly number[], data: Uint8Array): void {
    this.tensorRecords.push({ activity, name, datatype, shape: [...shape], bytes: data.byteLength });
  }
  end(): void {
    this.ended += 1;
  }
  /** The traces of requests made for this one (ensemble steps), in the order they were made. */
  readonly children: RecordedTrace[] = [];
  child(): RecordedTrace {
    const c = new RecordedTrace(this.id * 100 + this.children.length + 1, this.tensors);
    this.children.push(c);
    return c;
  }
  names(): string[] {
    return this.stamps.map((s) => s.name);
  }
}

/** Lines of a captured (logfmt) log at level=error. */
export const errorLines = (lines: string[]): string[] => lines.filter((l) => / level=error /.test(l));
