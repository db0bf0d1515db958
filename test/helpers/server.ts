// Starts the built server (dist/src/cli.js) as a child process on ephemeral ports, reads the real
// ports from its start-up lines, waits for it to answer, and stops it again.
import { type ChildProcess, spawn } from 'node:child_process';
import { CLI, ROOT } from './paths.js';

export interface ServerHandle {
  /** The server process's id (its memory is in /proc/PID/status). */
  pid: number;
  httpPort: number;
  grpcPort: number | undefined;
  /** http://127.0.0.1:PORT */
  url: string;
  /** 127.0.0.1:PORT for @grpc/grpc-js */
  grpcAddress: string;
  metricsPort(): number | undefined;
  stdout(): string;
  stderr(): string;
  /** True while the process has not exited. */
  alive(): boolean;
  /** SIGTERM, then SIGKILL after `graceMs` (default 10 s); resolves with the exit code (null if killed). */
  stop(graceMs?: number): Promise<number | null>;
}

export interface ExitResult {
  /** null when the process was still running at the deadline (it is killed then). */
  code: number | null;
  stdout: string;
  stderr: string;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

function baseArgs(repos: string[], extra: string[]): string[] {
  return [
    CLI,
    ...repos.flatMap((r) => ['--model-repository', r]),
    '--http-port',
    '0',
    '--grpc-port',
    '0',
    '--metrics-port',
    '0',
    '--http-address',
    '127.0.0.1',
    '--grpc-address',
    '127.0.0.1',
    '--metrics-address',
    '127.0.0.1',
    ...extra,
  ];
}

function launch(args: string[]): { child: ChildProcess; out: () => string; err: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  return { child, out: () => out, err: () => err, exited };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function httpOk(url: string): Promise<boolean> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await r.arrayBuffer();
    return r.status === 200;
  } catch {
    return false;
  }
}

export interface StartOptions {
  /** Wait for /v2/health/ready (default true); otherwise only for /v2/health/live. */
  waitReady?: boolean;
  timeoutMs?: number;
}

export async function startServer(repos: string | string[], extra: string[] = [], opts: StartOptions = {}): Promise<ServerHandle> {
  const list = Array.isArray(repos) ? repos : [repos];
  const p = launch(baseArgs(list, extra));
  const deadline = Date.now() + (opts.timeoutMs ?? 45_000);
  let exitCode: number | null | undefined;
  void p.exited.then((c) => (exitCode = c === null ? -1 : c));
  const describe = (): string => `\n--- stdout ---\n${p.out()}\n--- stderr ---\n${p.err()}`;

  let httpPort: number | undefined;
  while (httpPort === undefined) {
    if (exitCode !== undefined) throw new Error(`server exited with code ${exitCode} during start-up${describe()}`);
    if (Date.now() > deadline) {
      p.child.kill('SIGKILL');
      throw new Error(`server did not start in time${describe()}`);
    }
    const m = /Started HTTPService at [^\s:]+:(\d+)/.exec(p.out());
    if (m) httpPort = Number(m[1]);
    else await sleep(25);
  }
  const g = /Started GRPCInferenceService at [^\s:]+:(\d+)/.exec(p.out());
  const grpcPort = g ? Number(g[1]) : undefined;
  const url = `http://127.0.0.1:${httpPort}`;
  const probe = opts.waitReady === false ? '/v2/health/live' : '/v2/health/ready';
  while (!(await httpOk(url + probe))) {
    if (exitCode !== undefined) throw new Error(`server exited with code ${exitCode}${describe()}`);
    if (Date.now() > deadline) {
      p.child.kill('SIGKILL');
      throw new Error(`server never answered ${probe} with 200${describe()}`);
    }
    await sleep(50);
  }

  let stopping: Promise<number | null> | undefined;
  return {
    pid: p.child.pid!,
    httpPort,
    grpcPort,
    url,
    grpcAddress: `127.0.0.1:${grpcPort}`,
    metricsPort: () => {
      const m = /Started Metrics Service at [^\s:]+:(\d+)/.exec(p.out());
      return m ? Number(m[1]) : undefined;
    },
    stdout: p.out,
    stderr: p.err,
    alive: () => exitCode === undefined,
    stop: (graceMs = 10_000) => {
      stopping ??= (async () => {
        if (exitCode !== undefined) return exitCode;
        p.child.kill('SIGTERM');
        const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
        const code = await p.exited;
        clearTimeout(timer);
        return code;
      })();
      return stopping;
    },
  };
}

/**
 * Runs the server expecting it to exit by itself (a start-up failure). Returns its exit code, or
 * code null if it was still running `timeoutMs` later (it is killed then).
 */
export function runServerToExit(repos: string | string[], extra: string[] = [], timeoutMs = 30_000): Promise<ExitResult> {
  return runToExit(baseArgs(Array.isArray(repos) ? repos : [repos], extra), timeoutMs);
}

/** Runs the CLI with arbitrary arguments (no repository or port defaults). */
export function runCli(args: string[], timeoutMs = 15_000): Promise<ExitResult> {
  return runToExit([CLI, ...args], timeoutMs);
}

/** Waits for the process to exit; past `timeoutMs` it is killed and the code is null. */
async function runToExit(argv: string[], timeoutMs: number): Promise<ExitResult> {
  const p = launch(argv);
  const timeout = sleep(timeoutMs).then(() => 'timeout' as const);
  const r = await Promise.race([p.exited, timeout]);
  if (r === 'timeout') {
    p.child.kill('SIGKILL');
    await p.exited;
    return { code: null, stdout: p.out(), stderr: p.err() };
  }
  return { code: r, stdout: p.out(), stderr: p.err() };
}
