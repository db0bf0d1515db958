// Log settings changeable at run time (the logging extension's state, kernel/log.ts), and the
// start-up flags of logging and tracing.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ServalError } from '../../src/kernel/errors.js';
import { createLogger, LOG_DEFAULTS, LogControl } from '../../src/kernel/log.js';
import { parseArgs, USAGE, UsageError } from '../../src/options.js';
import { parseTraceConfig } from '../../src/trace/config.js';

function capture(settings = {}): { control: LogControl; lines: string[]; log: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const control = new LogControl(settings, (l) => lines.push(l));
  return { control, lines, log: createLogger(control) };
}

const logAll = (log: ReturnType<typeof createLogger>): void => {
  log.error('e1');
  log.warn('w1');
  log.info('i1');
  log.debug('d1');
};
/** The message of each line in Triton's default layout (`... file:line] "text"`). */
const msgs = (lines: string[]): string[] => lines.map((l) => JSON.parse(/\] (".*")$/.exec(l)![1]!) as string);

describe('LogControl', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'serval-log-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("starts with tritonserver's defaults and reports them as the extension does", () => {
    const { control } = capture();
    expect(control.settings).toEqual(LOG_DEFAULTS);
    expect(control.json()).toEqual({
      log_file: '',
      log_info: true,
      log_warning: true,
      log_error: true,
      log_verbose_level: 0,
      log_format: 'default',
    });
  });

  it('each level prints only while it is on; an update applies to loggers already made', () => {
    const { control, lines, log } = capture();
    logAll(log);
    expect(msgs(lines)).toEqual(['e1', 'w1', 'i1']);
    lines.length = 0;
    control.update({ log_info: false, log_error: false, log_verbose_level: 1 });
    logAll(log);
    expect(msgs(lines)).toEqual(['w1', 'd1']);
  });

  it("default and ISO8601 are tritonserver's layouts (UTC, µs, pid, caller's file:line, escaped text); logfmt is Serval's", () => {
    const { control, lines, log } = capture();
    const before = new Date();
    log.warn('disk "low"', { free_mb: 12, dir: '/var/x y' });
    control.update({ log_format: 'ISO8601' });
    log.error('boom');
    control.update({ log_format: 'logfmt' });
    log.info('disk low', { free_mb: 12 });
    const here = /log\.test\.ts:\d+/.source;
    const m = new RegExp(`^W(\\d\\d)(\\d\\d) (\\d\\d):(\\d\\d):(\\d\\d)\\.\\d{6} ${process.pid} ${here}\\] (.*)$`).exec(lines[0]!);
    expect(m, lines[0]).not.toBeNull();
    // The escaped text reads back as the message then its fields.
    expect(JSON.parse(m![6]!)).toBe('disk "low" free_mb=12 dir="/var/x y"');
    // Month, day and hour are UTC, as tritonserver's gmtime_r (give a second of slack at midnight).
    const [mo, da, hh] = [Number(m![1]), Number(m![2]), Number(m![3])];
    const after = new Date();
    expect([before, after].some((d) => d.getUTCMonth() + 1 === mo && d.getUTCDate() === da && d.getUTCHours() === hh)).toBe(true);
    expect(lines[1]).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ E ${process.pid} ${here}\\] "boom"$`));
    expect(lines[2]).toMatch(/^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info msg="disk low" free_mb=12$/);
    expect(control.json().log_format).toBe('logfmt');
  });

  it("a model's line (at: its file:line) takes that place and the text alone in Triton's layouts; logfmt keeps the fields", () => {
    const { control, lines, log } = capture();
    const fields = { model: 'm', instance: 'm_0_0' };
    log.warn('from "model"', fields, 'model.py:12');
    control.update({ log_format: 'ISO8601' });
    log.error('boom', fields, 'model.py:3');
    control.update({ log_format: 'logfmt' });
    log.info('hi', fields, 'model.py:7');
    expect(lines[0]).toMatch(new RegExp(`^W\\d{4} \\d\\d:\\d\\d:\\d\\d\\.\\d{6} ${process.pid} model\\.py:12\\] "from \\\\"model\\\\""$`));
    expect(lines[1]).toMatch(new RegExp(`Z E ${process.pid} model\\.py:3\\] "boom"$`));
    expect(lines[2]).toMatch(/ level=info msg=hi model=m instance=m_0_0 at=model\.py:7$/);
  });

  it('verbose lines carry I, as in tritonserver; TRITON_SERVER_ESCAPE_LOG_MESSAGES=0 prints the text unescaped', () => {
    const { lines, log } = capture({ verbose: 1 });
    log.debug('d1');
    expect(lines[0]).toMatch(/^I\d{4} /);
    const old = process.env.TRITON_SERVER_ESCAPE_LOG_MESSAGES;
    process.env.TRITON_SERVER_ESCAPE_LOG_MESSAGES = '0';
    try {
      log.info('plain "text"');
    } finally {
      if (old === undefined) delete process.env.TRITON_SERVER_ESCAPE_LOG_MESSAGES;
      else process.env.TRITON_SERVER_ESCAPE_LOG_MESSAGES = old;
    }
    expect(lines[1]).toMatch(/\] plain "text"$/);
  });

  it("checks every value first (Triton's texts) and applies none when one is bad", () => {
    const { control } = capture();
    const err = (u: Parameters<LogControl['update']>[0]): ServalError => {
      try {
        control.update(u);
      } catch (e) {
        return e as ServalError;
      }
      throw new Error('expected an error');
    };
    expect(err({ log_info: false, log_warning: 'yes' })).toMatchObject({
      code: 'INVALID_ARG',
      message: "expect boolean for 'log_warning'",
    });
    expect(err({ log_verbose_level: -1 }).message).toBe("expect int32 for 'log_verbose_level'");
    expect(err({ log_verbose_level: 1.5 }).message).toBe("expect int32 for 'log_verbose_level'");
    expect(err({ log_format: 'json' }).message).toBe('invalid argument for log_format, got: json');
    expect(err({ log_format: 3 }).message).toBe("expect string for 'log_format'");
    expect(err({ log_file: '/tmp/elsewhere.log' })).toMatchObject({
      code: 'UNSUPPORTED',
      message: 'log file location can not be updated through network protocol',
    });
    expect(err({ log_levels: true }).message).toMatch(/^unknown log setting 'log_levels'/);
    expect(control.settings).toEqual(LOG_DEFAULTS);
    // null leaves a setting as it is.
    expect(control.update({ log_info: null, log_verbose_level: 2 })).toMatchObject({ log_info: true, log_verbose_level: 2 });
  });

  it('a log file takes the lines (appended) until another target is set', () => {
    const file = path.join(dir, 'serval.log');
    const { control, lines, log } = capture({ file });
    log.error('to-file-1');
    expect(control.json().log_file).toBe(file);
    control.setFile('');
    log.error('to-stderr');
    control.setFile(file);
    log.error('to-file-2');
    control.close();
    expect(msgs(readFileSync(file, 'utf8').trim().split('\n'))).toEqual(['to-file-1', 'to-file-2']);
    expect(msgs(lines)).toEqual(['to-stderr']);
    expect(() => control.setFile(path.join(dir, 'missing', 'x.log'))).toThrow(/failed to open log file/);
  });

  it('createLogger(verbose, out) stays the fixed quiet logger: info from 1, debug from 2', () => {
    for (const [v, expected] of [
      [0, ['e1', 'w1']],
      [1, ['e1', 'w1', 'i1']],
      [2, ['e1', 'w1', 'i1', 'd1']],
    ] as const) {
      const lines: string[] = [];
      logAll(createLogger(v, (l) => lines.push(l)));
      expect(msgs(lines)).toEqual(expected);
    }
  });
});

describe("tritonserver's logging and trace flags", () => {
  it('parses --log-* and --trace-config (the deprecated --trace-* flags become the same entries)', () => {
    const o = parseArgs([
      '--model-repository=/m',
      '--log-info',
      'false',
      '--log-warning=false',
      '--log-error',
      '0',
      '--log-format',
      'ISO8601',
      '--log-file',
      '/tmp/serval.log',
      '--trace-config',
      'triton,file=/tmp/t.json',
      '--trace-rate',
      '5',
      '--trace-config',
      'level=TIMESTAMPS',
    ]);
    expect(o).toMatchObject({ logInfo: false, logWarning: false, logError: false, logFormat: 'ISO8601', logFile: '/tmp/serval.log' });
    expect(o.traceConfig).toEqual(['triton,file=/tmp/t.json', 'rate=5', 'level=TIMESTAMPS']);
    expect(parseTraceConfig(o.traceConfig)).toMatchObject({ file: '/tmp/t.json', rate: 5, level: 1 });
    expect(parseArgs(['--model-repository=/m'])).toMatchObject({
      logInfo: true,
      logWarning: true,
      logError: true,
      logFormat: 'default',
      traceConfig: [],
    });
  });

  it('refuses a bad --log-format or --trace-config at start-up with a usage error', () => {
    expect(() => parseArgs(['--log-format', 'json'])).toThrow(UsageError);
    expect(parseArgs(['--model-repository=/m', '--log-format', 'logfmt']).logFormat).toBe('logfmt');
    expect(() => parseArgs(['--trace-config', 'rate=fast'])).toThrow(/Invalid option value. Got fast/);
    expect(() => parseArgs(['--trace-config', 'mode=opentelemetry'])).toThrow(UsageError);
    expect(USAGE).toMatch(/--trace-config triton,SETTING=VALUE/);
    expect(USAGE).toMatch(/--log-format FORMAT/);
  });
});
