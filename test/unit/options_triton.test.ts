// src/options_triton.ts: every tritonserver 2.73 option starts Serval, getopt_long's abbreviations,
// and the ignored options' start-up lines.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULTS, parseArgs, type ServerOptions, UsageError } from '../../src/options.js';
import { IGNORED_OPTIONS, reportIgnoredOptions, TRITON_OPTIONS } from '../../src/options_triton.js';
import { capturedLogger } from '../helpers/frontends.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-options-triton-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function usageError(argv: string[]): string {
  try {
    parseArgs(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error(`expected parseArgs(${JSON.stringify(argv)}) to fail`);
}

/** Values tritonserver accepts for options whose values have a syntax of their own. */
const SAMPLES: Record<string, string> = {
  'log-format': 'ISO8601',
  'model-control-mode': 'explicit',
  'http-restricted-api': 'inference:k=v',
  'grpc-restricted-protocol': 'inference:k=v',
  'metrics-config': 'histogram_latencies=true',
  'trace-config': 'rate=5',
  'trace-level': 'TIMESTAMPS',
  'cache-config': 'local,size=1024',
  'backend-config': 'python,shm-default-byte-size=1024',
  'rate-limit': 'execution_count',
  'rate-limit-resource': 'R1:4',
  'sagemaker-safe-port-range': '8000-9000',
  'cuda-memory-pool-byte-size': '0:1024',
  'cuda-virtual-address-size': '0:1024',
  'model-load-gpu-limit': '0:0.5',
  'host-policy': 'gpu_0,numa-node=0',
  'min-supported-compute-capability': '6.0',
  'metrics-interval-ms': '500',
};

/** A value for the option that differs from Serval's default, so that taking it shows. */
function sample(name: string, arg: string): string {
  if (SAMPLES[name]) return SAMPLES[name];
  if (arg === 'bool') {
    const flag = parseArgs([`--${name}=false`]);
    return JSON.stringify(flag) === JSON.stringify(parseArgs([])) ? 'true' : 'false';
  }
  return arg === 'int' || arg === 'float' ? '7' : 'x7';
}

const withoutIgnored = (o: ServerOptions & { help: boolean }): string => JSON.stringify({ ...o, ignoredOptions: [] });

describe("tritonserver 2.73's options", () => {
  it('are listed once each, 90 long options (with --help and --allow-client-shm)', () => {
    const names = TRITON_OPTIONS.map(([n]) => n);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toHaveLength(90);
    for (const n of ['allow-client-shm', 'model-namespacing', 'grpc-max-connection-age', 'model-config-name', 'grpc-infer-thread-count']) {
      expect(names).toContain(n);
    }
    for (const n of Object.keys(IGNORED_OPTIONS)) expect(names).toContain(n);
  });

  it.each(TRITON_OPTIONS.filter(([n]) => n !== 'help'))(
    '--%s is accepted in both forms and either acts or is recorded as ignored',
    (name, arg) => {
      const defaults = withoutIgnored(parseArgs([]));
      const forms = arg === 'none' ? [[`--${name}`]] : [[`--${name}=${sample(name, arg)}`], [`--${name}`, sample(name, arg)]];
      for (const argv of forms) {
        const o = parseArgs(argv);
        if (name in IGNORED_OPTIONS) {
          expect(o.ignoredOptions).toEqual([[name, sample(name, arg)]]);
          expect(withoutIgnored(o)).toBe(defaults);
        } else {
          expect(o.ignoredOptions).toEqual([]);
          expect(withoutIgnored(o), `--${name} changed nothing`).not.toBe(defaults);
        }
      }
    },
  );

  it('--help and an abbreviation of it ask for the usage', () => {
    expect(parseArgs(['--help']).help).toBe(true);
    expect(parseArgs(['--he']).help).toBe(true);
  });

  it('the options other parts of Serval implement have their Triton defaults', () => {
    expect(DEFAULTS).toMatchObject({
      allowClientShm: false,
      modelLoadThreadCount: 4,
      modelLoadRetryCount: 0,
      modelNamespacing: false,
      modelConfigName: '',
      grpcUseSsl: false,
      grpcKeepaliveTime: 7200000,
      grpcKeepaliveTimeout: 20000,
      grpcHttp2MaxPingsWithoutData: 2,
      grpcHttp2MinRecvPingIntervalWithoutData: 300000,
      grpcHttp2MaxPingStrikes: 2,
      rateLimit: 'off',
    });
    expect(DEFAULTS.grpcMaxConnectionAge).toBeUndefined();
  });
});

describe('getopt_long abbreviations', () => {
  it('an unambiguous prefix names its option, in both forms', () => {
    expect(parseArgs(['--log-warn=false']).logWarning).toBe(false);
    expect(parseArgs(['--log-warn', 'false']).logWarning).toBe(false);
    expect(parseArgs(['--model-repo', '/m', '--model-s=/n']).modelRepositories).toEqual(['/m', '/n']);
    expect(parseArgs(['--backend-dir', '/opt/b']).ignoredOptions).toEqual([['backend-directory', '/opt/b']]);
    expect(parseArgs(['--max-inflight', '5']).maxInflightBytes).toBe(5);
  });

  it("every abbreviation tritonserver resolves names the same option here (Serval's own options make none ambiguous)", () => {
    const names = TRITON_OPTIONS.map(([n]) => n);
    let checked = 0;
    for (const [name, arg] of TRITON_OPTIONS) {
      if (name === 'help' || arg === 'none') continue;
      for (let i = 1; i < name.length; i++) {
        const prefix = name.slice(0, i);
        if (names.includes(prefix) || names.filter((n) => n.startsWith(prefix)).length !== 1) continue;
        const value = sample(name, arg);
        const full = parseArgs([`--${name}=${value}`]);
        expect(withoutIgnored(parseArgs([`--${prefix}=${value}`])), prefix).toBe(withoutIgnored(full));
        expect(parseArgs([`--${prefix}=${value}`]).ignoredOptions).toEqual(full.ignoredOptions);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(500);
  });

  it('an exact name wins over the longer names it prefixes', () => {
    expect(parseArgs(['--grpc-use-ssl=true'])).toMatchObject({ grpcUseSsl: true, grpcUseSslMutual: false });
    expect(parseArgs(['--metrics-config=histogram_latencies=true']).metricsConfig).toEqual(['histogram_latencies=true']);
  });

  it("an ambiguous prefix is refused with getopt's text, listing the candidates in tritonserver's order", () => {
    // Texts as tritonserver 2.51 prints them (tools/reference/tritonserver.sh --log=1).
    expect(usageError(['--log=1'])).toBe(
      "option '--log=1' is ambiguous; possibilities: '--log-verbose' '--log-info' '--log-warning' '--log-error' '--log-format' '--log-file'",
    );
    expect(usageError(['--grpc-use', 'true'])).toBe(
      "option '--grpc-use' is ambiguous; possibilities: '--grpc-use-ssl' '--grpc-use-ssl-mutual'",
    );
  });

  it("unknown options and missing values have getopt's texts", () => {
    expect(usageError(['--bogus'])).toBe("unrecognized option '--bogus'");
    expect(usageError(['--model-repository'])).toBe("option '--model-repository' requires an argument");
    expect(usageError(['--backend-directory'])).toBe("option '--backend-directory' requires an argument");
  });

  it('-- ends the options; an argument after it is refused', () => {
    expect(parseArgs(['--http-port', '1', '--']).httpPort).toBe(1);
    expect(usageError(['--', '--http-port=1'])).toBe("unexpected argument '--http-port=1'");
  });

  it('an ignored option still gets the value check tritonserver makes', () => {
    expect(usageError(['--http-thread-count=many'])).toMatch(/^--http-thread-count: invalid value 'many'/);
    expect(usageError(['--reuse-http-port=maybe'])).toMatch(/^--reuse-http-port: invalid value 'maybe'/);
  });

  it('the settings file takes the same names, ignored ones included', () => {
    const f = path.join(dir, 's.yaml');
    writeFileSync(f, 'backend-directory: /opt/tritonserver/backends\nmodel-load-thread-count: 2\nallow-client-shm: true\n');
    expect(parseArgs(['--config-file', f])).toMatchObject({
      modelLoadThreadCount: 2,
      allowClientShm: true,
      ignoredOptions: [['backend-directory', '/opt/tritonserver/backends']],
    });
  });
});

describe('ignored options at start-up', () => {
  it('each ignored option given is reported once, naming it and why', () => {
    const given = Object.keys(IGNORED_OPTIONS).flatMap((n) => {
      const arg = TRITON_OPTIONS.find(([m]) => m === n)![1];
      return [`--${n}=${sample(n, arg)}`];
    });
    const o = parseArgs([...given, '--backend-directory=/again']);
    const { log, lines } = capturedLogger();
    reportIgnoredOptions(o.ignoredOptions, log);
    expect(lines).toHaveLength(Object.keys(IGNORED_OPTIONS).length);
    for (const [n, why] of Object.entries(IGNORED_OPTIONS)) {
      const mine = lines.filter((l) => l.includes(`option --${n}=`) && l.includes(`is ignored: ${why}`));
      expect(mine, n).toHaveLength(1);
      expect(mine[0]).toMatch(/level=warn/);
    }
  });

  it('nothing is reported when no ignored option is given', () => {
    const { log, lines } = capturedLogger();
    reportIgnoredOptions(parseArgs(['--http-port', '1']).ignoredOptions, log);
    expect(lines).toEqual([]);
  });
});
