// The trace and logging extensions' RPCs (TraceSetting, LogSettings), and the gRPC side of a
// traced ModelInfer. Settings travel as maps of value lists (trace) and of bool/uint32/string
// oneofs (logging); the rules and error texts are the core's, shared with HTTP.
import type * as grpc from '@grpc/grpc-js';
import type { CoreApi, TraceSettingsJson, TraceSettingsUpdate } from '../../core/api.js';
import type { LogSettingsJson, LogSettingsUpdate } from '../../kernel/log.js';
import type { RequestTrace } from '../../kernel/trace.js';
import type { GRPCInferenceServiceHandlers } from './generated/inference/GRPCInferenceService.js';
import type { LogSettingsRequest__Output } from './generated/inference/LogSettingsRequest.js';
import type { LogSettingsResponse } from './generated/inference/LogSettingsResponse.js';
import type { TraceSettingRequest__Output } from './generated/inference/TraceSettingRequest.js';
import type { TraceSettingResponse } from './generated/inference/TraceSettingResponse.js';

/** The server's wrapper that maps every error of a handler through the one status table. */
type Unary = <Req, Res>(fn: (req: Req) => Res | Promise<Res>) => grpc.handleUnaryCall<Req, Res>;

type Handlers = Pick<GRPCInferenceServiceHandlers, 'TraceSetting' | 'LogSettings'>;

/** TraceSettingRequest.settings → the wire-neutral update; an empty value list clears a setting. */
export function traceUpdateOf(r: TraceSettingRequest__Output): TraceSettingsUpdate | undefined {
  const keys = Object.keys(r.settings);
  if (keys.length === 0) return undefined;
  const update: TraceSettingsUpdate = {};
  for (const k of keys) {
    const values = r.settings[k]!.value;
    update[k] = values.length === 0 ? null : values;
  }
  return update;
}

export function traceResponseOf(s: TraceSettingsJson): TraceSettingResponse {
  const settings: Record<string, { value: string[] }> = {};
  for (const [k, v] of Object.entries(s)) settings[k] = { value: Array.isArray(v) ? v : [v] };
  return { settings };
}

/** LogSettingsRequest.settings → the wire-neutral update; a value with no parameter set is null. */
export function logUpdateOf(r: LogSettingsRequest__Output): LogSettingsUpdate | undefined {
  const keys = Object.keys(r.settings);
  if (keys.length === 0) return undefined;
  const update: LogSettingsUpdate = {};
  for (const k of keys) {
    const v = r.settings[k]!;
    update[k] = v.parameter_choice ? (v[v.parameter_choice] ?? null) : null;
  }
  return update;
}

export function logResponseOf(s: LogSettingsJson): LogSettingsResponse {
  return {
    settings: {
      log_file: { string_param: s.log_file },
      log_info: { bool_param: s.log_info },
      log_warning: { bool_param: s.log_warning },
      log_error: { bool_param: s.log_error },
      log_verbose_level: { uint32_param: s.log_verbose_level },
      log_format: { string_param: s.log_format },
    },
  };
}

export function traceLoggingHandlers(core: CoreApi, unary: Unary): Handlers {
  return {
    TraceSetting: unary((r: TraceSettingRequest__Output) => traceResponseOf(core.traceSettings(r.model_name, traceUpdateOf(r)))),
    LogSettings: unary((r: LogSettingsRequest__Output) => logResponseOf(core.logSettings(logUpdateOf(r)))),
  };
}

const now = (): bigint => process.hrtime.bigint();

/**
 * ModelInfer's part of tracing: sampled when the call reaches the handler. grpc-js hands over a
 * call only once its message is read, so GRPC_WAITREAD_START and _END are that moment.
 */
export function grpcInferTrace(core: CoreApi, model: string): RequestTrace | undefined {
  const trace = core.startTrace(model);
  if (trace) {
    const t = now();
    trace.stamp('GRPC_WAITREAD_START', t);
    trace.stamp('GRPC_WAITREAD_END', t);
  }
  return trace;
}

/**
 * The response is encoded and about to be handed to grpc-js: GRPC_SEND_START now, and
 * GRPC_SEND_END (then the trace is written) once grpc-js has taken the message, after the
 * handler's callback has run.
 */
export function grpcTraceSending(trace: RequestTrace): void {
  trace.stamp('GRPC_SEND_START', now());
  setImmediate(() => {
    trace.stamp('GRPC_SEND_END', now());
    trace.end();
  });
}
