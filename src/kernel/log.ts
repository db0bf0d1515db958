// Logging: one line per event. Which lines print, in which format and where is one LogControl
// per server, changeable while it runs (Triton's logging extension):
//   log_error / log_warning / log_info   error, warn and info lines (each on by default)
//   log_verbose_level                    debug lines when ≥ 1 (0 by default)
//   log_format  default   tritonserver's glog-style `I1125 07:31:46.123456 <pid> <file>:<line>] "<text>"`
//               ISO8601   tritonserver's `2025-11-25T07:31:46Z I <pid> <file>:<line>] "<text>"`
//               logfmt    Serval's own `time=<RFC 3339, ms, UTC> level=<level> msg=... key=value ...`
//   log_file                             lines go to this file (appended), else to stderr
// In Triton's two layouts <text> is the message then its fields as ` key=value`, JSON-escaped as
// tritonserver escapes messages (TRITON_SERVER_ESCAPE_LOG_MESSAGES=0 turns that off, as there), and
// <file>:<line> is the calling module's, as Node reports it (`repository.js:460` in the built server).
// Every Logger made from a control follows it at once; components keep the Logger they were given.
import { closeSync, openSync, writeSync } from 'node:fs';
import { ServalError } from './errors.js';

export type Fields = Record<string, string | number | boolean | undefined>;

/**
 * `at`: the `<file>:<line>` of a line that is not Serval's own (a Python model's pb_utils.Logger
 * line, located in its model.py as Triton prints it). Such a line is printed as the model wrote
 * it: in Triton's formats without the fields, which logfmt keeps.
 */
export interface Logger {
  error(msg: string, fields?: Fields, at?: string): void;
  warn(msg: string, fields?: Fields, at?: string): void;
  info(msg: string, fields?: Fields, at?: string): void;
  debug(msg: string, fields?: Fields, at?: string): void;
}

export type LogFormat = 'default' | 'ISO8601' | 'logfmt';

export interface LogSettings {
  file: string;
  info: boolean;
  warning: boolean;
  error: boolean;
  verbose: number;
  format: LogFormat;
}

/** tritonserver's defaults. */
export const LOG_DEFAULTS: LogSettings = { file: '', info: true, warning: true, error: true, verbose: 0, format: 'default' };

/** The settings as the logging extension reports them (both protocols). */
export interface LogSettingsJson {
  log_file: string;
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
  log_format: LogFormat;
}

/** An update in wire-neutral form: the values a client sent; null leaves a setting as it is. */
export type LogSettingsUpdate = Record<string, boolean | number | string | null>;

const UINT32_MAX = 4294967295;

export function isLogFormat(s: string): s is LogFormat {
  return s === 'default' || s === 'ISO8601' || s === 'logfmt';
}

const LETTER = { error: 'E', warn: 'W', info: 'I', debug: 'I' } as const; // Triton prints verbose lines as I too
const two = (n: number): string => String(n).padStart(2, '0');

/** `<file>:<line>` of the first caller outside this module (Triton prints its C++ source location). */
function callerLocation(): string {
  // Call sites rather than the formatted stack cost a fifth; two frames reach past createLogger's
  // wrapper. Where a stack tool (source maps, a test runner) formats the stack anyway, read the text.
  const limit = Error.stackTraceLimit;
  const prepare = Error.prepareStackTrace;
  Error.stackTraceLimit = 2;
  Error.prepareStackTrace = (_e, sites) => sites;
  const holder: { stack?: NodeJS.CallSite[] | string } = {};
  Error.captureStackTrace(holder, LogControl.prototype.emit);
  const stack = holder.stack; // the stack is made when first read: read it before restoring
  Error.stackTraceLimit = limit;
  Error.prepareStackTrace = prepare;
  const frames =
    typeof stack === 'string'
      ? stack
          .split('\n')
          .slice(1)
          .map((l) => /([^/\\\s(]+):(\d+):\d+\)?\s*$/.exec(l))
          .map((m) => (m ? { file: m[1]!, line: Number(m[2]) } : undefined))
      : (stack ?? []).map((site) => ({ file: (site.getFileName() ?? '').replace(/^.*[/\\]/, ''), line: site.getLineNumber() ?? 0 }));
  for (const f of frames) if (f?.file && !/^log\.[jt]s$/.test(f.file)) return `${f.file}:${f.line}`;
  return 'serval:0';
}

/** Triton's line prefix for `format` (UTC, as tritonserver's gmtime_r). */
function tritonPrefix(format: 'default' | 'ISO8601', level: keyof typeof LETTER, at?: string): string {
  // The wall clock for the time (timeOrigin + now() drifts from it over a long uptime); the
  // monotonic clock's sub-millisecond part for the last three of Triton's six digits.
  const d = new Date();
  const us = d.getTime() * 1000 + Math.floor((performance.now() % 1) * 1000);
  const hms = `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
  const where = `${process.pid} ${at ?? callerLocation()}]`;
  if (format === 'ISO8601') {
    return `${d.getUTCFullYear()}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}T${hms}Z ${LETTER[level]} ${where}`;
  }
  return `${LETTER[level]}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())} ${hms}.${String(us % 1_000_000).padStart(6, '0')} ${where}`;
}

function fmt(v: string | number | boolean): string {
  const s = String(v);
  return /^[\w.:/@-]+$/.test(s) ? s : JSON.stringify(s);
}

export class LogControl {
  private s: LogSettings;
  private fd: number | undefined;

  /** Opens `settings.file` when one is given (throws when it cannot be opened). */
  constructor(
    settings: Partial<LogSettings> = {},
    private readonly stderr: (line: string) => void = (l) => void process.stderr.write(`${l}\n`),
  ) {
    this.s = { ...LOG_DEFAULTS, ...settings, file: '' };
    if (settings.file) this.setFile(settings.file);
  }

  get settings(): Readonly<LogSettings> {
    return this.s;
  }

  json(): LogSettingsJson {
    const s = this.s;
    return {
      log_file: s.file,
      log_info: s.info,
      log_warning: s.warning,
      log_error: s.error,
      log_verbose_level: s.verbose,
      log_format: s.format,
    };
  }

  /**
   * Applies a logging-extension update with Triton's rules and texts. Every value is checked
   * before any is applied. The log file cannot be changed this way (Triton refuses it too: a
   * network client must not choose which file the server writes); setFile() is for start-up.
   */
  update(update: LogSettingsUpdate): LogSettingsJson {
    const next = { ...this.s };
    for (const [key, value] of Object.entries(update)) {
      if (value === null) continue;
      switch (key) {
        case 'log_file':
          throw ServalError.unsupported('log file location can not be updated through network protocol');
        case 'log_info':
        case 'log_warning':
        case 'log_error':
          if (typeof value !== 'boolean') throw ServalError.invalidArg(`expect boolean for '${key}'`);
          next[key === 'log_info' ? 'info' : key === 'log_warning' ? 'warning' : 'error'] = value;
          break;
        case 'log_verbose_level':
          if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > UINT32_MAX) {
            throw ServalError.invalidArg(`expect int32 for '${key}'`);
          }
          next.verbose = value;
          break;
        case 'log_format':
          if (typeof value !== 'string') throw ServalError.invalidArg(`expect string for '${key}'`);
          if (!isLogFormat(value)) throw ServalError.invalidArg(`invalid argument for log_format, got: ${value}`);
          next.format = value;
          break;
        default:
          throw ServalError.invalidArg(
            `unknown log setting '${key}'; the settings are log_file, log_info, log_warning, log_error, log_verbose_level, log_format`,
          );
      }
    }
    this.s = next;
    return this.json();
  }

  /** Sends lines to `file` (appended; '' = stderr). Throws, keeping the old target, when it cannot be opened. */
  setFile(file: string): void {
    let fd: number | undefined;
    if (file !== '') {
      try {
        fd = openSync(file, 'a');
      } catch (e) {
        throw ServalError.invalidArg(`failed to open log file '${file}': ${(e as Error).message}`);
      }
    }
    const old = this.fd;
    this.fd = fd;
    this.s = { ...this.s, file };
    if (old !== undefined) closeSync(old);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    this.s = { ...this.s, file: '' };
  }

  /** Writes one event if its level is on. */
  emit(level: 'error' | 'warn' | 'info' | 'debug', msg: string, fields?: Fields, at?: string): void {
    const s = this.s;
    if (level === 'error' ? !s.error : level === 'warn' ? !s.warning : level === 'info' ? !s.info : s.verbose < 1) return;
    let line: string;
    if (s.format === 'logfmt') {
      line = `time=${new Date().toISOString()} level=${level} msg=${fmt(msg)}`;
      for (const [k, v] of Object.entries(fields ?? {})) if (v !== undefined) line += ` ${k}=${fmt(v)}`;
      if (at) line += ` at=${fmt(at)}`;
    } else {
      let text = msg;
      if (!at) for (const [k, v] of Object.entries(fields ?? {})) if (v !== undefined) text += ` ${k}=${fmt(v)}`;
      line = `${tritonPrefix(s.format, level, at)} ${process.env.TRITON_SERVER_ESCAPE_LOG_MESSAGES === '0' ? text : JSON.stringify(text)}`;
    }
    if (this.fd === undefined) {
      this.stderr(line);
      return;
    }
    try {
      writeSync(this.fd, `${line}\n`);
    } catch {
      this.stderr(line); // the file went away (disk full, deleted mount): the line still gets out
    }
  }
}

/**
 * A Logger following `control`. The older form `createLogger(verbose, out)` is a fixed quiet
 * logger: errors and warnings, info from verbose 1, debug from verbose 2.
 */
export function createLogger(control: LogControl): Logger;
export function createLogger(verbose: number, out?: (line: string) => void): Logger;
export function createLogger(arg: LogControl | number, out?: (line: string) => void): Logger {
  const control = arg instanceof LogControl ? arg : new LogControl({ info: arg >= 1, verbose: arg >= 2 ? arg - 1 : 0 }, out);
  return {
    error: (m, f, at) => control.emit('error', m, f, at),
    warn: (m, f, at) => control.emit('warn', m, f, at),
    info: (m, f, at) => control.emit('info', m, f, at),
    debug: (m, f, at) => control.emit('debug', m, f, at),
  };
}
