/**
 * Many models per server (issue 16, item 3; docs/benchmarks.md block `density`): memory, threads
 * and load time of Serval holding 1, 20, 100 and 500 small models (copies of `simple`, each its own
 * model) and one large model, against the same server holding none; then every model served once
 * over HTTP and once over gRPC, and perf_analyzer on a few of them at once, counting errors. Both
 * ways the ONNX backend can run instances are measured in the same run: `shared` (the default:
 * small CPU instances share a few worker threads) and `dedicated`
 * (`--backend-config=onnxruntime,shared-workers=0`: every instance a worker thread of its own).
 *
 *   node dist/tools/bench/density.js [--quick] [--out FILE]
 *
 * Raw output (server logs, perf_analyzer output, results.json) goes to tmp/bench/density-<time>/.
 * Normally started by tools/bench/run.sh.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GrpcClient } from '../../src/client/grpc.js';
import { HttpClient } from '../../src/client/http.js';
import type { InferenceClient } from '../../src/client/types.js';
import { buildSimple } from '../onnx/models.js';
import {
  type DensityPoint,
  dedicatedFeasible,
  evaluateGoals,
  GOALS,
  MiB,
  parseStatus,
  perInstance,
  renderTable,
  sumMetric,
} from './density/logic.js';
import { writeSection } from './doc_section.js';
import { parsePerfAnalyzer, runMeasured, type Server, sleep, startServer, stopServer } from './harness.js';
import { PERF_ANALYZER, ROOT, SERVAL_CLI } from './paths.js';
import { pkgVersion, runSection } from './section.js';

const CLI = SERVAL_CLI;
const GEN_RESNET = path.join(ROOT, 'dist', 'tools', 'gen_resnet50.js');
const PA = PERF_ANALYZER;
const DEDICATED = ['--backend-config=onnxruntime,shared-workers=0'];

interface Plan {
  quick: boolean;
  counts: number[];
  /** Counts the dedicated mode is measured at (the largest only when it fits, see dedicatedFeasible). */
  dedicatedCounts: number[];
  /** perf_analyzer runs at once, one model each, and their window. */
  paModels: number;
  paWindowMs: number;
  /** The section's time for the dedicated mode's largest point at most. */
  dedicatedMaxS: number;
}

function plan(quick: boolean): Plan {
  return quick
    ? { quick, counts: [1, 20, 100, 500], dedicatedCounts: [1, 20], paModels: 2, paWindowMs: 1000, dedicatedMaxS: 20 }
    : { quick, counts: [1, 20, 100, 500], dedicatedCounts: [1, 20, 100, 500], paModels: 3, paWindowMs: 2000, dedicatedMaxS: 150 };
}

const log = (s: string): void => console.log(`[density] ${s}`);

function status(pid: number): { rss: number; threads: number } {
  return parseStatus(readFileSync(`/proc/${pid}/status`, 'utf8'));
}

/** RSS and threads once start-up work has settled: the last of a few samples 250 ms apart. */
async function settled(pid: number): Promise<{ rss: number; threads: number }> {
  let s = status(pid);
  for (let i = 0; i < 4; i++) {
    await sleep(250);
    s = status(pid);
  }
  return s;
}

function memAvailable(): number {
  const m = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'));
  return m ? Number(m[1]) * 1024 : os.freemem();
}

function dirBytes(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    total += e.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return total;
}

const modelName = (i: number): string => `m${String(i).padStart(3, '0')}`;

class Density {
  readonly points: DensityPoint[] = [];
  readonly notes: string[] = [];
  readonly commands = new Set<string>();
  large?: { name: string; weightBytes: number; readyS: number; rss: number; threads: number; baseRss: number; baseThreads: number };
  paSummary: string[] = [];
  private readonly simple = buildSimple();

  constructor(
    readonly plan: Plan,
    readonly work: string,
  ) {}

  /** A repository of `n` copies of `simple`, each a model of its own (m000, m001, …). */
  smallRepo(n: number): string {
    const dir = path.join(this.work, 'repos', `small_${n}`);
    if (existsSync(dir)) return dir;
    for (let i = 0; i < n; i++) {
      const name = modelName(i);
      mkdirSync(path.join(dir, name, '1'), { recursive: true });
      writeFileSync(path.join(dir, name, 'config.pbtxt'), this.simple.config.replace('name: "simple"', `name: "${name}"`));
      writeFileSync(path.join(dir, name, '1', 'model.onnx'), this.simple.onnx);
    }
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  async start(label: string, repo: string, extra: string[]): Promise<{ server: Server; readyS: number }> {
    const args = [CLI, '--model-repository', repo, '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0', ...extra];
    this.commands.add(
      `node ${path.relative(ROOT, CLI)} --model-repository <repo> --http-port 0 --grpc-port 0 --metrics-port 0 ${extra.join(' ')}`.trim(),
    );
    const t0 = process.hrtime.bigint();
    const server = await startServer('serval', args, path.join(this.work, `server_${label}.log`), { http: true, grpc: true }, ROOT, 300);
    const readyS = Number(process.hrtime.bigint() - t0) / 1e9;
    return { server, readyS };
  }

  async point(mode: DensityPoint['mode'], n: number, serve: boolean): Promise<DensityPoint> {
    const repo = this.smallRepo(n);
    const { server, readyS } = await this.start(`${mode}_${n}`, repo, mode === 'dedicated' ? DEDICATED : []);
    try {
      const s = await settled(server.pid);
      const p: DensityPoint = { mode, models: n, weightBytes: n * this.simple.onnx.byteLength, readyS, rss: s.rss, threads: s.threads };
      log(`${mode} ${n} models: ready in ${readyS.toFixed(1)} s, RSS ${(s.rss / MiB).toFixed(0)} MiB, ${s.threads} threads`);
      if (serve && n > 0) {
        const served = await this.serve(server, n, `${mode}_${n}`);
        p.requests = served.requests;
        p.errors = served.errors;
        p.rssServed = status(server.pid).rss;
        log(`  served: ${served.errors} errors in ${served.requests} requests; RSS ${(p.rssServed / MiB).toFixed(0)} MiB`);
      }
      this.points.push(p);
      return p;
    } finally {
      await stopServer(server);
    }
  }

  /**
   * One request to every model over HTTP and over gRPC (16 in flight; failed or wrong answers are
   * errors), then perf_analyzer on a few at once (its requests and errors: the server's
   * nv_inference_request_success / _failure over every model during those runs).
   */
  async serve(server: Server, n: number, label: string): Promise<{ requests: number; errors: number }> {
    let requests = 0;
    let errors = 0;
    const clients: InferenceClient[] = [new HttpClient(server.http!), new GrpcClient(server.grpc!)];
    const a = Int32Array.from({ length: 16 }, (_, i) => i);
    for (const client of clients) {
      let next = 0;
      const lane = async (): Promise<void> => {
        for (let i = next++; i < n; i = next++) {
          const b = Int32Array.from({ length: 16 }, (_, j) => i + j);
          requests++;
          try {
            const r = await client.infer(modelName(i), [
              { name: 'INPUT0', shape: [1, 16], data: a },
              { name: 'INPUT1', shape: [1, 16], data: b },
            ]);
            const sum = r.output('OUTPUT0', 'INT32').data;
            if (!sum.every((v, j) => v === a[j]! + b[j]!)) {
              errors++;
              if (errors <= 5) this.notes.push(`${label}: ${modelName(i)} answered a wrong OUTPUT0`);
            }
          } catch (e) {
            errors++;
            if (errors <= 5) this.notes.push(`${label}: ${(e as Error).message}`);
          }
        }
      };
      await Promise.all(Array.from({ length: 16 }, lane));
      client.close();
    }
    if (!existsSync(PA)) {
      this.notes.push(`perf_analyzer not found (${PA}): the ${label} run was served over HTTP and gRPC only`);
      return { requests, errors };
    }
    const before = await requestCounts(server);
    // A few models at once, spread over the repository (so over the shared workers), concurrency 4 each.
    const k = Math.min(this.plan.paModels, n);
    const picks = Array.from({ length: k }, (_, j) => modelName(Math.floor((j * n) / k)));
    const runs = await Promise.all(
      picks.map((m) => {
        const cmd = [
          PA,
          '-m',
          m,
          '-u',
          server.grpc!,
          '-i',
          'grpc',
          '--concurrency-range',
          '4',
          '-p',
          String(this.plan.paWindowMs),
          '-s',
          '1000',
          '-r',
          '3',
        ];
        this.commands.add(
          `perf_analyzer -m <model> -u <grpc> -i grpc --concurrency-range 4 -p ${this.plan.paWindowMs} -s 1000 -r 3   (${this.plan.paModels} at once)`,
        );
        return runMeasured(cmd, path.join(this.work, `perf_analyzer_${label}.log`), 60, server.pid).then((r) => ({ m, r }));
      }),
    );
    const rates: string[] = [];
    for (const { m, r } of runs) {
      const res = r.code === 0 ? parsePerfAnalyzer(r.stdout) : undefined;
      // A run without a report is not a serving error by itself (perf_analyzer gives none when its
      // windows are not "stable" on a busy machine); failed requests show in the server's counts.
      if (!res) {
        const why = /Failed to obtain stable measurement/.test(r.stdout)
          ? 'no stable measurement'
          : r.timedOut
            ? 'timed out'
            : `exit ${r.code}`;
        this.notes.push(`${label}: perf_analyzer on ${m} gave no report (${why})`);
        continue;
      }
      rates.push(`${m} ${res.throughput.toFixed(0)}/s`);
    }
    this.paSummary.push(`${label}: ${rates.join(', ') || 'no report'}`);
    const after = await requestCounts(server);
    const failed = after.failure - before.failure;
    return { requests: requests + after.success - before.success + failed, errors: errors + failed };
  }

  /** One large model alone vs the 0-model server: RSS beyond its weights. */
  async largeModel(base: DensityPoint): Promise<void> {
    let modelDir: string;
    let name: string;
    if (this.plan.quick) {
      name = 'image_classifier';
      modelDir = path.join(ROOT, 'model_repository', name);
    } else {
      name = 'resnet50';
      const out = path.join(this.work, 'large');
      const c = [process.execPath, GEN_RESNET, '--out', out];
      log(`generating resnet50: node ${path.relative(ROOT, GEN_RESNET)} --out <dir>`);
      execFileSync(c[0]!, c.slice(1), { stdio: 'inherit', cwd: ROOT });
      modelDir = path.join(out, name);
    }
    const repo = path.join(this.work, 'repos', 'large');
    mkdirSync(repo, { recursive: true });
    cpSync(modelDir, path.join(repo, name), { recursive: true });
    const weightBytes = dirBytes(path.join(repo, name, '1'));
    const { server, readyS } = await this.start(`large_${name}`, repo, []);
    try {
      const s = await settled(server.pid);
      this.large = { name, weightBytes, readyS, rss: s.rss, threads: s.threads, baseRss: base.rss, baseThreads: base.threads };
      log(`${name}: ready in ${readyS.toFixed(1)} s, RSS ${(s.rss / MiB).toFixed(0)} MiB (weights ${(weightBytes / MiB).toFixed(0)} MiB)`);
    } finally {
      await stopServer(server);
    }
  }

  async run(): Promise<void> {
    const bases = new Map<DensityPoint['mode'], DensityPoint>();
    for (const mode of ['shared', 'dedicated'] as const) bases.set(mode, await this.point(mode, 0, false));
    for (const n of this.plan.counts) await this.point('shared', n, true);
    for (const n of this.plan.dedicatedCounts) {
      const measured = this.points.filter((p) => p.mode === 'dedicated' && p.models > 0).sort((a, b) => b.models - a.models)[0];
      if (measured && n >= 100) {
        const f = dedicatedFeasible(measured, bases.get('dedicated')!, n, memAvailable(), this.plan.dedicatedMaxS);
        if (!f.ok) {
          this.notes.push(`dedicated, ${n} models: not run (${f.why})`);
          log(`dedicated ${n}: skipped (${f.why})`);
          continue;
        }
      }
      await this.point('dedicated', n, n === Math.max(...this.plan.dedicatedCounts) || n === GOALS.models);
    }
    await this.largeModel(bases.get('shared')!);
  }
}

/** Sums of nv_inference_request_success and _failure over every model, from the server's /metrics. */
async function requestCounts(server: Server): Promise<{ success: number; failure: number }> {
  const port = /Started Metrics Service at [^\s]*:(\d+)/.exec(readFileSync(server.log, 'utf8'))?.[1];
  if (!port) throw new Error(`no metrics port in ${server.log}`);
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return { success: sumMetric(text, 'nv_inference_request_success'), failure: sumMetric(text, 'nv_inference_request_failure') };
}

function machine(): string {
  const cpu = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown CPU';
  return `${os.cpus().length} × ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, Linux ${os.release()}, Node ${process.version}`;
}

function report(d: Density, startedAt: Date, seconds: number): string {
  const goals = evaluateGoals(d.points);
  const lines: string[] = [];
  lines.push(`### Many models per server${d.plan.quick ? ' (quick run: a smoke test, not for comparison)' : ''}`);
  lines.push('');
  lines.push(
    `Generated by \`node dist/tools/bench/density.js${d.plan.quick ? ' --quick' : ''}\` on ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC in ${seconds.toFixed(0)} s; ${machine()}; onnxruntime-node ${pkgVersion('onnxruntime-node')}; load average at start ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}.`,
  );
  lines.push('');
  lines.push(
    `Each point is its own server process holding N copies of \`simple\` (${d.points.find((p) => p.models > 0) ? `${(d.points.find((p) => p.models > 0)!.weightBytes / d.points.find((p) => p.models > 0)!.models).toFixed(0)} bytes of ONNX` : 'a tiny ONNX file'}, one CPU instance each), started with the repository and measured once /v2/health/ready answers: **server ready** is from spawning the process to that answer (it includes the 0-model server's own start, shown in the 0 rows); **RSS** and **threads** come from /proc/<pid>/status (the whole process: every worker thread shares it) after 1 s of settling; **per instance beyond weights** = (RSS − RSS of the same server with 0 models − the models' files) ÷ instances. **dedicated** is every instance on a worker thread of its own (\`--backend-config=onnxruntime,shared-workers=0\`, how Serval ran every instance before); **shared** is the default (small CPU instances share \`shared-workers\` = one per core worker threads; docs/architecture.md). Serving: every model once over HTTP (binary tensors) and once over gRPC with Serval's Node client (16 requests in flight, each output checked), then perf_analyzer on ${d.plan.paModels} models at once (gRPC, concurrency 4 each); "errors" counts failed or wrong requests and failed perf_analyzer runs, out of every request sent.`,
  );
  lines.push('');
  lines.push(renderTable(d.points));
  lines.push('');
  if (d.large) {
    const L = d.large;
    lines.push(
      `One large model: \`${L.name}\` alone (${(L.weightBytes / MiB).toFixed(1)} MiB of files, a worker of its own in either mode): server ready in ${L.readyS.toFixed(1)} s, RSS ${(L.rss / MiB).toFixed(0)} MiB, **${((L.rss - L.baseRss - L.weightBytes) / MiB).toFixed(0)} MiB beyond its weights** over the 0-model server (${(L.baseRss / MiB).toFixed(0)} MiB), ${L.threads - L.baseThreads} more threads.`,
    );
    lines.push('');
  }
  lines.push('| goal (issue 16, item 3) | measured | |');
  lines.push('|---|---|---|');
  for (const g of goals) lines.push(`| ${g.goal} | ${g.value} | **${g.met ? 'met' : 'missed'}** |`);
  lines.push('');
  const ded = d.points.find(
    (p) => p.mode === 'dedicated' && p.models === Math.max(...d.points.filter((x) => x.mode === 'dedicated').map((x) => x.models)),
  );
  const sh = d.points.find((p) => p.mode === 'shared' && p.models === ded?.models);
  const dBase = d.points.find((p) => p.mode === 'dedicated' && p.models === 0);
  const sBase = d.points.find((p) => p.mode === 'shared' && p.models === 0);
  if (ded && sh && dBase && sBase && ded.models > 0) {
    lines.push(
      `At ${ded.models} models side by side: per instance ${(perInstance(ded, dBase) / 1e6).toFixed(2)} MB dedicated vs ${(perInstance(sh, sBase) / 1e6).toFixed(2)} MB shared; ready in ${ded.readyS.toFixed(1)} s vs ${sh.readyS.toFixed(1)} s; ${ded.threads} vs ${sh.threads} threads.`,
    );
    lines.push('');
  }
  if (d.paSummary.length)
    lines.push(`perf_analyzer throughput (informational, runs at once on a shared machine): ${d.paSummary.join('; ')}.`, '');
  if (d.notes.length) {
    lines.push('Notes:');
    for (const n of d.notes) lines.push(`- ${n}`);
    lines.push('');
  }
  lines.push('Commands:');
  lines.push('');
  lines.push('```');
  for (const c of d.commands) lines.push(c);
  lines.push('```');
  return lines.join('\n');
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  let quick = false;
  let out = path.join(ROOT, 'docs', 'benchmarks.md');
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') quick = true;
    else if (a === '--out') out = path.resolve(argv[++i] ?? '');
    else if (a.startsWith('--out=')) out = path.resolve(a.slice(6));
    else throw new Error(`unknown argument ${a} (usage: density.js [--quick] [--out FILE])`);
  }
  const stamp = new Date().toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', 'T');
  const work = path.join(ROOT, 'tmp', 'bench', `density-${stamp}`);
  mkdirSync(work, { recursive: true });
  const startedAt = new Date();
  const t0 = Date.now();
  const d = new Density(plan(quick), work);
  await d.run();
  const seconds = (Date.now() - t0) / 1000;
  writeFileSync(path.join(work, 'results.json'), JSON.stringify({ points: d.points, large: d.large, notes: d.notes }, null, 2));
  const md = report(d, startedAt, seconds);
  writeFileSync(path.join(work, 'report.md'), md);
  writeSection(out, 'density', md);
  log(`done in ${seconds.toFixed(0)} s; wrote the density block of ${path.relative(ROOT, out) || out}`);
}

runSection('density', main);
