// The start-up trace setting from tritonserver's flags: `--trace-config <setting>=<value>` for the
// global settings (level, rate, count, mode) and `--trace-config triton,<setting>=<value>` for the
// Triton trace API's (file, log-frequency). The deprecated --trace-file/-level/-rate/-count/
// -log-frequency flags arrive here as the same entries.
import { parseLevel, TRACE_DEFAULTS, type TraceValues } from './settings.js';

/** A bad --trace-config value; the message names the entry (tritonserver's wording). */
export class TraceConfigError extends Error {}

function integer(entry: string, value: string, min: number): number {
  const n = /^[+-]?\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > 4294967295) {
    throw new TraceConfigError(`Bad option: "--trace-config ${entry}". Invalid option value. Got ${value}`);
  }
  return n;
}

/** Resolves the entries, in command-line order, into the start-up trace setting. */
export function parseTraceConfig(entries: readonly string[]): TraceValues {
  const values: TraceValues = { ...TRACE_DEFAULTS };
  let off = false;
  let opentelemetry = false;
  for (const entry of entries) {
    const comma = entry.indexOf(',');
    const eq = entry.indexOf('=', comma + 1);
    if (comma === 0) {
      throw new TraceConfigError(
        `No trace mode specified. --trace-config option format is <trace mode>,<setting>=<value> or <setting>=<value>. Got ${entry}`,
      );
    }
    const mode = comma > 0 ? entry.slice(0, comma).toLowerCase() : '';
    const setting = entry.slice(comma + 1, eq < 0 ? undefined : eq);
    const value = eq < 0 ? '' : entry.slice(eq + 1);
    if (eq < 0 || setting === '' || value === '') {
      throw new TraceConfigError(`--trace-config option format is '<trace mode>,<setting>=<value>'. Got ${entry}`);
    }
    if (mode !== '' && mode !== 'triton' && mode !== 'opentelemetry') {
      throw new TraceConfigError(`invalid value for trace mode option: ${mode}. Available options are "triton" and "opentelemetry"`);
    }
    // OpenTelemetry's own settings (url, resource, bsp_*) matter only in that mode, which is refused below.
    if (mode === 'opentelemetry') continue;
    const key = mode === '' ? setting : `triton,${setting}`;
    switch (key) {
      case 'level': {
        const l = parseLevel(value) ?? legacyLevel(value);
        if (l === undefined)
          throw new TraceConfigError(`Bad option: "--trace-config level". invalid value for trace level option: ${value}`);
        if (l === 0) off = true;
        values.level |= l;
        break;
      }
      case 'rate':
        values.rate = integer(entry, value, 0);
        break;
      case 'count':
        values.count = integer(entry, value, -1);
        break;
      case 'mode': {
        const m = value.toLowerCase();
        if (m === 'opentelemetry') opentelemetry = true;
        else if (m === 'triton') opentelemetry = false;
        else
          throw new TraceConfigError(`invalid value for trace mode option: ${value}. Available options are "triton" and "opentelemetry"`);
        break;
      }
      case 'triton,file':
        values.file = value;
        break;
      case 'triton,log-frequency':
        values.logFrequency = integer(entry, value, 0);
        break;
      default:
        throw new TraceConfigError(
          `unknown --trace-config setting '${entry}': global settings are level, rate, count and mode; triton,<setting> takes file and log-frequency`,
        );
    }
  }
  if (opentelemetry) {
    throw new TraceConfigError(
      "--trace-config mode=opentelemetry is not supported: Serval writes Triton's trace files (mode triton) and exports no OpenTelemetry spans",
    );
  }
  // An explicit OFF wins over any other level given (tritonserver's explicit_disable_trace).
  if (off) values.level = 0;
  return values;
}

/** The older --trace-level spellings tritonserver still accepts. */
function legacyLevel(value: string): number | undefined {
  const v = value.toLowerCase();
  if (v === 'false') return 0;
  if (v === 'true' || v === 'on' || v === 'min' || v === 'max') return parseLevel('TIMESTAMPS');
  return undefined;
}
