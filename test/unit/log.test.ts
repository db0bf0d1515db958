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
const msgs = (lines: string[]): string[] => lines.map((l) => /msg=(\S+)/.exec(l)![1]!);

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

  it('default is logfmt with time= and level=; ISO8601 is Triton\'s "YYYY-MM-DDThh:mm:ssZ L" prefix then the fields', () => {
    const { control, lines, log } = capture();
    log.warn('disk low', { free_mb: 12 });
    control.update({ log_format: 'ISO8601' });
    log.error('boom');
    expect(lines[0]).toMatch(/^time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=warn msg="disk low" free_mb=12$/);
    expect(lines[1]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ E msg=boom$/);
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
    expect(() => parseArgs(['--trace-config', 'rate=fast'])).toThrow(/Invalid option value. Got fast/);
    expect(() => parseArgs(['--trace-config', 'mode=opentelemetry'])).toThrow(UsageError);
    expect(USAGE).toMatch(/--trace-config triton,SETTING=VALUE/);
    expect(USAGE).toMatch(/--log-format FORMAT/);
  });
});
