/**
 * The seeds' experiments, replayed on this machine (issue 16, item 4; docs/benchmarks.md block
 * `seeds`):
 *
 *   1. the centralized-serving study: N parallel jobs (Python processes) that each load a
 *      ResNet-class model (the generated resnet50) and classify their share of M images, against
 *      the same N jobs sending the images to one Serval — without dynamic batching, with it, and
 *      with it and 2 instances. Wall time, images/s, RSS (jobs vs server + jobs), cores used;
 *   2. the batching-worker study: `ab -n 1000 -c 32` POSTing one binary-extension KServe v2
 *      request to Serval's HTTP route for ranker_mlp, without and with dynamic batching;
 *   3. the Triton tutorial's perf_analyzer sequence (Conceptual Guide part 2): `-b 1` at
 *      concurrency 1, 8, 16 and `-b 16` at concurrency 1, 1 instance vs 2 instances with dynamic
 *      batching (and the tutorial's baseline without it), with the server's queue / compute split.
 *
 *   node dist/tools/bench/seeds.js [--quick] [--out FILE] [--jobs N] [--images M]
 *
 * Raw output goes to tmp/bench/seeds-<time>/. Normally started by tools/bench/run.sh.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeSection } from './doc_section.js';
import {
  type PaResult,
  parseBenchOnnx,
  parsePerfAnalyzer,
  type RunResult,
  runMeasured,
  type Server,
  sleep,
  startServer,
  stopServer,
  variantConfig,
} from './harness.js';
import { PERF_ANALYZER, ROOT, rel, SERVAL_CLI } from './paths.js';
import { type CpuUse, machineCpu, taskCpu, ticksPerSecond } from './procstat.js';
import { runSection } from './section.js';
import {
  type AbResult,
  agreement,
  binaryInferBody,
  cellText,
  cores,
  formatGain,
  type JobResult,
  type JobsSummary,
  median,
  parseAb,
  parseJobOutput,
  peakSum,
  ratio,
  reproduces,
  STUDY2_REPORTED,
  type StudyRatio,
  shares,
  study1Ratios,
  summarizeJobs,
  TUTORIAL_REPORTED,
} from './seeds/logic.js';

const PA = PERF_ANALYZER;
const PY = path.join(ROOT, '.venv', 'bin', 'python');
const CLI = SERVAL_CLI;
const BENCH_ONNX = path.join(ROOT, 'dist', 'tools', 'bench_onnx.js');
const GEN_RESNET = path.join(ROOT, 'dist', 'tools', 'gen_resnet50.js');
const JOB = path.join(ROOT, 'tools', 'bench', 'seeds', 'job.py');
const IMAGE = path.join(ROOT, 'docs', 'examples', 'food.jpg');
const CORES = os.availableParallelism();

const log = (s: string) => console.log(`[seeds ${new Date().toISOString().slice(11, 19)}] ${s}`);

interface Plan {
  jobs: number;
  images: number;
  rounds: number;
  /** No further study-1 round is started when it would end after this many seconds (a loaded machine). */
  study1BudgetS: number;
  abN: number;
  abC: number;
  abRounds: number;
  paWindowMs: number;
  paTrials: number;
  /** perf_analyzer's -s (stability %); --quick starts loose, as a smoke test on whatever machine. */
  paStability: number;
  /** Re-run an unstable perf_analyzer point once with -s 50 (not in --quick: time). */
  paRetry: boolean;
  paPoints: { batch: number; conc: number }[];
  study3Variants: Study3Variant[];
  ceilingS: number;
}

type Study3Variant = 'nodb' | 'db' | 'db_x2';

const FULL: Plan = {
  jobs: 4,
  images: 256,
  rounds: 2,
  study1BudgetS: 330,
  abN: 1000,
  abC: 32,
  abRounds: 7,
  paWindowMs: 2000,
  paTrials: 6,
  paStability: 10,
  paRetry: true,
  paPoints: [
    { batch: 1, conc: 1 },
    { batch: 1, conc: 8 },
    { batch: 1, conc: 16 },
    { batch: 16, conc: 1 },
  ],
  study3Variants: ['nodb', 'db', 'db_x2'],
  ceilingS: 2,
};

const QUICK: Plan = {
  ...FULL,
  images: 24,
  rounds: 1,
  abRounds: 1,
  paWindowMs: 1000,
  paTrials: 3,
  paStability: 50,
  paRetry: false,
  study3Variants: ['db', 'db_x2'],
  ceilingS: 1,
};

interface Args {
  quick: boolean;
  out: string;
  jobs?: number;
  images?: number;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { quick: false, out: path.join(ROOT, 'docs', 'benchmarks.md') };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    const v = (): string => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${k} needs a value`);
      return x;
    };
    if (k === '--quick') a.quick = true;
    else if (k === '--out') a.out = path.resolve(v());
    else if (k === '--jobs') a.jobs = Number(v());
    else if (k === '--images') a.images = Number(v());
    else throw new Error(`seeds: unknown argument ${k} (--quick, --out FILE, --jobs N, --images M)`);
  }
  return a;
}

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT }).trim();
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string };
    return `${err.stdout ?? ''}${err.stderr ?? ''}`.trim() || 'unavailable';
  }
}

function pkgVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** RSS of a process in KiB from /proc/PID/status, or undefined once it has gone. */
function rssKib(pid: number): number | undefined {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

const mib = (kib: number) => (kib / 1024).toFixed(0);
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '–');
const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '–');
const fms = (us: number | undefined) => (us !== undefined && Number.isFinite(us) ? (us / 1000).toFixed(1) : '–');

/** Successful inferences and executions of a model so far (statistics extension), for the average batch. */
async function counts(http: string, model: string): Promise<{ inferences: number; executions: number } | undefined> {
  try {
    const r = await fetch(`http://${http}/v2/models/${model}/stats`);
    const j = (await r.json()) as { model_stats?: { inference_count?: number | string; execution_count?: number | string }[] };
    const s = j.model_stats?.[0];
    if (!s) return undefined;
    return { inferences: Number(s.inference_count ?? 0), executions: Number(s.execution_count ?? 0) };
  } catch {
    return undefined;
  }
}

function avgBatch(a?: { inferences: number; executions: number }, b?: { inferences: number; executions: number }): number {
  if (!a || !b) return NaN;
  return ratio(b.inferences - a.inferences, b.executions - a.executions);
}

// ------------------------------------------------------------------ results

interface Study1Run {
  variant: Study1Key;
  label: string;
  round: number;
  summary?: JobsSummary;
  jobsRssPeakKib: number;
  serverRssPeakKib: number;
  totalRssPeakKib: number;
  serverIdleRssKib: number;
  serverStartS: number;
  jobsCores: number;
  serverCores: number;
  otherCores: number;
  avgBatch: number;
  error?: string;
}

type Study1Key = 'local_default' | 'local_1t' | 'served_nodb' | 'served_db' | 'served_db_x2';

interface AbRun {
  variant: 'nodb' | 'db';
  round: number;
  ab?: AbResult;
  avgBatch: number;
  use?: CpuUse;
  error?: string;
}

interface PaRun {
  variant: Study3Variant;
  batch: number;
  conc: number;
  pa?: PaResult;
  /** Stable only with -s 50 (the retry). */
  loose?: boolean;
  use?: CpuUse;
  error?: string;
}

interface Results {
  quick: boolean;
  startedAt: string;
  finishedAt?: string;
  durationS?: number;
  plan: Plan;
  setup: [string, string][];
  commands: string[];
  errors: string[];
  notes: string[];
  ceilings: { model: string; batch: number; itemsPerS: number }[];
  study1: Study1Run[];
  study1Threads1t: number;
  abAvailable: string;
  abBodyBytes?: number;
  abHeaderLength?: number;
  study2: AbRun[];
  study3: PaRun[];
}

// ------------------------------------------------------------------ the run

class Seeds {
  readonly work: string;
  readonly plan: Plan;
  readonly results: Results;
  readonly t0 = Date.now();
  modelDir = '';

  constructor(readonly args: Args) {
    const stamp = new Date().toISOString().replace(/[:.]/g, '').slice(0, 17);
    this.work = path.join(ROOT, 'tmp', 'bench', `seeds-${stamp}`);
    mkdirSync(path.join(this.work, 'logs'), { recursive: true });
    this.plan = { ...(args.quick ? QUICK : FULL) };
    if (args.jobs) this.plan.jobs = args.jobs;
    if (args.images) this.plan.images = args.images;
    this.results = {
      quick: args.quick,
      startedAt: new Date().toISOString(),
      plan: this.plan,
      setup: [],
      commands: [],
      errors: [],
      notes: [],
      ceilings: [],
      study1: [],
      study1Threads1t: Math.max(1, Math.floor(CORES / this.plan.jobs)),
      abAvailable: '',
      study2: [],
      study3: [],
    };
  }

  cmd(c: string[]): string {
    const s = c.map((x) => (x.startsWith(ROOT) ? rel(x) : x)).join(' ');
    this.results.commands.push(s);
    return s;
  }

  servalArgs(repo: string): string[] {
    return [CLI, '--model-repository', repo, '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'];
  }

  async startServal(name: string, repo: string): Promise<Server> {
    const args = this.servalArgs(repo);
    this.cmd([process.execPath, ...args]);
    const s = await startServer('serval', args, path.join(this.work, 'logs', `server_${name}.log`), { http: true, grpc: false }, ROOT);
    log(`  Serval (${name}) pid ${s.pid}: http ${s.http}`);
    return s;
  }

  /** A repository holding `model`'s folder as the named variants (config rewritten; weights hard-linked). */
  makeRepo(name: string, srcDir: string, model: string, variants: { suffix: string; dynamic: boolean; instances: number }[]): string {
    const repo = path.join(this.work, 'repos', name);
    const config = readFileSync(path.join(srcDir, 'config.pbtxt'), 'utf8');
    for (const v of variants) {
      const dst = path.join(repo, `${model}__${v.suffix}`);
      mkdirSync(path.join(dst, '1'), { recursive: true });
      const onnx = path.join(srcDir, '1', 'model.onnx');
      const target = path.join(dst, '1', 'model.onnx');
      if (!existsSync(target)) {
        try {
          linkSync(onnx, target);
        } catch {
          copyFileSync(onnx, target); // another file system
        }
      }
      const labels = path.join(srcDir, 'labels.txt');
      if (existsSync(labels)) copyFileSync(labels, path.join(dst, 'labels.txt'));
      writeFileSync(path.join(dst, 'config.pbtxt'), variantConfig(config, `${model}__${v.suffix}`, v.dynamic, v.instances));
    }
    return repo;
  }

  async ceiling(model: string, onnx: string, batches: number[]): Promise<void> {
    const c = [
      process.execPath,
      BENCH_ONNX,
      onnx,
      '--batch',
      batches.join(','),
      '--threads',
      String(CORES),
      '--seconds',
      String(this.plan.ceilingS),
      '--warmup',
      '2',
    ];
    log(`ceiling ${model}: ${this.cmd(c)}`);
    const r = await runMeasured(c, path.join(this.work, 'logs', `ceiling_${model}.log`), 300);
    const pts = parseBenchOnnx(r.stdout);
    if (r.code !== 0 || pts.length === 0) {
      this.results.errors.push(`ceiling ${model}: exit ${r.code}`);
      return;
    }
    for (const p of pts) {
      this.results.ceilings.push({ model, batch: p.batch, itemsPerS: p.itemsPerS });
      log(`  ${model} batch ${p.batch}: ${p.itemsPerS.toFixed(1)} items/s`);
    }
  }

  // -------------------------------------------------------------- study 1

  /** Runs the N jobs at once; samples every process's RSS (and the server's) every 100 ms. */
  async runJobs(
    key: Study1Key,
    label: string,
    round: number,
    jobArgs: (share: { first: number; count: number }) => string[],
    server?: Server,
  ): Promise<Study1Run> {
    const run: Study1Run = {
      variant: key,
      label,
      round,
      jobsRssPeakKib: 0,
      serverRssPeakKib: 0,
      totalRssPeakKib: 0,
      serverIdleRssKib: server ? (rssKib(server.pid) ?? 0) : 0,
      serverStartS: NaN,
      jobsCores: NaN,
      serverCores: NaN,
      otherCores: NaN,
      avgBatch: NaN,
    };
    const parts = shares(this.plan.images, this.plan.jobs);
    const logFile = path.join(this.work, 'logs', `study1_${key}_r${round}.log`);
    const before = server ? await counts(server.http!, `resnet50__${key.replace('served_', '')}`) : undefined;
    const m0 = machineCpu();
    const s0 = server ? taskCpu(server.pid) : 0;
    const t0 = performance.now();
    const children: { child: ChildProcess; out: string; code?: number | null }[] = [];
    for (const share of parts) {
      const argv = [JOB, ...jobArgs(share)];
      if (share === parts[0]) this.cmd([PY, ...argv]);
      const child = spawn(PY, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      const entry: { child: ChildProcess; out: string; code?: number | null } = { child, out: '' };
      child.stdout!.on('data', (d: Buffer) => (entry.out += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (entry.out += d.toString()));
      children.push(entry);
    }
    const samples: Map<number, number>[] = [];
    const jobPids = new Set(children.map((c) => c.child.pid!));
    const sample = () => {
      const m = new Map<number, number>();
      for (const pid of jobPids) {
        const k = rssKib(pid);
        if (k !== undefined) m.set(pid, k);
      }
      if (server) m.set(server.pid, rssKib(server.pid) ?? 0);
      samples.push(m);
    };
    const timer = setInterval(sample, 100);
    sample();
    const deadline = 600_000;
    await Promise.race([
      Promise.all(
        children.map(
          (c) =>
            new Promise<void>((r) =>
              c.child.on('close', (code) => {
                c.code = code;
                r();
              }),
            ),
        ),
      ),
      sleep(deadline),
    ]);
    clearInterval(timer);
    const wallS = (performance.now() - t0) / 1000;
    const m1 = machineCpu();
    const s1 = server ? taskCpu(server.pid) : 0;
    for (const c of children) if (c.code === undefined) c.child.kill('SIGKILL');
    writeFileSync(logFile, children.map((c, i) => `# job ${i} (exit ${c.code})\n${c.out}\n`).join(''));
    const results: JobResult[] = [];
    for (const [i, c] of children.entries()) {
      const r = c.code === 0 ? parseJobOutput(c.out) : undefined;
      if (!r) {
        run.error = `job ${i} exit ${c.code}: ${c.out.trim().split('\n').slice(-2).join(' | ')}`;
        this.results.errors.push(`study 1 ${label}: ${run.error}`);
        log(`    FAILED ${label}: ${run.error}`);
        return run;
      }
      results.push(r);
    }
    run.summary = summarizeJobs(results, wallS);
    const hz = ticksPerSecond();
    run.jobsCores = cores(run.summary.jobsCpuS, wallS);
    run.serverCores = server ? cores((s1 - s0) / hz, wallS) : 0;
    run.otherCores = Math.max(0, cores((m1.busy - m0.busy) / hz, wallS) - run.jobsCores - run.serverCores);
    run.jobsRssPeakKib = peakSum(samples, jobPids);
    run.serverRssPeakKib = server ? peakSum(samples, new Set([server.pid])) : 0;
    run.totalRssPeakKib = peakSum(samples);
    if (server) run.avgBatch = avgBatch(before, await counts(server.http!, `resnet50__${key.replace('served_', '')}`));
    log(
      `    ${label.padEnd(44)} ${wallS.toFixed(1)} s, ${run.summary.imagesPerS.toFixed(1)} images/s, RSS jobs ${mib(run.jobsRssPeakKib)} MiB + server ${mib(run.serverRssPeakKib)} MiB; cores jobs ${run.jobsCores.toFixed(2)} server ${run.serverCores.toFixed(2)} other ${run.otherCores.toFixed(2)}${Number.isFinite(run.avgBatch) ? `, avg batch ${run.avgBatch.toFixed(1)}` : ''}`,
    );
    return run;
  }

  async study1(): Promise<void> {
    log(`== study 1: ${this.plan.jobs} jobs, ${this.plan.images} images, ${this.plan.rounds} round(s)`);
    const onnx = path.join(this.modelDir, '1', 'model.onnx');
    const t1 = this.results.study1Threads1t;
    // job.py's arguments: the mode, the job's share of the images, then the mode's own.
    const job =
      (mode: 'local' | 'served', ...rest: string[]) =>
      (s: { first: number; count: number }) => [
        '--mode',
        mode,
        '--image',
        IMAGE,
        '--first',
        String(s.first),
        '--count',
        String(s.count),
        ...rest,
      ];
    const local = (threads: number) => job('local', '--onnx', onnx, '--threads', String(threads));
    const variants: { key: Study1Key; label: string; suffix?: string; dynamic?: boolean; instances?: number; threads?: number }[] = [
      { key: 'local_default', label: 'local jobs (onnxruntime default threads)', threads: 0 },
      { key: 'local_1t', label: `local jobs (${t1} intra-op thread${t1 > 1 ? 's' : ''} each)`, threads: t1 },
      { key: 'served_nodb', label: 'jobs → Serval, no dynamic batching', suffix: 'nodb', dynamic: false, instances: 1 },
      { key: 'served_db', label: 'jobs → Serval, dynamic batching', suffix: 'db', dynamic: true, instances: 1 },
      { key: 'served_db_x2', label: 'jobs → Serval, dynamic batching, 2 instances', suffix: 'db_x2', dynamic: true, instances: 2 },
    ];
    const began = performance.now();
    for (let round = 1; round <= this.plan.rounds; round++) {
      const spent = (performance.now() - began) / 1000;
      if (round > 1 && (spent / (round - 1)) * round > this.plan.study1BudgetS) {
        this.results.notes.push(
          `study 1: round ${round} of ${this.plan.rounds} skipped — the rounds so far took ${spent.toFixed(0)} s and another would pass the ${this.plan.study1BudgetS} s budget (a loaded machine)`,
        );
        log(`    ${this.results.notes.at(-1)}`);
        break;
      }
      const order = round % 2 ? variants : [...variants].reverse();
      for (const v of order) {
        try {
          if (v.threads !== undefined) {
            this.results.study1.push(await this.runJobs(v.key, v.label, round, local(v.threads)));
            continue;
          }
          const repo = this.makeRepo(`study1_${v.suffix}`, this.modelDir, 'resnet50', [
            { suffix: v.suffix!, dynamic: v.dynamic!, instances: v.instances! },
          ]);
          const started = performance.now();
          const server = await this.startServal(`study1_${v.suffix}_r${round}`, repo);
          const startS = (performance.now() - started) / 1000;
          try {
            await sleep(500); // let the load settle before reading the idle RSS
            const model = `resnet50__${v.suffix}`;
            const run = await this.runJobs(v.key, v.label, round, job('served', '--url', server.http!, '--model', model), server);
            run.serverStartS = startS;
            this.results.study1.push(run);
          } finally {
            await stopServer(server);
          }
        } catch (e) {
          this.results.errors.push(`study 1 ${v.label}: ${(e as Error).message}`);
          log(`    FAILED ${v.label}: ${(e as Error).message}`);
        }
      }
    }
  }

  // -------------------------------------------------------------- study 2

  ensureAb(): boolean {
    if (sh('bash', ['-c', 'command -v ab']).endsWith('/ab')) {
      this.results.abAvailable = 'already installed';
      return true;
    }
    log('ab missing: apt-get update && apt-get install -y apache2-utils');
    const r = sh('bash', ['-c', '(apt-get update -qq && apt-get install -y -qq apache2-utils) >/dev/null 2>&1 && command -v ab']);
    if (r.endsWith('/ab')) {
      this.results.abAvailable = 'installed by this run (`apt-get install -y apache2-utils`)';
      return true;
    }
    this.results.abAvailable = `could not be installed (\`apt-get install -y apache2-utils\` failed: ${r.slice(-200)})`;
    return false;
  }

  async study2(): Promise<void> {
    log('== study 2: ab against ranker_mlp without / with dynamic batching');
    if (!this.ensureAb()) {
      this.results.errors.push(`study 2: ab ${this.results.abAvailable}`);
      return;
    }
    const src = path.join(ROOT, 'model_repository', 'ranker_mlp');
    await this.ceiling('ranker_mlp', path.join(src, '1', 'model.onnx'), [1, this.plan.abC]);
    const repo = this.makeRepo('study2', src, 'ranker_mlp', [
      { suffix: 'nodb', dynamic: false, instances: 1 },
      { suffix: 'db', dynamic: true, instances: 1 },
    ]);
    // A fixed, deterministic request: 512 floats in [-1, 1).
    const data = Buffer.alloc(512 * 4);
    let x = 0x2545f491;
    for (let i = 0; i < 512; i++) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      data.writeFloatLE(x / 2 ** 31 - 1, i * 4);
    }
    const { body, headerLength } = binaryInferBody({ name: 'INPUT', shape: [1, 512], datatype: 'FP32', data }, 'OUTPUT');
    const bodyFile = path.join(this.work, 'ab_body.bin');
    writeFileSync(bodyFile, body);
    this.results.abBodyBytes = body.length;
    this.results.abHeaderLength = headerLength;
    const server = await this.startServal('study2', repo);
    try {
      const url = (v: string) => `http://${server.http}/v2/models/ranker_mlp__${v}/infer`;
      for (const v of ['nodb', 'db']) {
        const r = await fetch(url(v), {
          method: 'POST',
          headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(headerLength) },
          body,
        });
        if (r.status !== 200) throw new Error(`the ab request to ranker_mlp__${v} answered ${r.status}: ${(await r.text()).slice(0, 300)}`);
        await r.arrayBuffer();
      }
      const ab = (v: string, n: number) => [
        'ab',
        '-q',
        '-n',
        String(n),
        '-c',
        String(this.plan.abC),
        '-p',
        bodyFile,
        '-T',
        'application/octet-stream',
        '-H',
        `Inference-Header-Content-Length: ${headerLength}`,
        url(v),
      ];
      for (const v of ['nodb', 'db']) await runMeasured(ab(v, 500), path.join(this.work, 'logs', 'ab_warmup.log'), 120, server.pid);
      // ABBA order over the rounds, so drift on the shared machine hits both variants alike.
      for (let round = 1; round <= this.plan.abRounds; round++) {
        const order: ('nodb' | 'db')[] = round % 2 ? ['nodb', 'db'] : ['db', 'nodb'];
        for (const v of order) {
          const c = ab(v, this.plan.abN);
          const shown = this.cmd(c);
          const before = await counts(server.http!, `ranker_mlp__${v}`);
          const r: RunResult = await runMeasured(c, path.join(this.work, 'logs', `ab_${v}.log`), 300, server.pid);
          const parsed = parseAb(r.stdout);
          const run: AbRun = { variant: v, round, avgBatch: avgBatch(before, await counts(server.http!, `ranker_mlp__${v}`)), use: r.use };
          if (!parsed) {
            run.error = `exit ${r.code}: ${r.stdout.trim().split('\n').slice(-3).join(' | ')}`;
            this.results.errors.push(`study 2 ${shown}: ${run.error}`);
          } else run.ab = parsed;
          this.results.study2.push(run);
          log(
            `    ranker_mlp__${v.padEnd(5)} round ${round}: ${parsed ? `${parsed.requestsPerS.toFixed(0)} req/s, mean ${parsed.meanMs.toFixed(1)} ms, p50 ${parsed.p50Ms} ms, p99 ${parsed.p99Ms} ms, non-2xx ${parsed.non2xx}, avg batch ${run.avgBatch.toFixed(1)}` : run.error}`,
          );
        }
      }
    } finally {
      await stopServer(server);
    }
  }

  // -------------------------------------------------------------- study 3

  async study3(): Promise<void> {
    log('== study 3: the tutorial perf_analyzer sequence on image_classifier');
    if (!existsSync(PA)) {
      this.results.errors.push(`study 3: ${PA} not found (bash tools/ci/setup-python.sh)`);
      return;
    }
    const src = path.join(ROOT, 'model_repository', 'image_classifier');
    const all: Record<Study3Variant, { suffix: string; dynamic: boolean; instances: number }> = {
      nodb: { suffix: 'nodb', dynamic: false, instances: 1 },
      db: { suffix: 'db', dynamic: true, instances: 1 },
      db_x2: { suffix: 'db_x2', dynamic: true, instances: 2 },
    };
    const repo = this.makeRepo(
      'study3',
      src,
      'image_classifier',
      this.plan.study3Variants.map((v) => all[v]),
    );
    const server = await this.startServal('study3', repo);
    try {
      for (const [i, p] of this.plan.paPoints.entries()) {
        const order = i % 2 ? [...this.plan.study3Variants].reverse() : this.plan.study3Variants;
        for (const v of order) {
          const model = `image_classifier__${v}`;
          const base = [
            PA,
            '-m',
            model,
            '-u',
            server.http!,
            '-i',
            'http',
            '-b',
            String(p.batch),
            '--concurrency-range',
            `${p.conc}:${p.conc}`,
            '-p',
            String(this.plan.paWindowMs),
          ];
          const logFile = path.join(this.work, 'logs', `pa_${model}_b${p.batch}_c${p.conc}.log`);
          let c = [...base, '-r', String(this.plan.paTrials), '-s', String(this.plan.paStability)];
          this.cmd(c);
          let r = await runMeasured(c, logFile, 300, server.pid);
          let pa = parsePerfAnalyzer(r.stdout);
          let loose = false;
          if (!pa && this.plan.paRetry && /Failed to obtain stable measurement/.test(r.stdout)) {
            c = [...base, '-r', String(this.plan.paTrials + 2), '-s', '50'];
            this.cmd(c);
            r = await runMeasured(c, logFile, 300, server.pid);
            pa = parsePerfAnalyzer(r.stdout);
            loose = true;
          }
          const run: PaRun = { variant: v, batch: p.batch, conc: p.conc, use: r.use, loose };
          if (pa) run.pa = pa;
          else {
            run.error = r.timedOut
              ? 'timed out'
              : /Failed to obtain stable measurement/.test(r.stdout)
                ? 'no stable measurement'
                : `exit ${r.code}: ${r.stdout.trim().split('\n').slice(-3).join(' | ')}`;
            this.results.errors.push(`study 3 ${model} -b ${p.batch} c ${p.conc}: ${run.error}`);
          }
          this.results.study3.push(run);
          log(
            `    ${model.padEnd(26)} -b ${String(p.batch).padEnd(2)} c=${String(p.conc).padEnd(2)} ${pa ? `${pa.throughput.toFixed(1)} infer/s, p99 ${fms(pa.p99Us)} ms, queue ${pa.queueUs} us, infer ${pa.computeInferUs} us` : run.error}`,
          );
        }
      }
    } finally {
      await stopServer(server);
    }
  }

  // -------------------------------------------------------------- main

  setupInfo(): [string, string][] {
    const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
    const modelName = cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
    const dirty = sh('git', ['status', '--porcelain']).split('\n').filter(Boolean).length;
    const py = sh(PY, [
      '-c',
      'import onnxruntime, tritonclient, PIL, numpy, sys; from importlib.metadata import version; print(sys.version.split()[0], onnxruntime.__version__, version("tritonclient"), PIL.__version__, numpy.__version__)',
    ]).split(' ');
    let paV = 'unknown';
    for (let i = 0; i < 3 && paV === 'unknown'; i++) {
      const v = sh('bash', ['-c', '"$0" --version 2>&1 | cat', PA]).split('\n').filter(Boolean).pop();
      if (v && /Version/i.test(v)) paV = v;
    }
    return [
      ['CPU', `${modelName}, ${CORES} logical cores (os.availableParallelism)`],
      ['Memory', `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`],
      ['OS', `${os.type()} ${os.release()} (${os.arch()})`],
      ['Node.js / onnxruntime-node (Serval)', `${process.version} / ${pkgVersion('onnxruntime-node')}`],
      ['Python / onnxruntime / tritonclient / Pillow / numpy (the jobs, `.venv`)', py.length === 5 ? py.join(' / ') : 'unavailable'],
      ['perf_analyzer', paV],
      ['ab', sh('bash', ['-c', 'ab -V 2>&1 | head -1']).replace(/^This is /, '')],
      ['Serval commit', `${sh('git', ['rev-parse', '--short', 'HEAD'])}${dirty ? ` + ${dirty} uncommitted changes in the work tree` : ''}`],
      [
        'Load average at start',
        os
          .loadavg()
          .map((x) => x.toFixed(2))
          .join(' '),
      ],
    ];
  }

  async run(): Promise<void> {
    this.results.setup = this.setupInfo();
    const modelsDir = path.join(this.work, 'models');
    const c = [process.execPath, GEN_RESNET, '--out', modelsDir];
    log(`generating resnet50: ${this.cmd(c)}`);
    execFileSync(c[0]!, c.slice(1), { stdio: 'inherit', cwd: ROOT });
    this.modelDir = path.join(modelsDir, 'resnet50');
    await this.ceiling('resnet50', path.join(this.modelDir, '1', 'model.onnx'), [1, this.plan.jobs]);
    for (const [name, fn] of [
      ['study 1', () => this.study1()],
      ['study 2', () => this.study2()],
      ['study 3', () => this.study3()],
    ] as [string, () => Promise<void>][]) {
      try {
        await fn();
      } catch (e) {
        this.results.errors.push(`${name}: ${(e as Error).message}`);
        log(`${name} failed: ${(e as Error).stack}`);
      }
    }
    rmSync(modelsDir, { recursive: true, force: true }); // 100 MB; regenerated in a second
    rmSync(path.join(this.work, 'repos'), { recursive: true, force: true });
    this.results.finishedAt = new Date().toISOString();
    this.results.durationS = (Date.now() - this.t0) / 1000;
    writeFileSync(path.join(this.work, 'results.json'), JSON.stringify(this.results, null, 2));
    const md = renderSeeds(this.results, rel(this.work));
    writeFileSync(path.join(this.work, 'seeds.md'), md);
    writeSection(this.args.out, 'seeds', md);
    log(`wrote the seeds block of ${rel(this.args.out)} and ${rel(this.work)}/ in ${(this.results.durationS / 60).toFixed(1)} min`);
  }
}

// ------------------------------------------------------------------ Markdown

function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

function renderSeeds(r: Results, workRel: string): string {
  const p = r.plan;
  const out: string[] = [];
  out.push("### The seeds' experiments replayed");
  out.push(
    `Generated by \`node dist/tools/bench/seeds.js${r.quick ? ' --quick' : ''}\` (section \`seeds\` of \`tools/bench/run.sh\`${r.quick ? ', **quick run: few images, one round, short windows — a smoke test, not a measurement**' : ''}) from ${r.startedAt} to ${r.finishedAt} (${((r.durationS ?? 0) / 60).toFixed(1)} min). Raw output (job and ab / perf_analyzer logs, server logs, \`results.json\`): \`${workRel}/\` (not committed). The jobs, ab and perf_analyzer run on the same ${CORES} cores as the server.`,
  );
  out.push(table(['', ''], r.setup));

  // ---- claims
  const verdict = (reported: number, measured: number): string =>
    Number.isFinite(measured) ? (reproduces(reported, measured) ? '**reproduced**' : '**not reproduced**') : '–';
  const s1 = study1Table(r);
  const ab = abSummary(r);
  const claims: string[][] = [];
  for (const x of s1.ratios) {
    claims.push(['centralized serving', x.what, formatGain(x.reported), formatGain(x.measured), verdict(x.reported, x.measured)]);
  }
  claims.push([
    'centralized serving',
    'less memory: server (batching, 1 instance) + jobs below the local jobs (peak RSS)',
    'yes',
    s1.memory ? `${mib(s1.memory.served)} vs ${mib(s1.memory.local)} MiB` : '–',
    s1.memory ? (s1.memory.served < s1.memory.local ? '**reproduced**' : '**not reproduced**') : '–',
  ]);
  claims.push([
    'centralized serving',
    "served jobs get the local jobs' answers (same top-1 class and sum of absolute scores within 0.1%, same images, same .onnx)",
    'required',
    s1.agree ? `${s1.agree.same} / ${s1.agree.of}` : '–',
    s1.agree ? (s1.agree.same === s1.agree.of ? '**met**' : '**missed**') : '–',
  ]);
  claims.push([
    'batching worker',
    `dynamic batching under \`ab -n ${p.abN} -c ${p.abC}\` (median req/s, batching / none)`,
    formatGain(STUDY2_REPORTED.batching),
    formatGain(ab.gain),
    verdict(STUDY2_REPORTED.batching, ab.gain),
  ]);
  claims.push([
    'batching worker',
    'non-2xx responses',
    '0 (required)',
    ab.runs ? String(ab.non2xx) : '–',
    ab.runs ? (ab.non2xx === 0 ? '**met**' : '**missed**') : '–',
  ]);
  const t3 = study3Gains(r);
  claims.push([
    'tutorial sequence',
    'a second instance with dynamic batching raises throughput at `-b 1`, concurrency 16',
    formatGain(TUTORIAL_REPORTED.batchingX2 / TUTORIAL_REPORTED.batching),
    formatGain(t3.x2At16),
    verdict(TUTORIAL_REPORTED.batchingX2 / TUTORIAL_REPORTED.batching, t3.x2At16),
  ]);
  claims.push([
    'tutorial sequence',
    'dynamic batching raises throughput at `-b 1`, concurrency 16',
    formatGain(TUTORIAL_REPORTED.batching / TUTORIAL_REPORTED.noBatching),
    formatGain(t3.dbAt16),
    verdict(TUTORIAL_REPORTED.batching / TUTORIAL_REPORTED.noBatching, t3.dbAt16),
  ]);
  out.push('#### Claims checked');
  out.push(
    '"reproduced" = the measured ratio is a gain of more than 5% and at least half the reported gain over 1×; "met" / "missed" = a requirement of the replay itself. Computed from the tables below.',
  );
  out.push(table(['study', 'claim', 'reported', 'this machine', 'result'], claims));

  // ---- study 1
  out.push(`#### 1. Centralized serving: ${p.jobs} jobs, ${p.images} images, ResNet-50`);
  out.push(
    `The study (issue 16's summary) ran N parallel jobs over 1,000 images with a ResNet-152 on 8 vCPUs, each job either loading the model itself or calling one inference server, and reported +26.5% from dynamic batching, +36% from a second worker and 3.75× in total. Here: ${p.jobs} Python processes (\`tools/bench/seeds/job.py\`, \`.venv/bin/python\`) each take a contiguous share of ${p.images} images, open the image file, preprocess it (Pillow + numpy: crop, resize to 224×224, ImageNet normalisation, FP32 [1, 3, 224, 224]) and classify it — in-process with onnxruntime (PyPI) on the generated \`resnet50\` (torchvision graph, random weights, \`node dist/tools/gen_resnet50.js\`), or by sending it to Serval with the official \`tritonclient.http\` (binary tensors, one request in flight per job). Images: the repository bundles one real photo, \`docs/examples/food.jpg\` (160×160); image k is a deterministic crop / mirror of it, the same M images for every variant. Each served variant gets its own Serval holding only that model, started before the jobs (the study's long-lived server; its start-up until ready is listed, not counted). Wall time runs from starting the ${p.jobs} processes to the last one exiting, so the local jobs pay their interpreter start and model load and the served jobs their interpreter start and client set-up. ${p.rounds > 1 ? `${p.rounds} rounds, the second in reverse order; images/s is the median over rounds.` : 'One round.'} RSS: the peak of the summed RSS of the jobs (and the server) sampled every 100 ms from /proc. Cores: CPU seconds / wall seconds, the jobs' from their own getrusage (all threads), the server's from /proc, "other" = the rest of the machine's busy time.`,
  );
  out.push(table(s1.head, s1.rows));
  out.push(
    table(
      ['ratio', 'the study (8 vCPUs)', `this machine (${CORES} cores)`],
      s1.ratios.map((x) => [x.what, formatGain(x.reported), formatGain(x.measured)]),
    ),
  );
  out.push(s1.why);

  // ---- study 2
  out.push(`#### 2. The batching-worker study: \`ab -n ${p.abN} -c ${p.abC}\``);
  out.push(
    `The study put a batching worker behind an HTTP route and measured it with ApacheBench, reporting 2.5× from dynamic batching on a GPU. Here: \`ab\` (${r.abAvailable || 'not run'}) POSTs one fixed KServe v2 request with Triton's binary tensor extension (${r.abBodyBytes ?? '–'} bytes: a ${r.abHeaderLength ?? '–'}-byte JSON header, \`-H 'Inference-Header-Content-Length: ${r.abHeaderLength ?? '–'}'\`, then 512 FP32 values; the output asked for in binary) to \`/v2/models/ranker_mlp__{nodb,db}/infer\` of one Serval, \`ab\`'s default HTTP/1.0 without keep-alive, as in the study. Model: \`ranker_mlp\` (FP32 [512] → [1], 4 × 1024-wide MLP, max batch 64), because it is where batching matters on a CPU: its in-process ceiling grows ${formatGain(ab.ceilingGain)} from batch 1 to batch ${p.abC} (below), against ${formatGain(ratio(r.ceilings.find((c) => c.model === 'resnet50' && c.batch === p.jobs)?.itemsPerS, r.ceilings.find((c) => c.model === 'resnet50' && c.batch === 1)?.itemsPerS))} for the convolutional resnet50 from batch 1 to ${p.jobs} (study 1). One warm-up of 500 requests per variant, then ${p.abRounds} round${p.abRounds > 1 ? 's in ABBA order; the ratio uses the median req/s' : ''}. "avg batch" = inferences / executions from the statistics extension over the run.`,
  );
  out.push(table(ab.head, ab.rows));
  out.push(
    `Batching / none (median req/s): **${formatGain(ab.gain)}** (the study: ${formatGain(STUDY2_REPORTED.batching)} on a GPU). In-process ceiling of \`ranker_mlp\` (onnxruntime-node, ${CORES} threads): ${ab.ceilingText}.`,
  );

  // ---- study 3
  out.push("#### 3. The Triton tutorial's perf_analyzer sequence (Conceptual Guide part 2)");
  out.push(
    `The tutorial serves a text-recognition model (ResNet-based, \`-b 2\`, concurrency 2–16, an A100) without dynamic batching, with it, and with it and 2 instances, and reads perf_analyzer's server-side split: at concurrency 16 batching took it from 975 to 3,188 infer/s, queue time from 15.9 ms to 3.8 ms, and 2 instances to 4,134 infer/s. Here: \`image_classifier\` (the bundled food classifier, a small CNN, FP32 [3, 224, 224] → [11], max batch 16) — the project's own stand-in for the tutorial's image model, and fast enough on ${CORES} cores that every perf_analyzer window holds many requests (the generated \`resnet50\` runs ${f1(r.ceilings.find((c) => c.model === 'resnet50' && c.batch === 1)?.itemsPerS ?? NaN)} images/s in-process at batch 1 here, too few requests per window at \`-b 16\` for stable measurements). Variants in one Serval: ${r.plan.study3Variants.map((v) => `\`image_classifier__${v}\``).join(', ')} (\`nodb\` = no dynamic batching, 1 instance; \`db\` = \`dynamic_batching { }\`, 1 instance; \`db_x2\` = the same with \`count: 2\`), run interleaved per point. \`perf_analyzer -m MODEL -i http -b B --concurrency-range C:C -p ${p.paWindowMs} -r ${p.paTrials} -s ${p.paStability}\`${p.paRetry ? ` (one retry with \`-r ${p.paTrials + 2} -s 50\` when unstable; † marks such a point)` : ' (no retry in a quick run)'}. Throughput counts items (batch × requests). Server columns are the statistics extension's averages over the measurement (perf_analyzer's "Server:" section).`,
  );
  out.push(table(t3.head, t3.rows));

  if (r.notes.length) {
    out.push('#### Notes');
    out.push(r.notes.map((e) => `- ${e}`).join('\n'));
  }
  if (r.errors.length) {
    out.push('#### Errors in this run');
    out.push(r.errors.map((e) => `- ${e.replace(/\n/g, ' ')}`).join('\n'));
  }
  return out.join('\n\n');
}

function study1Table(r: Results): {
  head: string[];
  rows: string[][];
  ratios: StudyRatio[];
  memory?: { local: number; served: number };
  agree?: { same: number; of: number };
  why: string;
} {
  const keys: Study1Key[] = ['local_default', 'local_1t', 'served_nodb', 'served_db', 'served_db_x2'];
  const runsOf = (k: Study1Key) => r.study1.filter((x) => x.variant === k && x.summary);
  const ips = (k: Study1Key) => median(runsOf(k).map((x) => x.summary!.imagesPerS));
  const med = (k: Study1Key, f: (x: Study1Run) => number) => median(runsOf(k).map(f));
  const localIps = ips('local_default');
  const head = [
    'variant',
    'wall s (per round)',
    'images/s',
    '× local jobs',
    'job start → model ready s (mean)',
    'peak RSS jobs MiB',
    'peak RSS server MiB (idle)',
    'server start s',
    'peak RSS total MiB',
    'cores jobs / server / other',
    'avg batch',
  ];
  const rows: string[][] = [];
  for (const k of keys) {
    const runs = runsOf(k);
    const label = r.study1.find((x) => x.variant === k)?.label ?? k;
    if (runs.length === 0) {
      rows.push([label, 'failed', '–', '–', '–', '–', '–', '–', '–', '–', '–']);
      continue;
    }
    const served = k.startsWith('served');
    rows.push([
      label,
      runs.map((x) => x.summary!.wallS.toFixed(1)).join(' / '),
      f1(ips(k)),
      `${f2(ratio(ips(k), localIps))}×`,
      f2(med(k, (x) => x.summary!.loadS)),
      mib(med(k, (x) => x.jobsRssPeakKib)),
      served ? `${mib(med(k, (x) => x.serverRssPeakKib))} (${mib(med(k, (x) => x.serverIdleRssKib))})` : '–',
      served ? f1(med(k, (x) => x.serverStartS)) : '–',
      mib(med(k, (x) => x.totalRssPeakKib)),
      `${f2(med(k, (x) => x.jobsCores))} / ${served ? f2(med(k, (x) => x.serverCores)) : '–'} / ${f2(med(k, (x) => x.otherCores))}`,
      served ? f1(med(k, (x) => x.avgBatch)) : '–',
    ]);
  }
  const ratios = study1Ratios({
    local: localIps,
    servedNoBatching: ips('served_nodb'),
    servedBatching: ips('served_db'),
    servedBatchingX2: ips('served_db_x2'),
  });
  const servedKeys: Study1Key[] = ['served_nodb', 'served_db', 'served_db_x2'];
  const bestServed = servedKeys.reduce((a, b) => (ips(b) > ips(a) || !Number.isFinite(ips(a)) ? b : a));
  // Memory and answers: the central server with one instance (one copy of the weights) against
  // the naive local jobs.
  const memory =
    runsOf('local_default').length && runsOf('served_db').length
      ? { local: med('local_default', (x) => x.totalRssPeakKib), served: med('served_db', (x) => x.totalRssPeakKib) }
      : undefined;
  const localRun = runsOf('local_default')[0]?.summary;
  const servedRun = runsOf('served_db')[0]?.summary;
  const agree = localRun && servedRun ? agreement(localRun, servedRun) : undefined;

  // Why this machine differs, from measurements only: what batching can give at all here (the
  // model's in-process ceiling), how many cores each side had and used, and the batches formed.
  const c1 = r.ceilings.find((c) => c.model === 'resnet50' && c.batch === 1)?.itemsPerS;
  const cN = r.ceilings.find((c) => c.model === 'resnet50' && c.batch === r.plan.jobs)?.itemsPerS;
  const n = r.plan.jobs;
  const why: string[] = [];
  why.push(
    `**Why this machine differs.** (1) *What batching can give at all:* the model's own in-process throughput (onnxruntime-node, ${CORES} threads, measured before the jobs) is ${f1(c1 ?? NaN)} images/s at batch 1 and ${f1(cN ?? NaN)} at batch ${n}, the largest batch ${n} jobs with one image in flight each can form: ${formatGain(ratio(cN, c1))}. That bounds what dynamic batching can add here; Serval formed batches of ${f1(med('served_db', (x) => x.avgBatch))} on average (1 instance) and ${f1(med('served_db_x2', (x) => x.avgBatch))} (2 instances).`,
  );
  const free = (k: Study1Key) => CORES - med(k, (x) => x.otherCores);
  const used = (k: Study1Key) => med(k, (x) => x.jobsCores) + (k.startsWith('served') ? med(k, (x) => x.serverCores) : 0);
  why.push(
    `(2) *Cores:* the ${n} local jobs used ${f2(used('local_default'))} cores with onnxruntime's default thread pools (each sized for the whole machine) and ${f2(used('local_1t'))} with ${r.study1Threads1t} thread${r.study1Threads1t > 1 ? 's' : ''} each, out of ${f2(free('local_default'))} / ${f2(free('local_1t'))} not used by other processes; the best served variant (\`${bestServed}\`) used ${f2(med(bestServed, (x) => x.serverCores))} in the server and ${f2(med(bestServed, (x) => x.jobsCores))} in the jobs (preprocessing, HTTP client) out of ${f2(free(bestServed))}. A central server raises throughput only by using cores the local jobs leave idle or waste; with ${CORES} cores and ${n} jobs there is little of either, while on the study's 8 vCPUs each job ran the model in its own process with its own thread pool, leaving a server more to reclaim (the study's core use is not known here, only its ratios). What serving saves here is memory — one copy of the weights instead of ${n} (peak RSS in the table) — and each job's model load (${f2(med('local_default', (x) => x.summary!.loadS))} s per local job from start to model ready vs ${f2(med(bestServed, (x) => x.summary!.loadS))} s for a served job).`,
  );
  why.push(
    `(3) *A second instance* on ${CORES} cores splits them: Serval gives each of 2 CPU instances ${Math.max(1, Math.floor(CORES / 2))} intra-op thread, so each batch runs on fewer cores, and with only ${n} requests in flight the two instances share them (compare the average batches in (1)).`,
  );
  return { head, rows, ratios, memory, agree, why: why.join(' ') };
}

function abSummary(r: Results): {
  head: string[];
  rows: string[][];
  gain: number;
  non2xx: number;
  runs: number;
  ceilingGain: number;
  ceilingText: string;
} {
  const head = [
    'variant',
    'round',
    'req/s',
    'mean ms',
    'p50 ms',
    'p99 ms',
    'longest ms',
    'complete',
    'non-2xx',
    'failed',
    'avg batch',
    'cores server / ab / other',
  ];
  const rows = r.study2.map((x) => [
    `ranker_mlp__${x.variant}`,
    String(x.round),
    x.ab ? f0(x.ab.requestsPerS) : cellText(x.error ?? 'failed'),
    x.ab ? f1(x.ab.meanMs) : '–',
    x.ab ? f0(x.ab.p50Ms) : '–',
    x.ab ? f0(x.ab.p99Ms) : '–',
    x.ab ? f0(x.ab.longestMs) : '–',
    x.ab ? String(x.ab.complete) : '–',
    x.ab ? String(x.ab.non2xx) : '–',
    x.ab ? String(x.ab.failed) : '–',
    f1(x.avgBatch),
    x.use ? `${f2(x.use.serverCores)} / ${f2(x.use.loadGenCores)} / ${f2(x.use.otherCores)}` : '–',
  ]);
  const rps = (v: 'nodb' | 'db') => median(r.study2.filter((x) => x.variant === v && x.ab).map((x) => x.ab!.requestsPerS));
  const parsed = r.study2.filter((x) => x.ab);
  const c1 = r.ceilings.find((c) => c.model === 'ranker_mlp' && c.batch === 1)?.itemsPerS;
  const cN = r.ceilings.find((c) => c.model === 'ranker_mlp' && c.batch === r.plan.abC)?.itemsPerS;
  return {
    head,
    rows,
    gain: ratio(rps('db'), rps('nodb')),
    non2xx: parsed.reduce((s, x) => s + x.ab!.non2xx + (x.ab!.complete < r.plan.abN ? r.plan.abN - x.ab!.complete : 0), 0),
    runs: parsed.length,
    ceilingGain: ratio(cN, c1),
    ceilingText: `${f0(c1 ?? NaN)} items/s at batch 1, ${f0(cN ?? NaN)} at batch ${r.plan.abC} (${formatGain(ratio(cN, c1))})`,
  };
}

function study3Gains(r: Results): { head: string[]; rows: string[][]; x2At16: number; dbAt16: number } {
  const head = [
    '-b',
    'concurrency',
    'variant',
    'infer/s',
    '× db (1 instance)',
    'p50 ms',
    'p99 ms',
    'server request µs',
    'queue µs',
    'compute infer µs',
    'queue share',
    'avg batch',
    'cores server / perf_analyzer / other',
  ];
  const find = (v: Study3Variant, b: number, c: number) => r.study3.find((x) => x.variant === v && x.batch === b && x.conc === c)?.pa;
  const rows: string[][] = [];
  for (const pt of r.plan.paPoints) {
    for (const v of r.plan.study3Variants) {
      const x = r.study3.find((y) => y.variant === v && y.batch === pt.batch && y.conc === pt.conc);
      if (!x) continue;
      const pa = x.pa;
      const db = find('db', pt.batch, pt.conc);
      rows.push([
        String(pt.batch),
        String(pt.conc),
        v,
        pa ? `${f1(pa.throughput)}${x.loose ? ' †' : ''}` : cellText(x.error ?? 'failed'),
        pa && db ? `${f2(ratio(pa.throughput, db.throughput))}×` : '–',
        fms(pa?.p50Us),
        fms(pa?.p99Us),
        pa?.serverRequestUs !== undefined ? String(pa.serverRequestUs) : '–',
        pa?.queueUs !== undefined ? String(pa.queueUs) : '–',
        pa?.computeInferUs !== undefined ? String(pa.computeInferUs) : '–',
        pa?.queueUs !== undefined && pa.serverRequestUs ? `${((pa.queueUs / pa.serverRequestUs) * 100).toFixed(0)}%` : '–',
        pa?.inferenceCount && pa.executionCount ? f1(pa.inferenceCount / pa.executionCount) : '–',
        x.use ? `${f2(x.use.serverCores)} / ${f2(x.use.loadGenCores)} / ${f2(x.use.otherCores)}` : '–',
      ]);
    }
  }
  return {
    head,
    rows,
    x2At16: ratio(find('db_x2', 1, 16)?.throughput, find('db', 1, 16)?.throughput),
    dbAt16: ratio(find('db', 1, 16)?.throughput, find('nodb', 1, 16)?.throughput),
  };
}

// ------------------------------------------------------------------ entry

runSection('seeds', () => new Seeds(parseArgs(process.argv.slice(2))).run());
