/**
 * Serval's throughput benchmark, in one run (see docs/benchmarks.md):
 *
 *   (a) the ceiling: items/s of each model's ONNX file in a tight in-process onnxruntime-node
 *       loop (tools/bench_onnx.ts), batch 1 and the best batch ≤ max_batch_size, 1 or 2 intra-op
 *       threads;
 *   (b) Serval without dynamic batching, (c) with it, (d) with it and 2 instances, for
 *       ranker_mlp, image_classifier and resnet50 (variant repositories in a temp dir), under
 *       the official perf_analyzer over gRPC and HTTP;
 *   (e) the protocol ceiling for small requests: bare fastify / grpc-js servers computing
 *       `simple` in the handler (bare_http.ts, bare_grpc.ts) vs Serval's `simple` at
 *       concurrency 16;
 *   (f) Serval's own overhead for `simple` at concurrency 1 (server-side request latency minus
 *       compute_infer, perf_analyzer's server section — averages);
 *
 * then the targets, met or missed, written with the setup to docs/benchmarks.md (between
 * markers; the rest of the file is kept). Full logs, CSVs and results.json go to
 * tmp/bench/run-<time>/.
 *
 *   node dist/tools/bench/bench.js [--quick] [--profile|--no-profile] [--models a,b] [--out FILE]
 *
 * Normally started by tools/bench/run.sh.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { formatSummary, summarizeProfile } from './cpuprofile.js';
import {
  alive,
  exitDescription,
  parseBenchOnnx,
  parsePerfAnalyzer,
  runMeasured,
  type Server,
  sleep,
  startServer,
  stopServer,
  variantConfig,
} from './harness.js';
import { PERF_ANALYZER, ROOT, rel, SERVAL_CLI } from './paths.js';
import { machineCpu, ticksPerSecond } from './procstat.js';
import { computeTargets, renderConsole, renderMarkdown, writeDoc } from './report.js';
import { paVersion, pkgVersion, runSection } from './section.js';
import type { Ceiling, CeilingRun, Point, ProfileRun, Protocol, Results } from './types.js';

interface Plan {
  concurrencies: number[];
  protocols: Protocol[];
  windowMs: Record<string, number>;
  stability: number;
  trials: number;
  retryStability: number;
  ceilingBatches: Record<string, number[]>;
  ceilingSeconds: Record<string, number>;
  ceilingWarmup: Record<string, number>;
  ceilingAfter: boolean;
  simpleRepeats: number;
  simpleConc: number;
  /** Models for which (c) is also measured with intra_op_thread_count 1, at the top concurrency. */
  intraOne: string[];
  /** Per-model first -s (stability %) where the default is too tight (few large batches per window). */
  stabilityFor: Record<string, number>;
  /** Seconds the run may spend in total waiting for other processes to go quiet and re-measuring. */
  noiseBudgetS: number;
}

/** A measurement during which other processes used more than this many cores is re-done once (budget permitting). */
const NOISY_CORES = 0.25;

const FULL: Plan = {
  concurrencies: [1, 8, 32],
  protocols: ['grpc', 'http'],
  windowMs: { ranker_mlp: 1500, image_classifier: 2000, resnet50: 3000, simple: 1500 },
  stability: 20,
  trials: 6,
  retryStability: 50,
  ceilingBatches: { ranker_mlp: [1, 8, 16, 32, 64], image_classifier: [1, 4, 8, 16], resnet50: [1, 4, 16] },
  ceilingSeconds: { ranker_mlp: 1.5, image_classifier: 1.5, resnet50: 3 },
  ceilingWarmup: { ranker_mlp: 10, image_classifier: 3, resnet50: 1 },
  ceilingAfter: true,
  simpleRepeats: 2,
  simpleConc: 16,
  intraOne: ['ranker_mlp'],
  stabilityFor: { resnet50: 30 },
  noiseBudgetS: 150,
};

const QUICK: Plan = {
  concurrencies: [32],
  protocols: ['grpc'],
  windowMs: { ranker_mlp: 1000, image_classifier: 1000, resnet50: 2500, simple: 1000 },
  stability: 30,
  trials: 5,
  retryStability: 60,
  ceilingBatches: { ranker_mlp: [1, 64], image_classifier: [1, 16], resnet50: [1, 16] },
  ceilingSeconds: { ranker_mlp: 1, image_classifier: 1, resnet50: 2 },
  ceilingWarmup: { ranker_mlp: 5, image_classifier: 2, resnet50: 1 },
  ceilingAfter: false,
  simpleRepeats: 1,
  simpleConc: 16,
  intraOne: [],
  stabilityFor: {},
  noiseBudgetS: 30,
};

interface Args {
  quick: boolean;
  profile: boolean | undefined;
  models: string[] | undefined;
  out: string;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { quick: false, profile: undefined, models: undefined, out: path.join(ROOT, 'docs', 'benchmarks.md') };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    if (k === '--quick') a.quick = true;
    else if (k === '--profile') a.profile = true;
    else if (k === '--no-profile') a.profile = false;
    else if (k === '--models') a.models = argv[++i]!.split(',');
    else if (k === '--out') a.out = path.resolve(argv[++i]!);
    else throw new Error(`unknown argument ${k} (expected --quick, --profile, --no-profile, --models a,b, --out FILE)`);
  }
  return a;
}

const PA = PERF_ANALYZER;
const CLI = SERVAL_CLI;
const BENCH_ONNX = path.join(ROOT, 'dist', 'tools', 'bench_onnx.js');
const GEN_RESNET = path.join(ROOT, 'dist', 'tools', 'gen_resnet50.js');
const BARE_HTTP = path.join(ROOT, 'dist', 'tools', 'bench', 'bare_http.js');
const BARE_GRPC = path.join(ROOT, 'dist', 'tools', 'bench', 'bare_grpc.js');
const SIMPLE_INPUT = path.join(ROOT, 'tools', 'perf', 'simple_input.json');

const log = (s: string) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${s}`);

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT }).trim();
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string };
    return `${err.stdout ?? ''}${err.stderr ?? ''}`.trim() || 'unavailable';
  }
}

function setupInfo(): [string, string][] {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const modelName = cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  const flags = cpuinfo.match(/^flags\s*:\s*(.*)$/m)?.[1]?.split(' ') ?? [];
  const simd = ['avx2', 'avx512f', 'avx512_vnni', 'fma'].filter((f) => flags.includes(f)).join(', ') || 'none of avx2/avx512f/fma';
  const hyp = sh('bash', ['-c', "lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p'"]);
  const dirty = sh('git', ['status', '--porcelain']).split('\n').filter(Boolean).length;
  return [
    ['CPU', `${modelName} (${simd})${hyp && hyp !== 'unavailable' ? `, ${hyp} guest` : ''}`],
    ['Cores', `${os.availableParallelism()} logical (os.availableParallelism), ${os.cpus().length} listed`],
    ['Memory', `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`],
    ['OS', `${os.type()} ${os.release()} (${os.arch()})`],
    ['Node.js', process.version],
    ['onnxruntime-node', pkgVersion('onnxruntime-node')],
    [
      'fastify / @grpc/grpc-js / @grpc/proto-loader',
      `${pkgVersion('fastify')} / ${pkgVersion('@grpc/grpc-js')} / ${pkgVersion('@grpc/proto-loader')}`,
    ],
    ['perf_analyzer', paVersion()],
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

/** Successful requests of a model so far, from the statistics extension (Serval and bare-http). */
async function successCount(http: string, model: string): Promise<number | undefined> {
  try {
    const r = await fetch(`http://${http}/v2/models/${model}/stats`);
    const j = (await r.json()) as { model_stats?: { inference_stats?: { success?: { count?: number | string } } }[] };
    const c = j.model_stats?.[0]?.inference_stats?.success?.count;
    return c === undefined ? undefined : Number(c);
  } catch {
    return undefined;
  }
}

function maxBatchOf(configText: string): number {
  return Number(configText.match(/^max_batch_size\s*:\s*(\d+)/m)?.[1] ?? 0);
}

/**
 * A server the benchmark can restart: on this shared machine other jobs' clean-up code has been
 * seen to signal process groups by stale ids, so a server may die under a run that is not its
 * fault; the point is then re-run on a fresh server and the restart is reported.
 */
/** perf_analyzer's report is complete once it has printed its closing throughput-vs-latency summary. */
const printedReport = (stdout: string): boolean => /Inferences\/Second vs\. Client/.test(stdout);

class Managed {
  server!: Server;
  restarts = 0;
  constructor(
    readonly name: 'serval' | 'bare-http' | 'bare-grpc',
    readonly label: string,
    readonly args: string[],
    readonly want: { http: boolean; grpc: boolean },
    readonly logBase: string,
  ) {}

  async start(): Promise<this> {
    const logFile = `${this.logBase}${this.restarts ? `.restart${this.restarts}` : ''}.log`;
    this.server = await startServer(this.name, this.args, logFile, this.want, ROOT);
    log(
      `  ${this.label} pid ${this.server.pid}: ${this.server.grpc ? `grpc ${this.server.grpc} ` : ''}${this.server.http ? `http ${this.server.http}` : ''}`,
    );
    return this;
  }

  /** Restarts a dead server; returns why it had died, or undefined if it was alive. */
  async ensure(): Promise<string | undefined> {
    if (alive(this.server)) return undefined;
    const why = `${this.label} (pid ${this.server.pid}) ${exitDescription(this.server)}; restarted`;
    this.restarts++;
    await this.start();
    return why;
  }

  stop(): Promise<void> {
    return stopServer(this.server);
  }
}

class Bench {
  readonly plan: Plan;
  readonly work: string;
  readonly results: Results;
  private readonly t0 = Date.now();

  constructor(readonly args: Args) {
    this.plan = args.quick ? QUICK : FULL;
    const stamp = new Date().toISOString().replace(/[:]/g, '').replace(/\..*$/, '');
    this.work = path.join(ROOT, 'tmp', 'bench', `run-${stamp}${args.quick ? '-quick' : ''}`);
    mkdirSync(path.join(this.work, 'logs'), { recursive: true });
    mkdirSync(path.join(this.work, 'csv'), { recursive: true });
    const latest = path.join(ROOT, 'tmp', 'bench', 'latest');
    rmSync(latest, { force: true });
    try {
      symlinkSync(path.basename(this.work), latest);
    } catch {
      /* not important */
    }
    this.results = {
      mode: args.quick ? 'quick' : 'full',
      startedAt: new Date().toISOString(),
      finishedAt: '',
      durationS: 0,
      commandLine: `bash tools/bench/run.sh${args.quick ? ' --quick' : ''}`,
      setup: setupInfo(),
      settings: [],
      ceilings: [],
      points: [],
      profiles: [],
      targets: [],
      commands: [],
      workDir: rel(this.work),
      errors: [],
    };
    const p = this.plan;
    this.results.settings = [
      [
        'perf_analyzer',
        `sync mode, -b 1, --concurrency-range C:C per point (one process per point), time windows -p ${Object.entries(p.windowMs)
          .map(([m, v]) => `${v} (${m})`)
          .join(', ')} ms, -s ${p.stability}${Object.entries(p.stabilityFor)
          .map(([m, v]) => ` (${m}: ${v})`)
          .join('')} -r ${p.trials}; on "Failed to obtain stable measurement" one retry with -s ${p.retryStability}`,
      ],
      [
        'Noise guard',
        `a measurement during which other processes used > ${NOISY_CORES} cores (from /proc/stat) is repeated once after waiting for a quiet machine; at most ${p.noiseBudgetS} s of waiting per run`,
      ],
      [
        'Concurrency (models)',
        p.concurrencies.join(', ') +
          (p.intraOne.length
            ? `; (c) with intra_op_thread_count 1 and (c) with ORT spinning on for ${p.intraOne.join(', ')} at ${Math.max(...p.concurrencies)} only`
            : ''),
      ],
      [
        'Serval variants',
        `per model one repository with \`<model>__nodb\` (b), \`<model>__db\` (c), \`<model>__db_x2\` (d)${p.intraOne.length ? ', `<model>__db_t1` (c, 1 intra-op thread), `<model>__db_spin` (c, ORT intra-op spinning on)' : ''}: the model folder copied, config.pbtxt renamed and its \`dynamic_batching\` / \`instance_group\` rewritten; Serval's defaults: intra-op threads = cores / CPU instances (2 for one instance, 1 each for two), ORT intra-op spinning off`,
      ],
      ['Protocols (models)', p.protocols.join(', ')],
      [
        'simple',
        `concurrency ${p.simpleConc} (×${p.simpleRepeats}, interleaved Serval / bare) and 1; --input-data tools/perf/simple_input.json (perf_analyzer validates every output)`,
      ],
      [
        'Ceiling sweep',
        Object.entries(p.ceilingBatches)
          .map(([m, b]) => `${m}: batch ${b.join(',')} × threads 1,2, ${p.ceilingSeconds[m]} s each`)
          .join('; ') + (p.ceilingAfter ? "; best and batch-1 configurations re-measured after the model's server runs" : ''),
      ],
    ];
  }

  private noiseSpentS = 0;

  /**
   * Called when other processes loaded the machine during a measurement: waits (1 s samples)
   * until they use less than NOISY_CORES, within the run's noise budget. Returns false when the
   * budget is spent, i.e. the measurement should be kept as it is (and is marked noisy).
   */
  private async waitQuiet(what: string, otherCores: number): Promise<boolean> {
    if (this.noiseSpentS >= this.plan.noiseBudgetS) return false;
    log(`    other processes used ${otherCores.toFixed(2)} cores during ${what}; waiting for a quiet machine, then measuring again`);
    const t0 = Date.now();
    for (;;) {
      const a = machineCpu();
      await sleep(1000);
      const b = machineCpu();
      const busy = (b.busy - a.busy) / ticksPerSecond();
      this.noiseSpentS += 1;
      if (busy < NOISY_CORES) break;
      if (this.noiseSpentS >= this.plan.noiseBudgetS) break;
    }
    log(
      `    machine quiet after ${((Date.now() - t0) / 1000).toFixed(0)} s (noise budget used: ${this.noiseSpentS.toFixed(0)}/${this.plan.noiseBudgetS} s)`,
    );
    return true;
  }

  private cmd(c: string[]): string {
    const s = c
      .map((x) => (x.startsWith(ROOT) ? rel(x) : x))
      .map((x) => (/[\s"']/.test(x) ? JSON.stringify(x) : x))
      .join(' ');
    this.results.commands.push(s);
    return s;
  }

  // -------------------------------------------------------------- (a) the ceiling
  async ceiling(model: string, onnx: string, maxBatch: number): Promise<Ceiling> {
    const batches = this.plan.ceilingBatches[model]!.filter((b) => b <= maxBatch);
    const runs: CeilingRun[] = [];
    let other = 0;
    let steal = 0;
    let n = 0;
    for (const threads of [1, 2]) {
      const c = [
        process.execPath,
        BENCH_ONNX,
        onnx,
        '--batch',
        batches.join(','),
        '--threads',
        String(threads),
        '--seconds',
        String(this.plan.ceilingSeconds[model]),
        '--warmup',
        String(this.plan.ceilingWarmup[model]),
      ];
      log(`(a) ${model}: ${this.cmd(c)}`);
      let r = await runMeasured(c, path.join(this.work, 'logs', `ceiling_${model}.log`), 600);
      if (r.code === 0 && r.use.otherCores > NOISY_CORES && (await this.waitQuiet(`the ${model} ceiling sweep`, r.use.otherCores))) {
        this.cmd(c);
        r = await runMeasured(c, path.join(this.work, 'logs', `ceiling_${model}.log`), 600);
      }
      if (r.code !== 0) throw new Error(`bench-onnx failed for ${model}: ${r.stdout.slice(-500)}`);
      for (const p of parseBenchOnnx(r.stdout)) runs.push({ threads, batch: p.batch, itemsPerS: p.itemsPerS, p50Ms: p.p50Ms });
      other += r.use.otherCores;
      steal += r.use.stealCores;
      n++;
    }
    const best = runs.reduce((a, b) => (b.itemsPerS > a.itemsPerS ? b : a));
    const batch1 = runs.filter((r) => r.batch === 1).reduce((a, b) => (b.itemsPerS > a.itemsPerS ? b : a));
    for (const r of runs) log(`    threads ${r.threads} batch ${String(r.batch).padStart(2)}: ${r.itemsPerS.toFixed(1)} items/s`);
    return {
      model,
      onnx: rel(onnx),
      maxBatch,
      runs,
      best,
      batch1,
      bestValue: best.itemsPerS,
      batch1Value: batch1.itemsPerS,
      otherCores: other / n,
      stealCores: steal / n,
    };
  }

  async ceilingAfter(c: Ceiling, onnx: string): Promise<void> {
    const model = c.model;
    const run = async (batch: number, threads: number): Promise<number | undefined> => {
      const cmd = [
        process.execPath,
        BENCH_ONNX,
        onnx,
        '--batch',
        String(batch),
        '--threads',
        String(threads),
        '--seconds',
        String(this.plan.ceilingSeconds[model]),
        '--warmup',
        String(this.plan.ceilingWarmup[model]),
      ];
      log(`(a) ${model} re-check: ${this.cmd(cmd)}`);
      let r = await runMeasured(cmd, path.join(this.work, 'logs', `ceiling_${model}.log`), 600);
      if (r.code === 0 && r.use.otherCores > NOISY_CORES && (await this.waitQuiet(`the ${model} ceiling re-check`, r.use.otherCores))) {
        this.cmd(cmd);
        r = await runMeasured(cmd, path.join(this.work, 'logs', `ceiling_${model}.log`), 600);
      }
      if (r.use.otherCores > NOISY_CORES)
        this.results.errors.push(`ceiling re-check ${model}: other processes used ${r.use.otherCores.toFixed(2)} cores`);
      return parseBenchOnnx(r.stdout)[0]?.itemsPerS;
    };
    c.afterBest = await run(c.best.batch, c.best.threads);
    c.afterBatch1 = c.best.batch === 1 && c.best.threads === c.batch1.threads ? c.afterBest : await run(1, c.batch1.threads);
    // Noise only ever slows a tight loop down, so the higher of the two is the better estimate.
    if (c.afterBest !== undefined) c.bestValue = Math.max(c.best.itemsPerS, c.afterBest);
    if (c.afterBatch1 !== undefined) c.batch1Value = Math.max(c.batch1.itemsPerS, c.afterBatch1);
    log(
      `    re-check: best ${c.afterBest?.toFixed(1)} (sweep ${c.best.itemsPerS.toFixed(1)}), batch 1 ${c.afterBatch1?.toFixed(1)} (sweep ${c.batch1.itemsPerS.toFixed(1)})`,
    );
  }

  // -------------------------------------------------------------- perf_analyzer points
  async pa(
    managed: Managed,
    p: Omit<Point, 'ok' | 'stability' | 'command' | 'log' | 'seconds' | 'server'> & { windowMs: number; extra?: string[] },
  ): Promise<Point> {
    const notes: string[] = [];
    const died = await managed.ensure();
    if (died) notes.push(died);
    const id = `${p.phase}_${p.modelName}_${managed.name}_${p.proto}_c${p.conc}_r${p.repeat}`;
    const logFile = path.join(this.work, 'logs', `pa_${id}.log`);
    const csv = path.join(this.work, 'csv', `pa_${id}.csv`);
    const t0 = Date.now();
    const attempt = async (stability: number, trials = this.plan.trials, windowMs = p.windowMs) => {
      const server = managed.server;
      const url = p.proto === 'grpc' ? server.grpc! : server.http!;
      const c = [
        PA,
        '-m',
        p.modelName,
        '-u',
        url,
        '-i',
        p.proto,
        '-b',
        '1',
        '--concurrency-range',
        `${p.conc}:${p.conc}`,
        '-p',
        String(windowMs),
        '-s',
        String(stability),
        '-r',
        String(trials),
        '-f',
        csv,
        ...(p.extra ?? []),
      ];
      const command = this.cmd(c);
      const timeout = Math.ceil((windowMs / 1000) * (trials + 3) * 2 + 30);
      const r = await runMeasured(c, logFile, timeout, server.pid);
      return { r, command };
    };
    const firstStability = this.plan.stabilityFor[p.model] ?? this.plan.stability;
    let stability = firstStability;
    let { r, command } = await attempt(stability);
    // A profile is cut to this span and divided by the requests the server answered meanwhile,
    // which include those of any attempt that was retried.
    const firstStartUs = r.monoUs[0];
    if (r.code !== 0 && /Failed to obtain stable measurement/.test(r.stdout)) {
      stability = this.plan.retryStability;
      log(`    unstable at -s ${firstStability}; retrying with -s ${stability}`);
      ({ r, command } = await attempt(stability));
    }
    if (r.timedOut && !printedReport(r.stdout)) {
      // Against the bare fastify server (~20,000 requests/s) perf_analyzer 2.51 needs more than
      // a core of its own; its main thread then falls behind collecting timestamps, never closes
      // the window and grows without bound (1.3 GB in 40 s, seen with ps). One retry with
      // shorter windows and fewer trials, so there is less to collect per window.
      const shorter = Math.max(500, Math.round(p.windowMs / 2));
      notes.push(`perf_analyzer stalled without a report; retried with -p ${shorter} -r 3`);
      log(`    perf_analyzer stalled; retrying with -p ${shorter} -r 3`);
      ({ r, command } = await attempt(this.plan.retryStability, 3, shorter));
    }
    if (r.code !== 0) {
      const why = await managed.ensure();
      if (why) {
        notes.push(`${why} (during this point)`);
        log(`    ${why}; re-running the point`);
        ({ r, command } = await attempt(stability));
      }
    }
    if (r.code === 0 && r.use.otherCores > NOISY_CORES && (await this.waitQuiet(id, r.use.otherCores))) {
      notes.push(`re-measured: other processes used ${r.use.otherCores.toFixed(2)} cores during the first attempt`);
      stability = firstStability;
      ({ r, command } = await attempt(stability));
      if (r.code !== 0 && /Failed to obtain stable measurement/.test(r.stdout)) {
        stability = this.plan.retryStability;
        ({ r, command } = await attempt(stability));
      }
    }
    if (r.code === 0 && r.use.otherCores > NOISY_CORES) notes.push(`noisy: other processes used ${r.use.otherCores.toFixed(2)} cores`);
    // perf_analyzer 2.51 sometimes hangs on exit after printing its whole report; the report
    // (it ends with the throughput-vs-latency summary) is then as good as a clean exit.
    const reportDone = r.timedOut && printedReport(r.stdout);
    if (reportDone) notes.push('perf_analyzer hung after printing its report and was killed; the report is used');
    for (const n of notes) this.results.errors.push(`${id}: ${n}`);
    const res = r.code === 0 || reportDone ? parsePerfAnalyzer(r.stdout) : undefined;
    const point: Point = {
      phase: p.phase,
      model: p.model,
      variant: p.variant,
      modelName: p.modelName,
      server: managed.name,
      proto: p.proto,
      conc: p.conc,
      repeat: p.repeat,
      ok: !!res,
      stability,
      res,
      use: r.use,
      monoUs: [firstStartUs, r.monoUs[1]],
      command,
      log: rel(logFile),
      seconds: (Date.now() - t0) / 1000,
    };
    if (!res) {
      point.error = r.timedOut ? `timed out` : `exit ${r.code}: ${r.stdout.trim().split('\n').slice(-3).join(' | ')}`;
      this.results.errors.push(`${id}: ${point.error}`);
      log(`    FAILED ${id}: ${point.error}`);
    } else {
      const srv =
        res.serverRequestUs !== undefined ? `, server ${res.serverRequestUs} us (queue ${res.queueUs}, infer ${res.computeInferUs})` : '';
      const batch = res.inferenceCount && res.executionCount ? `, avg batch ${(res.inferenceCount / res.executionCount).toFixed(1)}` : '';
      log(
        `    ${p.modelName.padEnd(24)} ${managed.name.padEnd(9)} ${p.proto.padEnd(4)} c=${String(p.conc).padEnd(2)} ${res.throughput.toFixed(1).padStart(8)} infer/s, p50 ${(res.p50Us / 1000).toFixed(2)} ms${batch}${srv}; cores: main ${r.use.mainCores.toFixed(2)}, server ${r.use.serverCores.toFixed(2)}, perf_analyzer ${r.use.loadGenCores.toFixed(2)}, other ${r.use.otherCores.toFixed(2)}`,
      );
    }
    this.results.points.push(point);
    return point;
  }

  servalArgs(repo: string, extraNode: string[] = []): string[] {
    return [...extraNode, CLI, '--model-repository', repo, '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'];
  }

  startServal(name: string, repo: string, extraNode: string[] = []): Promise<Managed> {
    const args = this.servalArgs(repo, extraNode);
    this.cmd([process.execPath, ...args]);
    return new Managed(
      'serval',
      `Serval (${name})`,
      args,
      { http: true, grpc: true },
      path.join(this.work, 'logs', `server_${name}`),
    ).start();
  }

  // -------------------------------------------------------------- (b) (c) (d)
  variants(model: string): { key: Point['variant']; name: string; dynamic: boolean; instances: number; intra?: number; spin?: boolean }[] {
    const v: { key: Point['variant']; name: string; dynamic: boolean; instances: number; intra?: number; spin?: boolean }[] = [
      { key: 'b', name: `${model}__nodb`, dynamic: false, instances: 1 },
      { key: 'c', name: `${model}__db`, dynamic: true, instances: 1 },
      { key: 'd', name: `${model}__db_x2`, dynamic: true, instances: 2 },
    ];
    if (this.plan.intraOne.includes(model)) {
      v.push({ key: 'c1', name: `${model}__db_t1`, dynamic: true, instances: 1, intra: 1 });
      v.push({ key: 'cs', name: `${model}__db_spin`, dynamic: true, instances: 1, spin: true });
    }
    return v;
  }

  makeVariantRepo(model: string, srcDir: string): string {
    const repo = path.join(this.work, 'repos', model);
    mkdirSync(repo, { recursive: true });
    const config = readFileSync(path.join(srcDir, 'config.pbtxt'), 'utf8');
    for (const v of this.variants(model)) {
      const dst = path.join(repo, v.name);
      cpSync(srcDir, dst, { recursive: true });
      writeFileSync(path.join(dst, 'config.pbtxt'), variantConfig(config, v.name, v.dynamic, v.instances, v.intra, v.spin));
    }
    return repo;
  }

  async modelPhase(model: string, srcDir: string): Promise<void> {
    const config = readFileSync(path.join(srcDir, 'config.pbtxt'), 'utf8');
    const maxBatch = maxBatchOf(config);
    const onnx = path.join(srcDir, '1', 'model.onnx');
    log(`== ${model} (max_batch_size ${maxBatch})`);
    const ceiling = await this.ceiling(model, onnx, maxBatch);
    this.results.ceilings.push(ceiling);
    const repo = this.makeVariantRepo(model, srcDir);
    const server = await this.startServal(model, repo);
    try {
      for (const conc of this.plan.concurrencies) {
        for (const proto of this.plan.protocols) {
          for (const v of this.variants(model)) {
            if ((v.key === 'c1' || v.key === 'cs') && conc !== Math.max(...this.plan.concurrencies)) continue;
            await this.pa(server, {
              phase: 'model',
              model,
              variant: v.key,
              modelName: v.name,
              proto,
              conc,
              repeat: 0,
              windowMs: this.plan.windowMs[model]!,
            });
          }
        }
      }
    } finally {
      await server.stop();
    }
    if (this.plan.ceilingAfter) await this.ceilingAfter(ceiling, onnx);
  }

  // -------------------------------------------------------------- (e) (f)
  simpleRepo(): string {
    const repo = path.join(this.work, 'repos', 'simple');
    mkdirSync(repo, { recursive: true });
    cpSync(path.join(ROOT, 'model_repository', 'simple'), path.join(repo, 'simple'), { recursive: true });
    return repo;
  }

  async simplePhase(): Promise<void> {
    log('== simple: Serval vs bare protocol servers');
    const repo = this.simpleRepo();
    const serval = await this.startServal('simple', repo);
    const bareArgs = (f: string) => [f, '--port', '0'];
    this.cmd([process.execPath, ...bareArgs(BARE_HTTP)]);
    this.cmd([process.execPath, ...bareArgs(BARE_GRPC)]);
    const bareHttp = await new Managed(
      'bare-http',
      'bare fastify server',
      bareArgs(BARE_HTTP),
      { http: true, grpc: false },
      path.join(this.work, 'logs', 'server_bare-http'),
    ).start();
    const bareGrpc = await new Managed(
      'bare-grpc',
      'bare grpc-js server',
      bareArgs(BARE_GRPC),
      { http: false, grpc: true },
      path.join(this.work, 'logs', 'server_bare-grpc'),
    ).start();
    const windowMs = this.plan.windowMs.simple!;
    const extra = ['--input-data', SIMPLE_INPUT];
    try {
      for (let rep = 0; rep < this.plan.simpleRepeats; rep++) {
        for (const proto of ['grpc', 'http'] as const) {
          const bare = proto === 'grpc' ? bareGrpc : bareHttp;
          await this.pa(serval, {
            phase: 'simple',
            model: 'simple',
            variant: 's',
            modelName: 'simple',
            proto,
            conc: this.plan.simpleConc,
            repeat: rep,
            windowMs,
            extra,
          });
          await this.pa(bare, {
            phase: 'simple',
            model: 'simple',
            variant: 'e',
            modelName: 'simple',
            proto,
            conc: this.plan.simpleConc,
            repeat: rep,
            windowMs,
            extra,
          });
        }
      }
      for (const proto of ['grpc', 'http'] as const) {
        const bare = proto === 'grpc' ? bareGrpc : bareHttp;
        await this.pa(serval, {
          phase: 'simple',
          model: 'simple',
          variant: 's',
          modelName: 'simple',
          proto,
          conc: 1,
          repeat: 0,
          windowMs,
          extra,
        });
        await this.pa(bare, {
          phase: 'simple',
          model: 'simple',
          variant: 'e',
          modelName: 'simple',
          proto,
          conc: 1,
          repeat: 0,
          windowMs,
          extra,
        });
      }
    } finally {
      await Promise.all([serval.stop(), bareHttp.stop(), bareGrpc.stop()]);
    }
  }

  // -------------------------------------------------------------- profiles
  async profilePhase(rankerDir: string | undefined): Promise<void> {
    log('== CPU profiles of the servers under load (node --cpu-prof; not used for any number above)');
    type Sc = {
      name: string;
      server: Point['server'];
      repo: string;
      model: string;
      modelName: string;
      proto: Protocol;
      conc: number;
      extra: string[];
    };
    const simple = this.simpleRepo();
    const input = ['--input-data', SIMPLE_INPUT];
    const scenarios: Sc[] = [
      {
        name: 'simple-grpc-c16',
        server: 'serval',
        repo: simple,
        model: 'simple',
        modelName: 'simple',
        proto: 'grpc',
        conc: 16,
        extra: input,
      },
      { name: 'bare-grpc-c16', server: 'bare-grpc', repo: '', model: 'simple', modelName: 'simple', proto: 'grpc', conc: 16, extra: input },
      {
        name: 'simple-http-c16',
        server: 'serval',
        repo: simple,
        model: 'simple',
        modelName: 'simple',
        proto: 'http',
        conc: 16,
        extra: input,
      },
      { name: 'bare-http-c16', server: 'bare-http', repo: '', model: 'simple', modelName: 'simple', proto: 'http', conc: 16, extra: input },
    ];
    if (rankerDir) {
      // Only the dynamically batched variant, so the profile has one model worker.
      const all = this.makeVariantRepo('ranker_mlp', rankerDir);
      const repo = path.join(this.work, 'repos', 'ranker_mlp_profile');
      cpSync(path.join(all, 'ranker_mlp__db'), path.join(repo, 'ranker_mlp__db'), { recursive: true });
      scenarios.push({
        name: 'ranker_mlp-db-grpc-c32',
        server: 'serval',
        repo,
        model: 'ranker_mlp',
        modelName: 'ranker_mlp__db',
        proto: 'grpc',
        conc: 32,
        extra: [],
      });
    }
    for (const sc of scenarios) {
      const dir = path.join(this.work, 'profiles', sc.name);
      mkdirSync(dir, { recursive: true });
      const run: ProfileRun = { scenario: sc.name, server: sc.server, proto: sc.proto, workers: [] };
      this.results.profiles.push(run);
      try {
        const prof = ['--cpu-prof', '--cpu-prof-dir', dir];
        let server: Managed;
        if (sc.server === 'serval') server = await this.startServal(`profile-${sc.name}`, sc.repo, prof);
        else {
          const file = sc.server === 'bare-grpc' ? BARE_GRPC : BARE_HTTP;
          const args = [...prof, file, '--port', '0'];
          this.cmd([process.execPath, ...args]);
          server = await new Managed(
            sc.server,
            sc.server,
            args,
            { http: sc.server === 'bare-http', grpc: sc.server === 'bare-grpc' },
            path.join(this.work, 'logs', `server_profile-${sc.name}`),
          ).start();
        }
        try {
          run.point = await this.pa(server, {
            phase: 'profile',
            model: sc.model,
            variant: sc.server !== 'serval' ? 'e' : sc.model === 'simple' ? 's' : 'c',
            modelName: sc.modelName,
            proto: sc.proto,
            conc: sc.conc,
            repeat: 0,
            windowMs: this.plan.windowMs[sc.model]!,
            extra: sc.extra,
          });
          if (server.server.http) run.requests = await successCount(server.server.http, sc.modelName);
        } finally {
          await server.stop();
        }
        if (server.restarts) throw new Error('the server was restarted during the profiled run; its profile is incomplete');
        if (sc.server === 'bare-grpc') {
          const m = readFileSync(server.server.log, 'utf8').match(/bare-grpc: (\d+) calls answered/);
          if (m) run.requests = Number(m[1]);
        }
        const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
        // CPU.<date>.<time>.<pid>.<threadId>.<seq>.cpuprofile; the main thread has threadId 0.
        const main = files.find((f) => f.split('.')[4] === '0');
        if (!main) throw new Error(`no main-thread profile in ${rel(dir)} (files: ${files.join(', ') || 'none'})`);
        // Only the samples taken while perf_analyzer ran (not start-up and shutdown).
        run.main = summarizeProfile(path.join(dir, main), 15, run.point?.monoUs);
        run.main.file = rel(run.main.file);
        log(`    ${run.requests ?? '?'} requests answered while profiled`);
        log(formatSummary(run.main));
        for (const f of files.filter((x) => x !== main)) {
          const s = summarizeProfile(path.join(dir, f), 5, run.point?.monoUs);
          run.workers.push({ file: rel(s.file), busyFraction: s.busyFraction, totalMs: s.totalMs });
        }
      } catch (e) {
        run.error = (e as Error).message;
        this.results.errors.push(`profile ${sc.name}: ${run.error}`);
        log(`    profile ${sc.name} failed: ${run.error}`);
      }
    }
  }

  // -------------------------------------------------------------- main
  async run(): Promise<void> {
    const want = (m: string) => !this.args.models || this.args.models.includes(m);
    const modelsDir = path.join(this.work, 'models');
    let resnetDir: string | undefined;
    if (want('resnet50')) {
      const c = [process.execPath, GEN_RESNET, '--out', modelsDir];
      log(`generating resnet50: ${this.cmd(c)}`);
      execFileSync(c[0]!, c.slice(1), { stdio: 'inherit', cwd: ROOT });
      resnetDir = path.join(modelsDir, 'resnet50');
    }
    const rankerDir = path.join(ROOT, 'model_repository', 'ranker_mlp');
    const phases: [string, () => Promise<void>][] = [
      ['ranker_mlp', () => this.modelPhase('ranker_mlp', rankerDir)],
      ['image_classifier', () => this.modelPhase('image_classifier', path.join(ROOT, 'model_repository', 'image_classifier'))],
      ['resnet50', () => this.modelPhase('resnet50', resnetDir!)],
      ['simple', () => this.simplePhase()],
    ];
    for (const [name, fn] of phases) {
      if (!want(name)) continue;
      try {
        await fn();
      } catch (e) {
        this.results.errors.push(`${name}: ${(e as Error).message}`);
        log(`${name} failed: ${(e as Error).stack}`);
      }
    }
    const profile = this.args.profile ?? !this.args.quick;
    if (profile) await this.profilePhase(want('ranker_mlp') ? rankerDir : undefined);
    if (resnetDir) rmSync(modelsDir, { recursive: true, force: true }); // 100 MB; regenerated in seconds

    this.results.finishedAt = new Date().toISOString();
    this.results.durationS = (Date.now() - this.t0) / 1000;
    this.results.targets = computeTargets(this.results);
    writeFileSync(path.join(this.work, 'results.json'), JSON.stringify(this.results, null, 2));
    const md = renderMarkdown(this.results);
    writeFileSync(path.join(this.work, 'benchmarks.md'), md);
    writeDoc(this.args.out, md);
    console.log(`\n${renderConsole(this.results)}`);
    log(
      `wrote ${rel(this.args.out)} and ${rel(this.work)}/ (results.json, logs/, csv/) in ${(this.results.durationS / 60).toFixed(1)} min`,
    );
  }
}

runSection('bench', () => new Bench(parseArgs(process.argv.slice(2))).run());
