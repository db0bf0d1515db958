// Structured logging: one logfmt line per event. Which lines print, in which format and where is
// one LogControl per server, changeable while it runs (Triton's logging extension):
//   log_error / log_warning / log_info   error, warn and info lines (each on by default)
//   log_verbose_level                    debug lines when ≥ 1 (0 by default)
//   log_format  default   `time=<RFC 3339, ms, UTC> level=<level> msg=... key=value ...`
//               ISO8601   Triton's ISO8601 prefix `YYYY-MM-DDThh:mm:ssZ <E|W|I>` then `msg=... key=value ...`
//   log_file                             lines go to this file (appended), else to stderr
// Every Logger made from a control follows it at once; components keep the Logger they were given.
import { closeSync, openSync, writeSync } from 'node:fs';
import { ServalError } from './errors.js';

export type Fields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  error(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  debug(msg: string, fields?: Fields): void;
}

export type LogFormat = 'default' | 'ISO8601';

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
  return s === 'default' || s === 'ISO8601';
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
  emit(level: 'error' | 'warn' | 'info' | 'debug', msg: string, fields?: Fields): void {
    const s = this.s;
    if (level === 'error' ? !s.error : level === 'warn' ? !s.warning : level === 'info' ? !s.info : s.verbose < 1) return;
    const now = new Date().toISOString();
    let line =
      s.format === 'ISO8601'
        ? `${now.slice(0, 19)}Z ${level === 'error' ? 'E' : level === 'warn' ? 'W' : 'I'} msg=${fmt(msg)}`
        : `time=${now} level=${level} msg=${fmt(msg)}`;
    for (const [k, v] of Object.entries(fields ?? {})) if (v !== undefined) line += ` ${k}=${fmt(v)}`;
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
    error: (m, f) => control.emit('error', m, f),
    warn: (m, f) => control.emit('warn', m, f),
    info: (m, f) => control.emit('info', m, f),
    debug: (m, f) => control.emit('debug', m, f),
  };
}
