// The values of a trace setting, and the checks of an update as Triton's front-ends make them
// (http_server.cc HandleTrace, grpc CommonHandler::RegisterTrace): one set of rules and error
// texts for both protocols. A front-end turns its wire form into a TraceSettingsUpdate first.
import { ServalError } from '../kernel/errors.js';

export const LEVEL_TIMESTAMPS = 1;
export const LEVEL_TENSORS = 2;

export type TraceMode = 'triton';

/** One trace setting's values. `level` is a bit set (0 = OFF); `count` -1 means unlimited. */
export interface TraceValues {
  level: number;
  rate: number;
  count: number;
  logFrequency: number;
  file: string;
  mode: TraceMode;
}

/** Triton's defaults: level OFF, rate 1000, count -1, log frequency 0, no file, mode triton. */
export const TRACE_DEFAULTS: TraceValues = { level: 0, rate: 1000, count: -1, logFrequency: 0, file: '', mode: 'triton' };

/**
 * An update in wire-neutral form: each named setting's values, or null to clear it (HTTP sends
 * JSON null, gRPC an empty value list). A cleared setting falls back to the global one (for a
 * model) or to the start-up value (for the global setting).
 */
export type TraceSettingsUpdate = Record<string, readonly string[] | null>;

/** The settings as both protocols report them: HTTP as this object, gRPC as value lists. */
export interface TraceSettingsJson {
  trace_level: string[];
  trace_rate: string;
  trace_count: string;
  log_frequency: string;
  trace_file: string;
  trace_mode: string;
}

/** A checked update: undefined = leave as is, null = clear, else the new value. */
export interface NewTraceValues {
  level?: number | null;
  rate?: number | null;
  count?: number | null;
  logFrequency?: number | null;
}

const UINT32_MAX = 4294967295;
const INT32_MAX = 2147483647;
/** Triton's TraceManager::MIN_TRACE_COUNT_VALUE. */
export const MIN_TRACE_COUNT = -1;

export function levelNames(level: number): string[] {
  if (level === 0) return ['OFF'];
  const names: string[] = [];
  if (level & LEVEL_TIMESTAMPS) names.push('TIMESTAMPS');
  if (level & LEVEL_TENSORS) names.push('TENSORS');
  return names;
}

export function settingsJson(v: TraceValues): TraceSettingsJson {
  return {
    trace_level: levelNames(v.level),
    trace_rate: String(v.rate),
    trace_count: String(v.count),
    log_frequency: String(v.logFrequency),
    trace_file: v.file,
    trace_mode: v.mode,
  };
}

/** Parses one trace level name (TIMESTAMPS, TENSORS or OFF → 0); undefined when unknown. */
export function parseLevel(name: string): number | undefined {
  switch (name.toUpperCase()) {
    case 'OFF':
      return 0;
    case 'TIMESTAMPS':
      return LEVEL_TIMESTAMPS;
    case 'TENSORS':
      return LEVEL_TENSORS;
    default:
      return undefined;
  }
}

function parseInteger(setting: string, raw: string, min: number, max: number): number {
  const s = raw.trim();
  if (!/^[+-]?\d+$/.test(s)) throw ServalError.invalidArg(`Unable to parse '${setting}', got: ${raw}`);
  const n = Number(s);
  if (setting === 'trace_count' && n < MIN_TRACE_COUNT && n >= -INT32_MAX - 1) {
    throw ServalError.invalidArg(`Unable to parse '${setting}'. Expecting value >= ${MIN_TRACE_COUNT}, got: ${raw}`);
  }
  if (n < min || n > max) {
    throw ServalError.invalidArg(`Unable to parse '${setting}', value is out of range [ ${min}, ${max} ], got: ${raw}`);
  }
  return n;
}

function single(setting: string, values: readonly string[]): string {
  if (values.length !== 1) throw ServalError.invalidArg(`expect only 1 value for '${setting}'`);
  return values[0]!;
}

const KNOWN = ['trace_file', 'trace_level', 'trace_rate', 'trace_count', 'log_frequency', 'trace_mode'];

/** Checks an update with Triton's rules and texts; throws a ServalError naming what is wrong. */
export function checkUpdate(update: TraceSettingsUpdate): NewTraceValues {
  const out: NewTraceValues = {};
  for (const key of Object.keys(update)) {
    if (!KNOWN.includes(key)) {
      throw ServalError.invalidArg(`unknown trace setting '${key}'; the settings are ${KNOWN.join(', ')}`);
    }
  }
  // Triton refuses this one outright: a network client must not choose where the server writes.
  if ('trace_file' in update) throw ServalError.unsupported('trace file location can not be updated through network protocol');
  const mode = update.trace_mode;
  if (mode && !(mode.length === 1 && mode[0]!.toLowerCase() === 'triton')) {
    throw ServalError.unsupported(`trace mode can not be updated through network protocol (this server traces in mode 'triton')`);
  }
  const level = update.trace_level;
  if (level === null || (level !== undefined && level.length === 0)) out.level = null;
  else if (level !== undefined) {
    let bits = 0;
    for (const name of level) {
      const l = parseLevel(name);
      if (l === undefined)
        throw ServalError.invalidArg(`Unable to parse 'trace_level', got: ${name} (expected OFF, TIMESTAMPS or TENSORS)`);
      if (l === 0 && level.length !== 1) throw ServalError.invalidArg("Expect only one trace level 'OFF' is specified");
      bits |= l;
    }
    out.level = bits;
  }
  const number = (key: string, min: number, max: number): number | null | undefined => {
    const v = update[key];
    if (v === undefined) return undefined;
    if (v === null || v.length === 0) return null;
    return parseInteger(key, single(key, v), min, max);
  };
  const rate = number('trace_rate', 0, UINT32_MAX);
  if (rate !== undefined) out.rate = rate;
  const count = number('trace_count', MIN_TRACE_COUNT, INT32_MAX);
  if (count !== undefined) out.count = count;
  const frequency = number('log_frequency', 0, UINT32_MAX);
  if (frequency !== undefined) out.logFrequency = frequency;
  return out;
}

/** Why a setting cannot trace ('' when it can), as Triton's TraceSetting words it. */
export function invalidReason(v: TraceValues): string {
  if (v.level === 0) return 'tracing is disabled';
  if (v.rate === 0) return 'sample rate must be non-zero';
  if (v.file === '') return 'trace file name is not given';
  return '';
}
