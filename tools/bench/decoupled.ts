/**
 * Decoupled models (docs/benchmarks.md block `decoupled`), three parts, rounds interleaved:
 *
 * 1. Streaming, timed per response on the client (tools/bench/decoupled/stream_load.ts): time to
 *    first response, time between responses and responses/s of Serval and the real tritonserver
 *    2.51 serving one temp repository of Python models (repeat_int32, text_generator), over the
 *    gRPC ModelStreamInfer stream and HTTP generate_stream (SSE), at concurrency 1 and 16.
 * 2. `perf_analyzer --streaming -i grpc` on repeat_int32 against both servers.
 * 3. The one-response path before and after the decoupled work: the build of the commit before it
 *    (a git worktree under /tmp, tools/bench/decoupled/setup-baseline.sh) against the current
 *    dist/, on `simple` (ONNX; HTTP, gRPC, gRPC --streaming) and a Python model that is not
 *    decoupled (py_identity_fp32).
 *
 *   node dist/tools/bench/decoupled.js [--quick] [--out FILE]
 *
 * Needs a built tree, perf_analyzer (bash tools/ci/setup-python.sh) and tritonserver
 * (bash tools/ci/setup-triton.sh, which this runs; it does nothing when the venv is up to date).
 * Raw output: tmp/bench/decoupled-<time>/.
 *
 * Environment: DECOUPLED_BASELINE (commit, default 4f3a059); DECOUPLED_CURRENT_DIR (a tree whose
 * dist/ is part 3's "current", default this one: e.g. a worktree of HEAD, to tell the commits
 * from uncommitted changes); DECOUPLED_PARTS (default 1,2,3).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { STREAM_WORKLOADS, type StreamProto, type StreamResult, TEXT_DELAY } from './decoupled/workloads.js';
import { NOISY_CORES } from './disturbance.js';
import { writeSection } from './doc_section.js';
import { alive, type PaResult, parsePerfAnalyzer, runMeasured, type Server, sleep, startServer, stopServer } from './harness.js';
import { PERF_ANALYZER, ROOT, rel, SERVAL_CLI } from './paths.js';
import { treeCpu, treeMemory } from './peers/proctree.js';
import { taskCpu, ticksPerSecond, waitForQuiet } from './procstat.js';
import { paVersion, pkgVersion, runSection, type SectionArgs, sectionArgs } from './section.js';
import { median } from './seeds/logic.js';
import { killEverything, SETUP_TRITON, startTriton, TRITON_SH, TRITON_VENV } from './tritonserver.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const STREAM_LOAD = path.join(HERE, 'decoupled', 'stream_load.js');
const SETUP_BASELINE = path.join(ROOT, 'tools', 'bench', 'decoupled', 'setup-baseline.sh');
const SERVAL_PY = path.join(ROOT, '.venv', 'bin', 'python3');
/** The tree whose dist/ is "current" in part 3: this one, or another build (DECOUPLED_CURRENT_DIR) to tell committed from uncommitted changes. */
const CURRENT_DIR = path.resolve(process.env.DECOUPLED_CURRENT_DIR ?? ROOT);
/** Which parts run (DECOUPLED_PARTS=3 for the A/B alone, when diagnosing): parts 1 and 2 share their servers. */
const PARTS = new Set((process.env.DECOUPLED_PARTS ?? '1,2,3').split(',').map((x) => x.trim()));
const SIMPLE_INPUT = path.join(ROOT, 'tools', 'perf', 'simple_input.json');
/** The last commit before the decoupled work (021b9f5, 89f7299). */
const BASELINE_COMMIT = process.env.DECOUPLED_BASELINE ?? '4f3a059';
const PY_MODEL = 'py_identity_fp32';
const REPEAT_PA_N = 32;

type Peer = 'serval' | 'triton';
type Build = 'baseline' | 'current';
type Part = '1' | '2' | '3';

interface Plan {
  rounds: number;
  warmupMs: number;
  durationMs: number;
  concurrency: number[];
  /** perf_analyzer windows: repeat_int32 --streaming, and the A/B. */
  paStream: { windowMs: number; stability: number; trials: number; requestCount: number };
  ab: { windowMs: number; stability: number; trials: number; requestCount: Record<string, number> };
  /** Per part, the time re-measuring pairs that had other load may take, and the wait for a quiet machine before each. */
  rerunS: Record<Part, number>;
  quietWaitS: number;
}

const FULL: Plan = {
  rounds: 2,
  warmupMs: 500,
  durationMs: 2500,
  concurrency: [1, 16],
  paStream: { windowMs: 2000, stability: 25, trials: 6, requestCount: 400 },
  ab: { windowMs: 1000, stability: 20, trials: 6, requestCount: { simple: 15000, [PY_MODEL]: 6000 } },
  rerunS: { '1': 30, '2': 30, '3': 60 },
  quietWaitS: 15,
};

const QUICK: Plan = {
  rounds: 1,
  warmupMs: 500,
  durationMs: 1500,
  concurrency: [1, 16],
  paStream: { windowMs: 1000, stability: 50, trials: 4, requestCount: 200 },
  ab: { windowMs: 700, stability: 50, trials: 4, requestCount: { simple: 5000, [PY_MODEL]: 2000 } },
  rerunS: { '1': 0, '2': 0, '3': 0 },
  quietWaitS: 0,
};

interface AbWorkload {
  id: string;
  model: string;
  proto: 'http' | 'grpc';
  streaming: boolean;
  conc: number;
  label: string;
}

const AB_WORKLOADS: AbWorkload[] = [];
for (const [proto, streaming, what] of [
  ['http', false, 'HTTP'],
  ['grpc', false, 'gRPC'],
  ['grpc', true, 'gRPC stream'],
] as const) {
  for (const conc of [1, 16]) {
    AB_WORKLOADS.push({
      id: `simple_${proto}${streaming ? '_stream' : ''}_c${conc}`,
      model: 'simple',
      proto,
      streaming,
      conc,
      label: `\`simple\`, ${what}, c${conc}`,
    });
  }
}
for (const conc of [1, 16]) {
  AB_WORKLOADS.push({
    id: `py_grpc_c${conc}`,
    model: PY_MODEL,
    proto: 'grpc',
    streaming: false,
    conc,
    label: `\`${PY_MODEL}\`, gRPC, c${conc}`,
  });
}

const log = (s: string) => console.log(`[decoupled ${new Date().toISOString().slice(11, 19)}] ${s}`);

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT }).trim();
  } catch {
    return 'unavailable';
  }
}

// ---------------------------------------------------------------------------------- records

interface Cores {
  /** The server's whole process tree; of it, the server process's main thread and its child processes (Python stubs). */
  server: number;
  main: number;
  stubs: number;
  loadGen: number;
  other: number;
}

interface StreamPoint {
  round: number;
  workload: string;
  proto: StreamProto;
  conc: number;
  peer: Peer;
  res?: StreamResult;
  error?: string;
  cores: Cores;
  notes: string[];
}

interface PaPoint {
  round: number;
  /** A/B workload id, or `repeat_c<N>` for part 2. */
  workload: string;
  who: Peer | Build;
  res?: PaResult & { responseThroughput?: number };
  error?: string;
  cores: Cores;
  notes: string[];
}

interface Memory {
  /** Process-tree RSS, bytes: models loaded and idle, and after the streaming runs. */
  idle: number;
  after: number;
}

class DecoupledRun {
  readonly plan: Plan;
  readonly work: string;
  readonly startedAt = new Date();
  readonly t0 = Date.now();
  readonly streamPoints: StreamPoint[] = [];
  readonly paPoints: PaPoint[] = [];
  readonly abPoints: PaPoint[] = [];
  readonly commands: string[] = [];
  readonly errors: string[] = [];
  readonly memory: Partial<Record<Peer, Memory>> = {};
  readonly logErrors: string[] = [];
  /** Pairs measured again because of other load: the first measurements, kept for results.json. */
  readonly discarded: unknown[] = [];
  readonly rerunLeftS: Record<Part, number>;
  baselineDir = '';
  tritonVersion = 'unknown';
  roundsRun = 0;

  constructor(readonly args: SectionArgs) {
    this.plan = args.quick ? QUICK : FULL;
    this.rerunLeftS = { ...this.plan.rerunS };
    const stamp = this.startedAt.toISOString().replace(/[:]/g, '').replace(/\..*$/, '');
    this.work = path.join(ROOT, 'tmp', 'bench', `decoupled-${stamp}${args.quick ? '-quick' : ''}`);
    for (const d of ['logs', 'stream_repo', 'ab_repo']) mkdirSync(path.join(this.work, d), { recursive: true });
  }

  private cmd(c: string[]): string {
    const s = c
      .map((x) => (x.startsWith(ROOT) ? rel(x) : x))
      .map((x) => (/[\s"']/.test(x) ? JSON.stringify(x) : x))
      .join(' ');
    if (!this.commands.includes(s)) this.commands.push(s);
    return s;
  }

  setup(): void {
    const run = (script: string, args: string[]) =>
      execFileSync('bash', [script, ...args], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    log(`tritonserver: bash ${rel(SETUP_TRITON)}`);
    run(SETUP_TRITON, []);
    if (!PARTS.has('3')) return;
    log(`the baseline build (${BASELINE_COMMIT}): bash ${rel(SETUP_BASELINE)} ${BASELINE_COMMIT}`);
    try {
      this.baselineDir = run(SETUP_BASELINE, [BASELINE_COMMIT]).trim().split('\n').pop()!;
    } catch (e) {
      // No git history here (an exported tree, a container): parts 1 and 2 still run.
      this.errors.push(`part 3 skipped: the baseline build failed (${e instanceof Error ? e.message.split('\n')[0] : String(e)})`);
    }
  }

  /** Runs a command under runMeasured with the server's whole process tree's CPU measured around it. */
  private async measured(c: string[], logFile: string, timeoutS: number, server: Server) {
    const cpu = () => ({ tree: treeCpu(server.pid), proc: taskCpu(server.pid), main: taskCpu(server.pid, server.pid) });
    const cpu0 = cpu();
    const t0 = performance.now();
    const r = await runMeasured(c, logFile, timeoutS);
    const cpu1 = cpu();
    const perWall = (jiffies: number) => jiffies / ticksPerSecond() / ((performance.now() - t0) / 1000);
    const serverCores = perWall(cpu1.tree - cpu0.tree);
    const cores: Cores = {
      server: serverCores,
      main: perWall(cpu1.main - cpu0.main),
      stubs: perWall(cpu1.tree - cpu0.tree - (cpu1.proc - cpu0.proc)),
      loadGen: r.use.loadGenCores,
      other: Math.max(0, r.use.machineBusyCores - serverCores - r.use.loadGenCores),
    };
    return { r, cores };
  }

  // ------------------------------------------------------------------ part 1: streaming, per response

  async streamPoint(server: Server, peer: Peer, workload: string, proto: StreamProto, conc: number, round: number): Promise<StreamPoint> {
    const url = proto === 'grpc' ? server.grpc! : server.http!;
    const c = [
      process.execPath,
      STREAM_LOAD,
      '--proto',
      proto,
      '--url',
      url,
      '--workload',
      workload,
      '--concurrency',
      String(conc),
      '--warmup-ms',
      String(this.plan.warmupMs),
      '--duration-ms',
      String(this.plan.durationMs),
    ];
    this.cmd(c.map((x) => (x === url ? 'HOST:PORT' : x)));
    const logFile = path.join(this.work, 'logs', `stream_${peer}_${workload}_${proto}_c${conc}.log`);
    const timeoutS = (this.plan.warmupMs + this.plan.durationMs) / 1000 + 60;
    const { r, cores } = await this.measured(c, logFile, timeoutS, server);
    const p: StreamPoint = { round, workload, proto, conc, peer, cores, notes: [] };
    const line = r.stdout
      .split('\n')
      .reverse()
      .find((l) => l.startsWith('{'));
    if (r.code === 0 && line) p.res = JSON.parse(line) as StreamResult;
    else p.error = r.timedOut ? 'timed out' : `exit ${r.code}: ${r.stdout.trim().split('\n').slice(-3).join(' | ')}`;
    if (p.res?.failed) p.error = `${p.res.failed} request(s) failed: ${p.res.firstError}`;
    if (p.error) this.errors.push(`stream ${peer} ${workload} ${proto} c${conc} round ${round}: ${p.error}`);
    const s = p.res;
    log(
      `  ${peer.padEnd(6)} ${workload} ${proto.padEnd(4)} c${String(conc).padEnd(2)} ${s ? `${s.responsesPerS.toFixed(0).padStart(6)} resp/s, first ${s.ttfr.p50.toFixed(2)}/${s.ttfr.p99.toFixed(2)} ms, between ${s.gap.p50.toFixed(3)}/${s.gap.p99.toFixed(3)} ms` : `FAILED ${p.error}`}; cores server ${cores.server.toFixed(2)} client ${cores.loadGen.toFixed(2)} other ${cores.other.toFixed(2)}`,
    );
    return p;
  }

  /**
   * Measures one pair (the two servers, or the two builds, on one workload). When other processes
   * loaded the machine during either, and the part still has re-run time, waits for a quiet
   * machine and measures the pair again: a ratio needs both sides measured alike.
   */
  async pair<T extends { cores: Cores; notes: string[] }>(part: Part, run: () => Promise<T[]>): Promise<T[]> {
    const first = await run();
    if (!first.some((q) => q.cores.other > NOISY_CORES) || this.rerunLeftS[part] <= 0) return first;
    const t0 = Date.now();
    const quiet = await waitForQuiet(this.plan.quietWaitS, NOISY_CORES);
    log(`    other load during the pair; ${quiet ? 'quiet again' : `still busy after ${this.plan.quietWaitS} s`}, measuring it again`);
    const second = await run();
    this.rerunLeftS[part] -= (Date.now() - t0) / 1000;
    for (const q of second)
      q.notes.push(`re-run: other load during the first pair (${first.map((x) => x.cores.other.toFixed(2)).join(', ')} cores)`);
    this.discarded.push(...first);
    return second;
  }

  // ------------------------------------------------------------------ perf_analyzer (parts 2 and 3)

  async paPoint(
    server: Server,
    who: Peer | Build,
    id: string,
    base: string[],
    win: { windowMs: number; stability: number; trials: number; requestCount: number },
    round: number,
  ): Promise<PaPoint> {
    const notes: string[] = [];
    const logFile = path.join(this.work, 'logs', `pa_${who}_${id}.log`);
    const attempt = async (stability: number, trials: number, count = 0) => {
      const c = [...base];
      if (count > 0) c.push('--request-count', String(count));
      else c.push('-p', String(win.windowMs), '-s', String(stability), '-r', String(trials));
      this.cmd(c.map((x) => (x === server.grpc || x === server.http ? 'HOST:PORT' : x)));
      return this.measured(c, logFile, Math.ceil((win.windowMs / 1000) * (trials + 3) * 2 + 40), server);
    };
    const unstable = (x: Awaited<ReturnType<typeof attempt>>) => x.r.code !== 0 && /Failed to obtain stable measurement/.test(x.r.stdout);
    let a = await attempt(win.stability, win.trials);
    const looser = Math.max(50, win.stability * 2);
    if (unstable(a)) {
      notes.push(`unstable at -s ${win.stability}; re-run with -s ${looser}`);
      a = await attempt(looser, win.trials + 4);
    }
    if (unstable(a)) {
      notes.push(`still unstable; one measurement of --request-count ${win.requestCount}`);
      a = await attempt(0, 0, win.requestCount);
    }
    const reported = /Inferences\/Second vs\. Client/.test(a.r.stdout);
    if (a.r.timedOut && reported) notes.push('perf_analyzer hung after its report and was killed; the report is used');
    const res = a.r.code === 0 || (a.r.timedOut && reported) ? parsePerfAnalyzer(a.r.stdout) : undefined;
    const p: PaPoint = { round, workload: id, who, cores: a.cores, notes };
    if (res) {
      const rt = a.r.stdout.slice(a.r.stdout.lastIndexOf('Request concurrency:')).match(/Response Throughput: ([\d.]+) infer\/sec/);
      p.res = { ...res, ...(rt && { responseThroughput: Number(rt[1]) }) };
    } else {
      p.error = a.r.timedOut ? 'timed out' : `exit ${a.r.code}: ${a.r.stdout.trim().split('\n').slice(-3).join(' | ')}`;
      this.errors.push(`perf_analyzer ${who} ${id} round ${round}: ${p.error}`);
    }
    if (a.cores.other > NOISY_CORES) notes.push(`noisy: other processes used ${a.cores.other.toFixed(2)} cores`);
    log(
      `  ${who.padEnd(8)} ${id.padEnd(22)} ${p.res ? `${p.res.throughput.toFixed(1).padStart(8)} infer/s${p.res.responseThroughput ? ` (${p.res.responseThroughput.toFixed(0)} resp/s)` : ''}, p50 ${(p.res.p50Us / 1000).toFixed(2)} ms, p99 ${(p.res.p99Us / 1000).toFixed(2)} ms` : `FAILED ${p.error}`}; cores server ${a.cores.server.toFixed(2)} pa ${a.cores.loadGen.toFixed(2)} other ${a.cores.other.toFixed(2)}`,
    );
    return p;
  }

  // ------------------------------------------------------------------ parts 1 and 2: Serval vs tritonserver

  async servalVsTriton(): Promise<void> {
    const repo = path.join(this.work, 'stream_repo');
    for (const m of ['repeat_int32', 'text_generator'])
      cpSync(path.join(ROOT, 'model_repository', m), path.join(repo, m), { recursive: true });
    const paInput = path.join(this.work, 'repeat_int32_input.json');
    writeFileSync(
      paInput,
      JSON.stringify({
        data: [
          {
            IN: { content: Array.from({ length: REPEAT_PA_N }, (_, i) => i), shape: [REPEAT_PA_N] },
            DELAY: { content: new Array<number>(REPEAT_PA_N).fill(0), shape: [REPEAT_PA_N] },
            WAIT: { content: [0], shape: [1] },
          },
        ],
      }),
    );
    const logs = path.join(this.work, 'logs');
    const servalArgs = [SERVAL_CLI, '--model-repository', repo, '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'];
    this.cmd([process.execPath, ...servalArgs]);
    const servers: Record<Peer, Server> = {
      serval: await startServer('serval', servalArgs, path.join(logs, 'server_serval.log'), { http: true, grpc: true }, ROOT),
      triton: await startTriton(repo, path.join(logs, 'server_triton.log')),
    };
    this.cmd(['bash', TRITON_SH, repo, 'HTTP_PORT', 'GRPC_PORT', 'METRICS_PORT']);
    try {
      this.tritonVersion = ((await (await fetch(`http://${servers.triton.http}/v2`)).json()) as { version: string }).version;
    } catch {
      /* stays unknown */
    }
    try {
      await sleep(1500);
      for (const peer of ['serval', 'triton'] as const) this.memory[peer] = { idle: treeMemory(servers[peer].pid).rss, after: 0 };
      for (let round = 1; round <= this.plan.rounds; round++) {
        const order: Peer[] = round % 2 === 1 ? ['serval', 'triton'] : ['triton', 'serval'];
        log(`streaming, round ${round}: ${order.join(', ')} per workload`);
        if (PARTS.has('1'))
          for (const w of STREAM_WORKLOADS)
            for (const proto of ['grpc', 'sse'] as const)
              for (const conc of this.plan.concurrency)
                this.streamPoints.push(
                  ...(await this.pair('1', async () => {
                    const pts: StreamPoint[] = [];
                    for (const peer of order) pts.push(await this.streamPoint(servers[peer], peer, w.id, proto, conc, round));
                    return pts;
                  })),
                );
        if (PARTS.has('2')) log(`perf_analyzer --streaming, round ${round}`);
        for (const conc of PARTS.has('2') ? this.plan.concurrency : [])
          this.paPoints.push(
            ...(await this.pair('2', async () => {
              const pts: PaPoint[] = [];
              for (const peer of order) {
                const s = servers[peer];
                const base = [PERF_ANALYZER, '-m', 'repeat_int32', '-u', s.grpc!, '-i', 'grpc', '--streaming', '--input-data', paInput];
                base.push('-b', '1', '--concurrency-range', `${conc}:${conc}`);
                pts.push(await this.paPoint(s, peer, `repeat_c${conc}`, base, this.plan.paStream, round));
              }
              return pts;
            })),
          );
        this.roundsRun = round;
      }
      await sleep(1500);
      for (const peer of ['serval', 'triton'] as const) {
        const s = servers[peer];
        if (!alive(s)) this.errors.push(`${peer} (pid ${s.pid}) had exited by the end of the streaming runs; see ${rel(s.log)}`);
        else this.memory[peer]!.after = treeMemory(s.pid).rss;
      }
    } finally {
      for (const s of Object.values(servers)) await stopServer(s);
    }
    this.scanLogs(servers.serval.log, 'Serval');
  }

  /** Server-side errors are misbehaviour worth reporting: collect Serval's error lines. */
  scanLogs(file: string, who: string): void {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return;
    }
    // tritonserver's E/W lines (both its layouts, also Serval's default) and Serval's logfmt ones.
    const lines = text.split('\n').filter((l) => /^[EW]\d{4} |^\S+Z [EW] \d|level=error|level=warn|Error:|uncaught/i.test(l));
    for (const l of lines.slice(0, 5)) this.logErrors.push(`${who} (${rel(file)}): ${l.slice(0, 300)}`);
    if (lines.length > 5) this.logErrors.push(`${who}: ${lines.length - 5} more such lines`);
  }

  // ------------------------------------------------------------------ part 3: the one-response path, before / after

  async abRuns(): Promise<void> {
    const repo = path.join(this.work, 'ab_repo');
    cpSync(path.join(ROOT, 'model_repository', 'simple'), path.join(repo, 'simple'), { recursive: true });
    cpSync(path.join(ROOT, 'test', 'python_models', PY_MODEL), path.join(repo, PY_MODEL), { recursive: true });
    const pyInput = path.join(this.work, `${PY_MODEL}_input.json`);
    writeFileSync(pyInput, JSON.stringify({ data: [{ INPUT0: { content: Array.from({ length: 16 }, (_, i) => i + 0.5), shape: [16] } }] }));
    const logs = path.join(this.work, 'logs');
    const flags = ['--model-repository', repo, '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'];
    // Both builds run their Python models with the same interpreter (the baseline's own .venv does not exist).
    flags.push(`--backend-config=python,interpreter=${SERVAL_PY}`);
    const cli: Record<Build, string> = {
      baseline: path.join(this.baselineDir, 'dist', 'src', 'cli.js'),
      current: path.join(CURRENT_DIR, 'dist', 'src', 'cli.js'),
    };
    const servers = {} as Record<Build, Server>;
    for (const b of ['baseline', 'current'] as const) {
      this.cmd([process.execPath, cli[b], ...flags]);
      servers[b] = await startServer(
        b,
        [cli[b], ...flags],
        path.join(logs, `server_${b}.log`),
        { http: true, grpc: true },
        b === 'current' ? CURRENT_DIR : this.baselineDir,
      );
    }
    try {
      await sleep(1000);
      for (let round = 1; round <= this.plan.rounds; round++) {
        const order: Build[] = round % 2 === 1 ? ['baseline', 'current'] : ['current', 'baseline'];
        log(`one-response A/B, round ${round}: ${order.join(', ')} per workload`);
        for (const w of AB_WORKLOADS) {
          const pts = await this.pair('3', async () => {
            const out: PaPoint[] = [];
            for (const b of order) {
              const s = servers[b];
              const base = [PERF_ANALYZER, '-m', w.model, '-u', w.proto === 'grpc' ? s.grpc! : s.http!, '-i', w.proto];
              if (w.streaming) base.push('--streaming');
              base.push(
                '--input-data',
                w.model === 'simple' ? SIMPLE_INPUT : pyInput,
                '-b',
                '1',
                '--concurrency-range',
                `${w.conc}:${w.conc}`,
              );
              const win = { ...this.plan.ab, requestCount: this.plan.ab.requestCount[w.model]! };
              out.push(await this.paPoint(s, b, w.id, base, win, round));
            }
            return out;
          });
          this.abPoints.push(...pts);
        }
        this.roundsRun = Math.max(this.roundsRun, round);
      }
      for (const b of ['baseline', 'current'] as const)
        if (!alive(servers[b]))
          this.errors.push(`${b} build (pid ${servers[b].pid}) had exited by the end of the A/B; see ${rel(servers[b].log)}`);
    } finally {
      for (const s of Object.values(servers)) await stopServer(s);
    }
    this.scanLogs(servers.current.log, 'Serval (current, A/B)');
  }

  // ------------------------------------------------------------------ report

  render(versions: [string, string][]): string {
    const p = this.plan;
    const ms = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '–' : x < 10 ? x.toFixed(2) : x.toFixed(1));
    const rate = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '–' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
    const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : '–');
    const pair = (a: string, b: string) => `${a} / ${b}`;
    const noisy = (c: Cores) => (c.other > NOISY_CORES ? ' †' : '');
    const L: string[] = [];
    L.push('### Decoupled models: Serval vs tritonserver 2.51, and the one-response path before / after');
    L.push('');
    L.push(
      `Generated by \`node dist/tools/bench/decoupled.js${this.args.quick ? ' --quick' : ''}\` (${this.args.quick ? 'quick' : 'full'} run, ${this.roundsRun} round${this.roundsRun === 1 ? '' : 's'}) from ${this.startedAt.toISOString()} (${((Date.now() - this.t0) / 60000).toFixed(1)} min). Raw output (load-generator JSON, perf_analyzer output, server logs, \`results.json\`): \`${rel(this.work)}/\` (not committed).`,
    );
    L.push('');
    L.push(
      `Serval and the real tritonserver 2.51 serve one temp copy of \`repeat_int32\` and \`text_generator\` (Python models, one instance each, the bundled config.pbtxt files), side by side on the same 2 cores as the load generator; rounds alternate which server goes first. Each number is the median over the rounds; only the ratios mean anything. Latency ratios below 1× and throughput ratios above 1× favour Serval. Each pair (both servers, or both builds, on one workload) runs back to back; a pair during which other processes used more than ${NOISY_CORES} cores is measured again once after waiting (up to ${p.quietWaitS} s) for a quiet machine, while the part's re-run time lasts (${Object.entries(
        p.rerunS,
      )
        .map(([k, v]) => `part ${k}: ${v} s`)
        .join(', ')}); † marks a measurement that still had other load.`,
    );
    L.push('');

    // Part 1.
    L.push('#### 1. Streaming, timed per response on the client');
    L.push('');
    const part1 = (
      head: string,
      cells: (m: (peer: Peer, f: (r: StreamResult) => number) => number, of: (peer: Peer) => StreamPoint[]) => string,
    ) => {
      L.push(`| workload | transport | conc | ${head} |`);
      L.push(`|---|---|---|${head.replace(/[^|]+/g, '---')}|`);
      for (const w of STREAM_WORKLOADS)
        for (const proto of ['grpc', 'sse'] as const)
          for (const conc of p.concurrency) {
            const of = (peer: Peer) =>
              this.streamPoints.filter((q) => q.workload === w.id && q.proto === proto && q.conc === conc && q.peer === peer);
            const m = (peer: Peer, f: (r: StreamResult) => number) => median(of(peer).flatMap((q) => (q.res ? [f(q.res)] : [])));
            L.push(`| ${w.label} | ${proto === 'grpc' ? 'gRPC stream' : 'HTTP SSE'} | ${conc} | ${cells(m, of)} |`);
          }
      L.push('');
    };
    const both = (m: (peer: Peer, f: (r: StreamResult) => number) => number, f: (r: StreamResult) => number) =>
      [m('serval', f), m('triton', f)] as const;
    part1(
      'responses/s Serval / Triton | Serval ÷ Triton | first response p50 ms Serval / Triton | ÷ | first response p99 ms Serval / Triton | server cores: Serval (its main thread) / Triton (its Python stub)',
      (m, of) => {
        const cores = (peer: Peer, k: keyof Cores) => median(of(peer).map((q) => q.cores[k])).toFixed(2);
        const rs = both(m, (r) => r.responsesPerS);
        const f50 = both(m, (r) => r.ttfr.p50);
        const f99 = both(m, (r) => r.ttfr.p99);
        return `${pair(rate(rs[0]), rate(rs[1]))} | ${ratio(rs[0], rs[1])} | ${pair(ms(f50[0]), ms(f50[1]))} | ${ratio(f50[0], f50[1])} | ${pair(ms(f99[0]), ms(f99[1]))} | ${pair(`${cores('serval', 'server')} (${cores('serval', 'main')})`, `${cores('triton', 'server')} (${cores('triton', 'stubs')})`)}`;
      },
    );
    part1(
      'between responses p50 ms Serval / Triton | p99 ms Serval / Triton | mean ms Serval / Triton | mean: Serval ÷ Triton | whole request p50 ms Serval / Triton',
      (m) => {
        const g50 = both(m, (r) => r.gap.p50);
        const g99 = both(m, (r) => r.gap.p99);
        const gm = both(m, (r) => r.gap.mean);
        const t50 = both(m, (r) => r.total.p50);
        return `${pair(ms(g50[0]), ms(g50[1]))} | ${pair(ms(g99[0]), ms(g99[1]))} | ${pair(ms(gm[0]), ms(gm[1]))} | ${ratio(gm[0], gm[1])} | ${pair(ms(t50[0]), ms(t50[1]))}`;
      },
    );
    L.push(
      `Load generator: \`tools/bench/decoupled/stream_load.ts\` (Node ${process.version}), CONC workers each with one request in flight; gRPC: the project's client (\`InferStream.inferEach\`, \`triton_enable_empty_final_response\` so the final flag arrives), one ModelStreamInfer stream per worker on one channel; HTTP: \`POST …/generate_stream\` over node:http, one keep-alive connection per worker, Server-Sent Events parsed as they arrive (events arriving in one chunk share its time). ${p.warmupMs} ms warm-up, then ${p.durationMs} ms measured: responses/s counts data responses arriving in the window; "first response" is send → first data response and "between responses" the gap between consecutive data responses of one request, over requests sent in the window. Every request must bring exactly its number of responses (checked). A gap of 0 is two responses that reached the client in one read (coalesced by the server's writes): under load the p50 of the gaps can be 0, which is why the mean (the request's first-to-last span ÷ gaps) is the ratio's basis. "server cores": the server's whole process tree (Python stubs included), from /proc.`,
    );
    L.push('');
    L.push(
      `Why these two: \`repeat_int32\` with DELAY 0 sends its 32 responses back to back, so it measures what each server spends per response (throughput; the time between responses is pure overhead); \`text_generator\` with \`delay_ms\` ${TEXT_DELAY} paces its words like a token stream, far below saturation at concurrency 16 (~1,600 words/s), so it measures the latency shape an LLM client sees: how much each server adds to the first word and how evenly the next ones arrive (${TEXT_DELAY} ms is the floor).`,
    );
    L.push('');

    // Part 2.
    L.push('#### 2. `perf_analyzer --streaming -i grpc` on `repeat_int32`');
    L.push('');
    L.push(
      '| concurrency | infer/s Serval / Triton | Serval ÷ Triton | responses per request Serval / Triton | responses/s Serval / Triton | latency p50 ms Serval / Triton | latency p99 ms Serval / Triton | server side: request (queue) ms Serval / Triton | server cores Serval / Triton |',
    );
    L.push('|---|---|---|---|---|---|---|---|---|');
    for (const conc of p.concurrency) {
      const of = (peer: Peer) => this.paPoints.filter((q) => q.workload === `repeat_c${conc}` && q.who === peer);
      const m = (peer: Peer, f: (r: NonNullable<PaPoint['res']>) => number | undefined) =>
        median(of(peer).flatMap((q) => (q.res ? [f(q.res) ?? NaN] : [])));
      const cores = (peer: Peer) => median(of(peer).map((q) => q.cores.server));
      const thr = [m('serval', (r) => r.throughput), m('triton', (r) => r.throughput)] as const;
      const rt = [m('serval', (r) => r.responseThroughput), m('triton', (r) => r.responseThroughput)] as const;
      const srv = (peer: Peer) => `${ms(m(peer, (r) => r.serverRequestUs) / 1000)} (queue ${ms(m(peer, (r) => r.queueUs) / 1000)})`;
      const per = (i: 0 | 1) => (Number.isFinite(rt[i]) && thr[i] > 0 ? (rt[i] / thr[i]).toFixed(1) : '–');
      L.push(
        `| ${conc} | ${pair(rate(thr[0]), rate(thr[1]))} | ${ratio(thr[0], thr[1])} | ${pair(per(0), per(1))} | ${pair(rate(rt[0]), rate(rt[1]))} | ${pair(ms(m('serval', (r) => r.p50Us) / 1000), ms(m('triton', (r) => r.p50Us) / 1000))} | ${pair(ms(m('serval', (r) => r.p99Us) / 1000), ms(m('triton', (r) => r.p99Us) / 1000))} | ${pair(srv('serval'), srv('triton'))} | ${pair(cores('serval').toFixed(2), cores('triton').toFixed(2))} |`,
      );
    }
    L.push('');
    L.push(
      `\`${rel(PERF_ANALYZER)} -m repeat_int32 -u HOST:PORT -i grpc --streaming --input-data <IN = 0…${REPEAT_PA_N - 1}, DELAY = ${REPEAT_PA_N} zeros, WAIT = [0]> -b 1 --concurrency-range C:C -p ${p.paStream.windowMs} -s ${p.paStream.stability} -r ${p.paStream.trials}\` (unstable: once more with a looser -s, then one \`--request-count ${p.paStream.requestCount}\` measurement; noted below). infer/s counts requests, "Response Throughput" responses; perf_analyzer 2.51 prints "using the first response for measuring latency" but its latency here is send → final response (at concurrency 1 it is 1/infer/s), so it is the whole stream's time. "server side": the statistics extension's averages as perf_analyzer prints them.`,
    );
    L.push('');

    // Part 3.
    L.push(`#### 3. The one-response path: before the decoupled work (${BASELINE_COMMIT}) vs now`);
    L.push('');
    L.push(
      '| workload | infer/s baseline (per round) | infer/s current (per round) | current ÷ baseline (per round) | p50 ms baseline / current | p99 ms baseline / current | server CPU µs per request baseline / current |',
    );
    L.push('|---|---|---|---|---|---|---|');
    for (const w of AB_WORKLOADS) {
      const of = (b: Build) => this.abPoints.filter((q) => q.workload === w.id && q.who === b).sort((x, y) => x.round - y.round);
      const per = (b: Build) =>
        of(b)
          .map((q) => (q.res ? rate(q.res.throughput) : 'failed') + noisy(q.cores))
          .join(', ') || '–';
      const m = (b: Build, f: (r: PaResult) => number) => median(of(b).flatMap((q) => (q.res ? [f(q.res)] : [])));
      const cpu = (b: Build) =>
        median(of(b).flatMap((q) => (q.res && q.res.throughput > 0 ? [(q.cores.server / q.res.throughput) * 1e6] : [])));
      const t = [m('baseline', (r) => r.throughput), m('current', (r) => r.throughput)] as const;
      // Each round's pair ran back to back, so its own ratio shows how far the rounds agree.
      const perRound = of('current')
        .flatMap((c) => {
          const b = of('baseline').find((x) => x.round === c.round);
          return c.res && b?.res ? [ratio(c.res.throughput, b.res.throughput)] : [];
        })
        .join(', ');
      L.push(
        `| ${w.label} | ${per('baseline')} | ${per('current')} | ${ratio(t[1], t[0])} (${perRound || '–'}) | ${pair(ms(m('baseline', (r) => r.p50Us) / 1000), ms(m('current', (r) => r.p50Us) / 1000))} | ${pair(ms(m('baseline', (r) => r.p99Us) / 1000), ms(m('current', (r) => r.p99Us) / 1000))} | ${pair(rate(cpu('baseline')), rate(cpu('current')))} |`,
      );
    }
    L.push('');
    L.push(
      `Both builds run at once on one temp repository (\`simple\` from model_repository/, \`${PY_MODEL}\` from test/python_models/: OUTPUT0 = INPUT0, FP32 [16], not decoupled), with the same Python (\`--backend-config=python,interpreter=${rel(SERVAL_PY)}\`); the measurements alternate baseline → current, then current → baseline; "current ÷ baseline" divides the medians, the per-round ratios divide each back-to-back pair. \`${rel(PERF_ANALYZER)} -m MODEL -u HOST:PORT -i grpc|http [--streaming] --input-data FILE -b 1 --concurrency-range C:C -p ${p.ab.windowMs} -s ${p.ab.stability} -r ${p.ab.trials}\` (\`simple\`: \`tools/perf/simple_input.json\`, outputs validated). "server CPU per request": the server process tree's CPU during the perf_analyzer run ÷ its infer/s. † other processes used more than ${NOISY_CORES} cores during that measurement.`,
    );
    L.push('');

    // Setup.
    L.push('#### Setup');
    L.push('');
    L.push('|  |  |');
    L.push('|---|---|');
    for (const [k, v] of versions) L.push(`| ${k} | ${v} |`);
    const mib = (b: number | undefined) => (b ? (b / 2 ** 20).toFixed(0) : '–');
    L.push(
      `| Memory (process tree RSS, MiB) | Serval ${mib(this.memory.serval?.idle)} after load → ${mib(this.memory.serval?.after)} after parts 1–2; tritonserver ${mib(this.memory.triton?.idle)} → ${mib(this.memory.triton?.after)} |`,
    );
    L.push(`| Rounds | ${this.roundsRun} (${this.args.quick ? 'quick' : 'full'}) |`);
    L.push('');
    L.push("Commands (HOST:PORT: the server's ephemeral port):");
    L.push('');
    const pa = rel(PERF_ANALYZER);
    const w = rel(this.work);
    L.push('```sh');
    L.push(
      `bash tools/bench/run.sh --sections decoupled${this.args.quick ? ' --quick' : ''}   # this block (or: node dist/tools/bench/decoupled.js)`,
    );
    L.push('# parts 1-2: both servers on one copy of repeat_int32 + text_generator');
    L.push(`node dist/src/cli.js --model-repository ${w}/stream_repo --http-port 0 --grpc-port 0 --metrics-port 0`);
    L.push(`bash tools/reference/tritonserver.sh ${w}/stream_repo HTTP_PORT GRPC_PORT METRICS_PORT`);
    L.push(
      `node dist/tools/bench/decoupled/stream_load.js --proto grpc|sse --url HOST:PORT --workload repeat32|text10 --concurrency 1|16 --warmup-ms ${p.warmupMs} --duration-ms ${p.durationMs}`,
    );
    L.push(
      `${pa} -m repeat_int32 -u HOST:PORT -i grpc --streaming --input-data ${w}/repeat_int32_input.json -b 1 --concurrency-range C:C -p ${p.paStream.windowMs} -s ${p.paStream.stability} -r ${p.paStream.trials}`,
    );
    L.push('# part 3: the baseline build and the current one on one copy of simple + py_identity_fp32');
    L.push(`bash tools/bench/decoupled/setup-baseline.sh ${BASELINE_COMMIT}`);
    L.push(
      `node ${this.baselineDir}/dist/src/cli.js|dist/src/cli.js --model-repository ${w}/ab_repo --http-port 0 --grpc-port 0 --metrics-port 0 --backend-config=python,interpreter=${rel(SERVAL_PY)}`,
    );
    L.push(
      `${pa} -m simple -u HOST:PORT -i http|grpc [--streaming] --input-data tools/perf/simple_input.json -b 1 --concurrency-range C:C -p ${p.ab.windowMs} -s ${p.ab.stability} -r ${p.ab.trials}`,
    );
    L.push(
      `${pa} -m ${PY_MODEL} -u HOST:PORT -i grpc --input-data ${w}/${PY_MODEL}_input.json -b 1 --concurrency-range C:C -p ${p.ab.windowMs} -s ${p.ab.stability} -r ${p.ab.trials}`,
    );
    L.push('```');
    L.push('');
    L.push('Every command line as run: `results.json`.');
    L.push('');

    // Every measurement.
    L.push('#### Every measurement');
    L.push('');
    L.push('| round | part | workload | server | result | cores: server (main thread / Python stubs) / load generator / other | notes |');
    L.push('|---|---|---|---|---|---|---|');
    const coresCell = (c: Cores) =>
      `${c.server.toFixed(2)} (${c.main.toFixed(2)} / ${c.stubs.toFixed(2)}) / ${c.loadGen.toFixed(2)} / ${c.other.toFixed(2)}${noisy(c)}`;
    for (const q of this.streamPoints) {
      const r = q.res;
      const res = r
        ? `${rate(r.responsesPerS)} resp/s, ${r.requests} requests; first ${ms(r.ttfr.p50)} / ${ms(r.ttfr.p99)} ms, between ${ms(r.gap.p50)} / ${ms(r.gap.p99)} ms (p50 / p99)`
        : `failed: ${q.error}`;
      const notes = [...(r?.failed ? [q.error] : []), ...q.notes].join('; ').replace(/\|/g, '\\|');
      L.push(`| ${q.round} | 1 | ${q.workload} ${q.proto} c${q.conc} | ${q.peer} | ${res} | ${coresCell(q.cores)} | ${notes} |`);
    }
    for (const [part, pts] of [
      ['2', this.paPoints],
      ['3', this.abPoints],
    ] as const)
      for (const q of pts) {
        const r = q.res;
        const res = r
          ? `${rate(r.throughput)} infer/s${r.responseThroughput ? ` (${rate(r.responseThroughput)} resp/s)` : ''}, p50 ${ms(r.p50Us / 1000)} ms, p99 ${ms(r.p99Us / 1000)} ms`
          : `failed: ${q.error}`;
        L.push(
          `| ${q.round} | ${part} | ${q.workload} | ${q.who} | ${res} | ${coresCell(q.cores)} | ${q.notes.join('; ').replace(/\|/g, '\\|')} |`,
        );
      }
    if (this.errors.length || this.logErrors.length) {
      L.push('');
      L.push('Failures and server log errors:');
      L.push('');
      for (const e of [...this.errors, ...this.logErrors]) L.push(`- ${e.replace(/\|/g, '\\|')}`);
    }
    return L.join('\n');
  }
}

function versionsTable(baselineDir: string, triton: string, loadAvg: number[]): [string, string][] {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const modelName = cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  const dirty = sh('git', ['status', '--porcelain']).split('\n').filter(Boolean).length;
  const pyv = (py: string) => sh(py, ['-c', 'import sys, numpy; print(f"Python {sys.version.split()[0]}, numpy {numpy.__version__}")']);
  return [
    ['CPU', `${modelName}, ${os.availableParallelism()} logical cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`],
    ['OS', `${os.type()} ${os.release()} (${os.arch()})`],
    [
      'Serval (current)',
      `\`dist/\` of commit ${sh('git', ['rev-parse', '--short', 'HEAD'])}${dirty ? ` + ${dirty} uncommitted changes` : ''}; Node.js ${process.version}, onnxruntime-node ${pkgVersion('onnxruntime-node')}, @grpc/grpc-js ${pkgVersion('@grpc/grpc-js')}; Python models on \`.venv\` (${pyv(SERVAL_PY)})`,
    ],
    ...(CURRENT_DIR === ROOT
      ? []
      : ([
          [
            'Serval (current, part 3)',
            `\`${CURRENT_DIR}/dist\` (DECOUPLED_CURRENT_DIR), commit ${sh('git', ['-C', CURRENT_DIR, 'rev-parse', '--short', 'HEAD'])}`,
          ],
        ] as [string, string][])),
    [
      'Serval (baseline)',
      `commit ${BASELINE_COMMIT}, the last before the decoupled work: git worktree \`${baselineDir}\`, its own \`npm ci\` and \`tsc\` build (\`tools/bench/decoupled/setup-baseline.sh\`)`,
    ],
    [
      'tritonserver',
      `${triton} from PyPI's nvidia-pytriton 0.7.0 (\`${rel(TRITON_VENV)}\`, \`tools/ci/setup-triton.sh\`), started by \`tools/reference/tritonserver.sh\` with its defaults; Python backend stub on ${pyv(path.join(TRITON_VENV, 'bin', 'python'))} (the 2.51 stub needs numpy 1.x)`,
    ],
    ['perf_analyzer', paVersion()],
    ['Load average at start', loadAvg.map((v) => v.toFixed(2)).join(' ')],
  ];
}

async function main(): Promise<void> {
  const args = sectionArgs(process.argv.slice(2));
  if (!existsSync(PERF_ANALYZER))
    throw new Error(`${PERF_ANALYZER} not found; run 'bash tools/ci/setup-python.sh' first (or set PERF_ANALYZER)`);
  for (const f of [SERVAL_CLI, STREAM_LOAD]) if (!existsSync(f)) throw new Error(`${rel(f)} not found; run 'npm run build' first`);
  const run = new DecoupledRun(args);
  log(`${args.quick ? 'quick' : 'full'} run; raw output in ${rel(run.work)}/`);
  const loadAvg = os.loadavg();
  run.setup();
  try {
    if (PARTS.has('1') || PARTS.has('2')) await run.servalVsTriton();
    if (PARTS.has('3') && run.baselineDir) await run.abRuns();
  } finally {
    killEverything();
  }
  const versions = versionsTable(run.baselineDir, run.tritonVersion, loadAvg);
  const md = run.render(versions);
  writeFileSync(
    path.join(run.work, 'results.json'),
    `${JSON.stringify({ mode: args.quick ? 'quick' : 'full', startedAt: run.startedAt, plan: run.plan, versions, memory: run.memory, stream: run.streamPoints, perfAnalyzer: run.paPoints, ab: run.abPoints, discarded: run.discarded, errors: run.errors, logErrors: run.logErrors, commands: run.commands }, null, 2)}\n`,
  );
  writeSection(args.out, 'decoupled', md);
  log(`wrote the decoupled block of ${rel(args.out)}${run.errors.length ? `; ${run.errors.length} failure(s)` : ''}`);
}

runSection('decoupled', main, killEverything);
