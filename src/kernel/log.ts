// Structured, quiet-by-default logging: one logfmt line per event on stderr. Errors and warnings
// always print; `--log-verbose 1` adds info, 2 adds debug.

export type Fields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  error(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  debug(msg: string, fields?: Fields): void;
}

function fmt(v: string | number | boolean): string {
  const s = String(v);
  return /^[\w.:/@-]+$/.test(s) ? s : JSON.stringify(s);
}

export function createLogger(verbose: number, out: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Logger {
  const emit = (level: string, msg: string, fields?: Fields): void => {
    let line = `time=${new Date().toISOString()} level=${level} msg=${fmt(msg)}`;
    for (const [k, v] of Object.entries(fields ?? {})) if (v !== undefined) line += ` ${k}=${fmt(v)}`;
    out(line);
  };
  const none = (): void => undefined;
  return {
    error: (m, f) => emit('error', m, f),
    warn: (m, f) => emit('warn', m, f),
    info: verbose >= 1 ? (m, f) => emit('info', m, f) : none,
    debug: verbose >= 2 ? (m, f) => emit('debug', m, f) : none,
  };
}
