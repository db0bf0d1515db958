/**
 * Process plumbing for the benchmark: starting servers (Serval or the bare protocol servers)
 * on ephemeral ports, running perf_analyzer and bench-onnx, and parsing their output.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type CpuUse, cpuUse, snapshot } from './procstat.js';

export interface Server {
  name: string;
  pid: number;
  child: ChildProcess;
  http?: string;
  grpc?: string;
  log: string;
  command: string;
}

const live = new Set<Server>();

/** Starts `node ARGS...` in its own process group and waits for its "Started ... at HOST:PORT" lines. */
export async function startServer(
  name: string,
  nodeArgs: string[],
  log: string,
  want: { http: boolean; grpc: boolean },
  cwd: string,
  timeoutS = 180,
): Promise<Server> {
  const out = createWriteStream(log);
  const child = spawn(process.execPath, nodeArgs, { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const server: Server = { name, pid: child.pid!, child, log, command: `node ${nodeArgs.join(' ')}` };
  live.add(server);
  let text = '';
  const onData = (d: Buffer) => {
    out.write(d);
    text += d.toString();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  let exited: number | null | undefined;
  child.on('exit', (code) => {
    exited = code;
    live.delete(server);
  });
  const deadline = Date.now() + timeoutS * 1000;
  while (Date.now() < deadline) {
    if (exited !== undefined) throw new Error(`${name} exited during start-up (code ${exited}); see ${log}:\n${text.slice(-2000)}`);
    const h = text.match(/Started HTTPService at [^\s]*:(\d+)/);
    const g = text.match(/Started GRPCInferenceService at [^\s]*:(\d+)/);
    if (h) server.http = `127.0.0.1:${h[1]}`;
    if (g) server.grpc = `127.0.0.1:${g[1]}`;
    if ((!want.http || server.http) && (!want.grpc || server.grpc)) {
      if (!server.http || (await ready(server.http))) return server;
    }
    await sleep(100);
  }
  await stopServer(server);
  throw new Error(`${name} not ready after ${timeoutS}s; see ${log}`);
}

async function ready(hostPort: string): Promise<boolean> {
  try {
    const r = await fetch(`http://${hostPort}/v2/health/ready`);
    return r.status === 200;
  } catch {
    return false;
  }
}

export function alive(s: Server): boolean {
  return s.child.exitCode === null && s.child.signalCode === null;
}

export function exitDescription(s: Server): string {
  return s.child.signalCode ? `killed by ${s.child.signalCode}` : `exited with code ${s.child.exitCode}`;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** SIGTERM to the server's process group, SIGKILL after `graceS`. Resolves when it has exited. */
export async function stopServer(s: Server, graceS = 20): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return;
  const gone = new Promise<void>((r) => s.child.once('exit', () => r()));
  try {
    process.kill(-s.pid, 'SIGTERM');
  } catch {
    /* already gone */
  }
  const t = setTimeout(() => {
    try {
      process.kill(-s.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }, graceS * 1000);
  await gone;
  clearTimeout(t);
  live.delete(s);
}

/** Kills every server this process started (by process group id); for exit paths. */
export function killAll(): void {
  for (const s of live) {
    try {
      process.kill(-s.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  live.clear();
}

export interface RunResult {
  code: number | null;
  stdout: string;
  cpuS: number;
  use: CpuUse;
  timedOut: boolean;
  /** CLOCK_MONOTONIC µs at start and end (the clock V8's CPU profiles use), to cut a profile to this run. */
  monoUs: [number, number];
}

/**
 * Runs a command under /usr/bin/time (for its CPU time), with the CPU of `serverPid` and of the
 * machine sampled around it. Output goes to `log` (appended) and is returned.
 */
export async function runMeasured(cmd: string[], log: string, timeoutS: number, serverPid?: number): Promise<RunResult> {
  const timeFile = `${log}.time`;
  rmSync(timeFile, { force: true });
  const useTime = existsSync('/usr/bin/time');
  const argv = useTime ? ['/usr/bin/time', '-f', '%U %S', '-o', timeFile, ...cmd] : cmd;
  const before = snapshot(serverPid);
  const monoStart = Number(process.hrtime.bigint() / 1000n);
  // Its own process group, so a timeout kills perf_analyzer itself and not only /usr/bin/time
  // (the stdio pipes stay open, and 'close' never comes, while the grandchild lives).
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }, timeoutS * 1000);
  const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
  clearTimeout(timer);
  const monoEnd = Number(process.hrtime.bigint() / 1000n);
  const after = snapshot(serverPid);
  let cpuS = 0;
  if (useTime && existsSync(timeFile)) {
    const m = readFileSync(timeFile, 'utf8').match(/([\d.]+) ([\d.]+)\s*$/);
    if (m) cpuS = Number(m[1]) + Number(m[2]);
  }
  writeFileSync(log, `# ${cmd.join(' ')}\n${out}\n`, { flag: 'a' });
  return { code, stdout: out, cpuS, use: cpuUse(before, after, cpuS), timedOut, monoUs: [monoStart, monoEnd] };
}

// ------------------------------------------------------------------ perf_analyzer output

export interface PaResult {
  throughput: number;
  avgUs: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
  inferenceCount?: number;
  executionCount?: number;
  serverRequestUs?: number;
  serverOverheadUs?: number;
  queueUs?: number;
  computeInputUs?: number;
  computeInferUs?: number;
  computeOutputUs?: number;
}

/** Parses the last "Request concurrency: N" block of perf_analyzer's report. */
export function parsePerfAnalyzer(text: string): PaResult | undefined {
  const i = text.lastIndexOf('Request concurrency:');
  if (i < 0) return undefined;
  const block = text.slice(i);
  const num = (re: RegExp): number | undefined => {
    const m = block.match(re);
    return m ? Number(m[1]) : undefined;
  };
  const throughput = num(/Throughput: ([\d.]+) infer\/sec/);
  if (throughput === undefined) return undefined;
  const r: PaResult = {
    throughput,
    avgUs: num(/Avg latency: (\d+) usec/) ?? NaN,
    p50Us: num(/p50 latency: (\d+) usec/) ?? NaN,
    p90Us: num(/p90 latency: (\d+) usec/) ?? NaN,
    p99Us: num(/p99 latency: (\d+) usec/) ?? NaN,
    inferenceCount: num(/Inference count: (\d+)/),
    executionCount: num(/Execution count: (\d+)/),
  };
  const m = block.match(
    /Avg request latency: (\d+) usec \(overhead (\d+) usec \+ queue (\d+) usec \+ compute input (\d+) usec \+ compute infer (\d+) usec \+ compute output (\d+) usec\)/,
  );
  if (m) {
    [r.serverRequestUs, r.serverOverheadUs, r.queueUs, r.computeInputUs, r.computeInferUs, r.computeOutputUs] = m.slice(1, 7).map(Number);
  }
  return r;
}

// ------------------------------------------------------------------ bench-onnx output

export interface OnnxPoint {
  batch: number;
  itemsPerS: number;
  runs: number;
  p50Ms: number;
}

export function parseBenchOnnx(text: string): OnnxPoint[] {
  const out: OnnxPoint[] = [];
  for (const m of text.matchAll(/batch\s+(\d+):\s+([\d.]+) items\/s\s+\((\d+) runs, p50 ([\d.]+) ms\/run/g)) {
    out.push({ batch: Number(m[1]), itemsPerS: Number(m[2]), runs: Number(m[3]), p50Ms: Number(m[4]) });
  }
  return out;
}

// ------------------------------------------------------------------ config.pbtxt rewriting

/** Removes every top-level `key { ... }` / `key [ ... ]` / `key: [ ... ]` block from a text-format config. */
export function removeBlock(text: string, key: string): string {
  const re = new RegExp(`(^|\\n)[ \\t]*${key}[ \\t]*:?[ \\t\\n]*([\\[{])`);
  for (;;) {
    const m = re.exec(text);
    if (!m) return text;
    const open = m.index + m[0].length - 1;
    let depth = 0;
    let inStr = false;
    let i = open;
    for (; i < text.length; i++) {
      const ch = text[i];
      if (inStr) {
        if (ch === '\\') i++;
        else if (ch === '"') inStr = false;
        continue;
      }
      if (ch === '"') inStr = true;
      else if (ch === '#') {
        const nl = text.indexOf('\n', i);
        i = nl < 0 ? text.length : nl;
      } else if (ch === '[' || ch === '{') depth++;
      else if (ch === ']' || ch === '}') {
        depth--;
        if (depth === 0) break;
      }
    }
    const start = m.index + m[1]!.length;
    text = text.slice(0, start) + text.slice(i + 1).replace(/^[ \t]*\n?/, '');
  }
}

/** A variant of a model's config.pbtxt: renamed, with or without dynamic batching, N CPU instances. */
export function variantConfig(
  src: string,
  name: string,
  dynamic: boolean,
  instances: number,
  intraOpThreads?: number,
  spinning?: boolean,
): string {
  let s = src.replace(/^name[ \t]*:[ \t]*"[^"]*"/m, `name: "${name}"`);
  if (!/^name[ \t]*:/m.test(s)) s = `name: "${name}"\n${s}`;
  s = removeBlock(s, 'dynamic_batching');
  s = removeBlock(s, 'instance_group');
  s = s.replace(/\n+$/, '\n');
  if (dynamic) s += 'dynamic_batching { }\n';
  s += `instance_group [ { count: ${instances} kind: KIND_CPU } ]\n`;
  if (intraOpThreads !== undefined) s += `parameters { key: "intra_op_thread_count" value { string_value: "${intraOpThreads}" } }\n`;
  if (spinning) s += 'parameters { key: "session.intra_op.allow_spinning" value { string_value: "1" } }\n';
  return s;
}
