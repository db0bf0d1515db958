// src/options.ts: tritonserver-style flags and the YAML settings file.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BadOptionError, DEFAULT_SUMMARY_QUANTILES, DEFAULTS, parseArgs, parseMetricsConfig, UsageError } from '../../src/options.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-options-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function settings(yaml: string): string {
  const f = path.join(dir, `settings-${n++}.yaml`);
  writeFileSync(f, yaml);
  return f;
}

function usageError(argv: string[]): string {
  try {
    parseArgs(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error(`expected parseArgs(${JSON.stringify(argv)}) to fail`);
}

describe('flags', () => {
  it('no flags: the defaults', () => {
    expect(parseArgs([])).toEqual({ ...DEFAULTS, modelRepositories: [], help: false });
    expect(DEFAULTS).toMatchObject({ httpPort: 8000, grpcPort: 8001, metricsPort: 8002, exitOnError: true, strictReadiness: true });
  });

  it('--flag value and --flag=value', () => {
    const o = parseArgs([
      '--http-port',
      '9000',
      '--grpc-port=9001',
      '--metrics-port',
      '0',
      '--id=my-server',
      '--http-address',
      '127.0.0.1',
    ]);
    expect(o).toMatchObject({ httpPort: 9000, grpcPort: 9001, metricsPort: 0, id: 'my-server', httpAddress: '127.0.0.1' });
  });

  it('a value may itself contain "="', () => {
    expect(parseArgs(['--id=a=b']).id).toBe('a=b');
  });

  it('model repositories accumulate; --model-store is an alias', () => {
    expect(parseArgs(['--model-repository', '/a', '--model-repository=/b', '--model-store', '/c']).modelRepositories).toEqual([
      '/a',
      '/b',
      '/c',
    ]);
  });

  it('booleans: bare flag means true; true/false, 1/0, yes/no, on/off in either form', () => {
    expect(parseArgs(['--strict-readiness']).strictReadiness).toBe(true);
    expect(parseArgs(['--exit-on-error', '--http-port', '5']).exitOnError).toBe(true);
    for (const [v, want] of [
      ['false', false],
      ['0', false],
      ['no', false],
      ['off', false],
      ['true', true],
      ['1', true],
      ['YES', true],
      ['On', true],
    ] as const) {
      expect(parseArgs([`--allow-grpc=${v}`]).allowGrpc, v).toBe(want);
      expect(parseArgs(['--allow-metrics', v]).allowMetrics, v).toBe(want);
    }
    expect(parseArgs(['--strict-readiness=false', '--exit-on-error', 'false'])).toMatchObject({
      strictReadiness: false,
      exitOnError: false,
    });
  });

  it('the last occurrence of a flag wins', () => {
    expect(parseArgs(['--http-port', '1', '--http-port', '2']).httpPort).toBe(2);
  });

  it('--help and -h', () => {
    expect(parseArgs(['--help']).help).toBe(true);
    expect(parseArgs(['-h', '--http-port', '3']).help).toBe(true);
  });

  it('rejects unknown flags, positional arguments and missing values', () => {
    expect(usageError(['--bogus', '1'])).toBe("unrecognized option '--bogus'");
    expect(usageError(['--bogus=1'])).toBe("unrecognized option '--bogus=1'");
    expect(usageError(['model_repository'])).toBe("unexpected argument 'model_repository'");
    expect(usageError(['-p', '8000'])).toBe("unexpected argument '-p'");
    expect(usageError(['--id'])).toBe("option '--id' requires an argument");
  });

  it('rejects integers that are not non-negative integers', () => {
    for (const v of ['abc', '-1', '1.5', '8000x']) {
      expect(usageError(['--http-port', v])).toBe(`Bad option: "--http-port". Invalid option value. Got ${v}`);
    }
  });

  it('rejects an empty integer value instead of reading it as 0', () => {
    expect(usageError(['--http-port='])).toBe('Bad option: "--http-port". Invalid option value. Got ');
    expect(usageError(['--grpc-port', ' '])).toBe('Bad option: "--grpc-port". Invalid option value. Got  ');
  });

  it("refuses an integer past 2^53 with tritonserver's out-of-bound text, naming the option", () => {
    const e = (() => {
      try {
        parseArgs(['--http-port', '99999999999999999999']);
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(BadOptionError);
    expect(e).toMatchObject({ flag: 'http-port', reason: 'Provided option value is out of bound. Got 99999999999999999999' });
  });

  it('rejects booleans it cannot read', () => {
    expect(usageError(['--strict-readiness=maybe'])).toBe('Bad option: "--strict-readiness". invalid value for bool option: maybe');
  });

  it('HTTP body timeouts: defaults that carry 64 MiB over about 1 Mbit/s, flags and the settings file, 0 = none', () => {
    const o = parseArgs([]);
    expect([o.httpBodyIdleTimeoutSecs, o.httpBodyTimeoutSecs]).toEqual([60, 900]);
    expect((o.httpMaxInputSize * 8) / 1e6).toBeLessThan(o.httpBodyTimeoutSecs);
    const f = settings('http-body-idle-timeout-secs: 5\nhttp-body-timeout-secs: 30\n');
    expect(parseArgs(['--config-file', f])).toMatchObject({ httpBodyIdleTimeoutSecs: 5, httpBodyTimeoutSecs: 30 });
    expect(parseArgs(['--config-file', f, '--http-body-timeout-secs=0'])).toMatchObject({
      httpBodyIdleTimeoutSecs: 5,
      httpBodyTimeoutSecs: 0,
    });
    expect(usageError(['--http-body-idle-timeout-secs', '-1'])).toBe(
      'Bad option: "--http-body-idle-timeout-secs". Invalid option value. Got -1',
    );
    expect(usageError(['--http-body-timeout-secs', '1.5'])).toBe('Bad option: "--http-body-timeout-secs". Invalid option value. Got 1.5');
  });

  it("--metrics-config: Triton 2.73's latency settings, Triton's defaults, unknown settings and bad values refused by name", () => {
    const defaults = {
      histogramLatencies: false,
      counterLatencies: true,
      summaryLatencies: false,
      summaryQuantiles: DEFAULT_SUMMARY_QUANTILES,
    };
    expect(parseMetricsConfig(parseArgs([]).metricsConfig)).toEqual(defaults);
    expect(DEFAULT_SUMMARY_QUANTILES.map(([q]) => q)).toEqual([0.5, 0.9, 0.95, 0.99, 0.999]);
    const on = parseArgs(['--metrics-config', 'histogram_latencies=true']);
    expect(parseMetricsConfig(on.metricsConfig)).toEqual({ ...defaults, histogramLatencies: true });
    // The last of a repeated setting wins.
    expect(
      parseMetricsConfig(
        parseArgs(['--metrics-config=histogram_latencies=true', '--metrics-config=histogram_latencies=false']).metricsConfig,
      ),
    ).toEqual(defaults);
    const all = parseArgs([
      '--metrics-config=summary_latencies=true',
      '--metrics-config=counter_latencies=false',
      '--metrics-config=summary_quantiles=0.5:0.05, 0.99:0.001',
    ]);
    expect(parseMetricsConfig(all.metricsConfig)).toEqual({
      ...defaults,
      summaryLatencies: true,
      counterLatencies: false,
      summaryQuantiles: [
        [0.5, 0.05],
        [0.99, 0.001],
      ],
    });
    expect(usageError(['--metrics-config', 'summary_max_age=60'])).toBe(
      "--metrics-config: 'summary_max_age' is not a metrics setting (counter_latencies, summary_latencies, summary_quantiles, histogram_latencies)",
    );
    expect(usageError(['--metrics-config', 'histogram_latencies=maybe'])).toBe(
      "--metrics-config histogram_latencies expects true or false, got 'maybe'",
    );
    expect(usageError(['--metrics-config', 'summary_quantiles=0.5'])).toBe(
      "--metrics-config summary_quantiles: '0.5' is not <quantile>:<error> with both between 0 and 1",
    );
    expect(usageError(['--metrics-config', 'summary_quantiles=1.5:0.1'])).toBe(
      "--metrics-config summary_quantiles: '1.5:0.1' is not <quantile>:<error> with both between 0 and 1",
    );
  });
});

describe('YAML settings file (--config-file)', () => {
  it('uses the flag names as keys, with YAML types', () => {
    const f = settings(`
model-repository: [/models/a, /models/b]
http-port: 7000
strict-readiness: false
log-verbose: 2
id: from-yaml
http-max-input-size: 1048576
`);
    const o = parseArgs(['--config-file', f]);
    expect(o).toMatchObject({
      modelRepositories: ['/models/a', '/models/b'],
      httpPort: 7000,
      strictReadiness: false,
      logVerbose: 2,
      id: 'from-yaml',
      httpMaxInputSize: 1048576,
    });
    expect(o.grpcPort).toBe(DEFAULTS.grpcPort);
  });

  it('a single repository may be a plain string; --config-file=path works too', () => {
    expect(parseArgs([`--config-file=${settings('model-repository: /one\n')}`]).modelRepositories).toEqual(['/one']);
  });

  it('command-line flags win over the file, wherever they appear', () => {
    const f = settings('http-port: 7000\ngrpc-port: 7001\nallow-metrics: false\n');
    const o = parseArgs(['--http-port', '9000', '--config-file', f, '--allow-metrics=true']);
    expect(o).toMatchObject({ httpPort: 9000, grpcPort: 7001, allowMetrics: true });
  });

  it('repositories on the command line replace those of the file', () => {
    const f = settings('model-repository: [/from/file]\n');
    expect(parseArgs(['--config-file', f, '--model-repository', '/from/cli']).modelRepositories).toEqual(['/from/cli']);
    expect(parseArgs(['--config-file', f]).modelRepositories).toEqual(['/from/file']);
  });

  it('an empty file changes nothing', () => {
    expect(parseArgs(['--config-file', settings('')])).toEqual({ ...DEFAULTS, modelRepositories: [], help: false });
  });

  it('rejects unknown keys, bad values, non-mappings, unreadable files and bad YAML', () => {
    expect(usageError(['--config-file', settings('no-such-option: 1\n')])).toBe("unrecognized option '--no-such-option'");
    expect(usageError(['--config-file', settings('http-port: -5\n')])).toBe('Bad option: "--http-port". Invalid option value. Got -5');
    expect(usageError(['--config-file', settings('strict-readiness: sometimes\n')])).toBe(
      'Bad option: "--strict-readiness". invalid value for bool option: sometimes',
    );
    const list = settings('- http-port\n- 5\n');
    expect(usageError(['--config-file', list])).toBe(`settings file '${list}' must be a mapping of option names to values`);
    const missing = path.join(dir, 'missing.yaml');
    expect(usageError(['--config-file', missing])).toMatch(
      new RegExp(`^cannot read settings file '${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}': `),
    );
    expect(usageError(['--config-file', settings('http-port: [1\n')])).toMatch(/^cannot read settings file/);
  });
});
