// What every benchmark section's entry shares: its two common flags, the versions it reports,
// and a run that stops the servers it started however it ends.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { killAll } from './harness.js';
import { PERF_ANALYZER, ROOT } from './paths.js';

export interface SectionArgs {
  quick: boolean;
  /** The Markdown file whose marked block the section rewrites. */
  out: string;
}

/** `--quick` and `--out FILE`; anything else is an error. */
export function sectionArgs(argv: string[]): SectionArgs {
  const a: SectionArgs = { quick: false, out: path.join(ROOT, 'docs', 'benchmarks.md') };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    if (k === '--quick') a.quick = true;
    else if (k === '--out') a.out = path.resolve(argv[++i] ?? '');
    else throw new Error(`unknown argument ${k} (expected --quick, --out FILE)`);
  }
  return a;
}

/** Runs a section's main; on an error or a signal stops every server it started (and `cleanup`) first. */
export function runSection(name: string, main: () => Promise<void>, cleanup: () => void = killAll): void {
  const stop = (sig: string) => {
    console.error(`${name}: ${sig}, stopping the servers it started`);
    cleanup();
    process.exit(130);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  Promise.resolve()
    .then(main)
    .then(
      () => {
        cleanup(); // normally nothing is left; a server whose stop failed would keep the process alive
        process.exit(0);
      },
      (e: unknown) => {
        cleanup();
        console.error(`${name}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
        process.exit(1);
      },
    );
}

export function pkgVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** perf_analyzer 2.51 sometimes exits before flushing `--version`'s output into a pipe: retry, then fall back to the install path. */
export function paVersion(pa = PERF_ANALYZER): string {
  for (let i = 0; i < 5; i++) {
    let v: string | undefined;
    try {
      v = execFileSync('bash', ['-c', '"$0" --version 2>&1 | cat', pa], { encoding: 'utf8' }).split('\n').filter(Boolean).pop();
    } catch {
      v = undefined;
    }
    if (v && /Version/i.test(v)) return v;
  }
  try {
    const m = readFileSync(pa, 'utf8').match(/perf_analyzer-(\d+\.\d+\.\d+)/);
    if (m) return `${m[1]} (from its install path)`;
  } catch {
    /* a binary, not the wrapper */
  }
  return 'unknown';
}
