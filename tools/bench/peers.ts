/**
 * The peer comparison of issue 16: Serval vs MLServer 1.7.1 (serving the same model.onnx files
 * through a small onnxruntime MLModel runtime, tools/bench/peers/onnx_runtime.py) vs the bare
 * protocol servers (tools/bench/bare_http.ts, bare_grpc.ts; `simple` only), under the official
 * perf_analyzer, interleaved in rounds. Records throughput, p50/p99, server CPU and each
 * server's memory (whole process tree), evaluates issue 16's goals (tools/bench/peers/goals.ts)
 * and writes the `peers` block of docs/benchmarks.md. Raw output: tmp/bench/peers-<time>/.
 *
 *   node dist/tools/bench/peers.js [--quick] [--out FILE]
 *
 * Installs MLServer into .venv-mlserver itself (tools/bench/peers/setup-mlserver.sh); needs
 * perf_analyzer (bash tools/ci/setup-python.sh) and a built tree.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseModelConfigText } from '../../src/config/pbtxt.js';
import { writeSection } from './doc_section.js';
import { alive, killAll, type PaResult, parsePerfAnalyzer, runMeasured, type Server, sleep, startServer, stopServer } from './harness.js';
import { PERF_ANALYZER, ROOT, rel, SERVAL_CLI } from './paths.js';
import {
  combineRounds,
  down,
  evaluateGoals,
  fmtRate,
  type Goal,
  type Memory,
  type Peer,
  type Sample,
  up,
  WORKLOADS,
  type Workload,
} from './peers/goals.js';
import { inputDataJson } from './peers/input_data.js';
import { mlserverModelSettings, mlserverServerSettings } from './peers/mlserver_settings.js';
import { treeCpu, treeMemory } from './peers/proctree.js';
import { tritonConfigAnswer } from './peers/triton_config.js';
import { ticksPerSecond } from './procstat.js';
import { paVersion, pkgVersion, runSection, type SectionArgs, sectionArgs } from './section.js';

const PA = PERF_ANALYZER;
const CLI = SERVAL_CLI;
const BARE_HTTP = path.join(ROOT, 'dist', 'tools', 'bench', 'bare_http.js');
const BARE_GRPC = path.join(ROOT, 'dist', 'tools', 'bench', 'bare_grpc.js');
const SIMPLE_INPUT = path.join(ROOT, 'tools', 'perf', 'simple_input.json');
const PEERS_SRC = path.join(ROOT, 'tools', 'bench', 'peers');
const ML_VENV = process.env.MLSERVER_VENV ?? path.join(ROOT, '.venv-mlserver');
const ML_PYTHON = path.join(ML_VENV, 'bin', 'python');
const MODELS = [...new Set(WORKLOADS.map((w) => w.model))];

/**
 * MLServer's max_batch_time for the models whose config.pbtxt has `dynamic_batching { }`.
 * Serval's batcher has no queue delay: it takes whatever is queued when an instance is free.
 * MLServer's adaptive batcher has no such mode (max_batch_time 0 turns batching off); it waits
 * up to max_batch_time for a full batch. 5 ms gave MLServer its best `ranker_mlp` throughput at
 * concurrency 32 in a sweep of 0 (off), 0.5, 1, 2, 5, 10, 20 and 50 ms on this machine (see
 * docs/benchmarks.md, "Serval vs MLServer (issue 16)").
 */
const ML_MAX_BATCH_TIME_S = 0.005;

interface Plan {
  rounds: number;
  /** Rounds always run; later ones only while the run stays within budgetS. */
  minRounds: number;
  budgetS: number;
  windowMs: Record<string, number>;
  stability: number;
  retryStability: number;
  trials: number;
  /** Last resort when the windows never stabilise: one measurement of this many requests (`--request-count`). */
  requestCount: Record<string, number>;
}

const FULL: Plan = {
  rounds: 3,
  minRounds: 2,
  budgetS: 480,
  windowMs: { simple: 1500, ranker_mlp: 1500, image_classifier: 3000 },
  stability: 25,
  retryStability: 100,
  trials: 6,
  requestCount: { simple: 6000, ranker_mlp: 4000, image_classifier: 300 },
};

const QUICK: Plan = {
  rounds: 1,
  minRounds: 1,
  budgetS: 90,
  windowMs: { simple: 700, ranker_mlp: 700, image_classifier: 1500 },
  stability: 50,
  retryStability: 100,
  trials: 4,
  requestCount: { simple: 3000, ranker_mlp: 2000, image_classifier: 120 },
};

/** Other processes using more cores than this during a point mark it as noisy (†). */
const NOISY_CORES = 0.25;

const log = (s: string) => console.log(`[peers ${new Date().toISOString().slice(11, 19)}] ${s}`);

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT }).trim();
  } catch {
    return 'unavailable';
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** perf_analyzer's report is complete once it has printed its closing summary. */
const printedReport = (stdout: string): boolean => /Inferences\/Second vs\. Client/.test(stdout);

// ---------------------------------------------------------------------------------- servers

/** A server the run can restart if it dies under it (other jobs on a shared machine have killed process groups before). */
class Managed {
  server!: Server;
  restarts = 0;
  constructor(
    readonly peer: Peer,
    readonly label: string,
    private readonly launch: (restart: number) => Promise<Server>,
  ) {}
  async start(): Promise<this> {
    this.server = await this.launch(this.restarts);
    log(
      `  ${this.label} pid ${this.server.pid}${this.server.grpc ? ` grpc ${this.server.grpc}` : ''}${this.server.http ? ` http ${this.server.http}` : ''}`,
    );
    return this;
  }
  async ensure(): Promise<string | undefined> {
    if (alive(this.server)) return undefined;
    const why = `${this.label} (pid ${this.server.pid}) had exited; restarted`;
    this.restarts++;
    await this.start();
    return why;
  }
}

const pythonServers = new Set<Server>();

/** Starts MLServer through mlserver_launch.py and waits until it and every model are ready. */
async function startMlserver(folder: string, configs: string, ports: { http: number; grpc: number }, logFile: string): Promise<Server> {
  const out = createWriteStream(logFile);
  const args = [path.join(PEERS_SRC, 'mlserver_launch.py'), folder, configs];
  const child = spawn(ML_PYTHON, args, {
    cwd: folder,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    // onnx_runtime.OnnxRuntimeModel is imported by name in the server and in its spawned workers;
    // no __pycache__ left in the source tree.
    env: { ...process.env, PYTHONPATH: PEERS_SRC, PYTHONDONTWRITEBYTECODE: '1' },
  });
  const server: Server = {
    name: 'mlserver',
    pid: child.pid!,
    child,
    log: logFile,
    command: `${rel(ML_PYTHON)} ${args.map(rel).join(' ')}`,
    http: `127.0.0.1:${ports.http}`,
    grpc: `127.0.0.1:${ports.grpc}`,
  };
  pythonServers.add(server);
  child.on('exit', () => pythonServers.delete(server));
  let text = '';
  const onData = (d: Buffer) => {
    out.write(d);
    text += d.toString();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const deadline = Date.now() + 180_000;
  while (Date.now() < deadline) {
    if (!alive(server)) throw new Error(`MLServer exited during start-up; see ${logFile}:\n${text.slice(-2000)}`);
    if (/gRPC server running/.test(text)) {
      try {
        const ready = await Promise.all(
          MODELS.map((m) => fetch(`http://${server.http}/v2/models/${m}/ready`).then((r) => r.status === 200)),
        );
        if (ready.every(Boolean)) return server;
      } catch {
        /* not listening yet */
      }
    }
    await sleep(250);
  }
  await stopServer(server);
  throw new Error(`MLServer not ready after 180 s; see ${logFile}`);
}

function killEverything(): void {
  killAll();
  for (const s of pythonServers) {
    try {
      process.kill(-s.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

// ---------------------------------------------------------------------------------- the run

interface PointRecord {
  round: number;
  workload: string;
  peer: Peer;
  ok: boolean;
  error?: string;
  res?: PaResult;
  stability: number;
  /** Cores used by the server's whole process tree, perf_analyzer, and other processes. */
  serverCores: number;
  loadGenCores: number;
  otherCores: number;
  peakRss: number;
  peakPss: number;
  notes: string[];
  command: string;
  log: string;
}

interface MemoryRecord {
  processes: number;
  idleRss: number;
  idlePss: number;
  peakRss: number;
  peakPss: number;
  endRss: number;
  endPss: number;
}

class PeersRun {
  readonly plan: Plan;
  readonly work: string;
  readonly points: PointRecord[] = [];
  readonly errors: string[] = [];
  readonly commands: string[] = [];
  readonly memory: Partial<Record<'serval' | 'mlserver', MemoryRecord>> = {};
  readonly startedAt = new Date();
  private readonly t0 = Date.now();
  servers = {} as Record<Peer | 'bareHttp' | 'bareGrpc', Managed | undefined>;
  roundsRun = 0;

  constructor(readonly args: SectionArgs) {
    this.plan = args.quick ? QUICK : FULL;
    const stamp = this.startedAt.toISOString().replace(/[:]/g, '').replace(/\..*$/, '');
    this.work = path.join(ROOT, 'tmp', 'bench', `peers-${stamp}${args.quick ? '-quick' : ''}`);
    for (const d of ['logs', 'csv', 'serval_repo', 'mlserver']) mkdirSync(path.join(this.work, d), { recursive: true });
  }

  private cmd(c: string[]): string {
    const s = c
      .map((x) => (x.startsWith(ROOT) ? rel(x) : x))
      .map((x) => (/[\s"']/.test(x) ? JSON.stringify(x) : x))
      .join(' ');
    this.commands.push(s);
    return s;
  }

  setupMlserver(): void {
    log(`MLServer venv: bash ${rel(path.join(PEERS_SRC, 'setup-mlserver.sh'))}`);
    const r = spawnSync('bash', [path.join(PEERS_SRC, 'setup-mlserver.sh')], {
      cwd: ROOT,
      stdio: 'inherit',
      env: { ...process.env, MLSERVER_VENV: ML_VENV },
    });
    if (r.status !== 0) throw new Error(`setup-mlserver.sh failed (exit ${r.status})`);
  }

  /** Serval's repository (the compared models only) and MLServer's folder, from the same model folders. */
  /** Models whose config.pbtxt asks for dynamic batching (MLServer gets adaptive batching for them). */
  readonly batched: { model: string; maxBatch: number }[] = [];
  /** perf_analyzer --input-data per model. */
  readonly inputData: Record<string, string> = { simple: SIMPLE_INPUT };

  prepare(): { servalRepo: string; mlFolder: string; configs: string } {
    const servalRepo = path.join(this.work, 'serval_repo');
    const mlFolder = path.join(this.work, 'mlserver');
    const answers: Record<string, unknown> = {};
    for (const m of MODELS) {
      const src = path.join(ROOT, 'model_repository', m);
      cpSync(src, path.join(servalRepo, m), { recursive: true });
      const text = readFileSync(path.join(src, 'config.pbtxt'), 'utf8');
      const config = parseModelConfigText(text, `${m}/config.pbtxt`);
      if (config.dynamic_batching) this.batched.push({ model: m, maxBatch: Number(config.max_batch_size ?? 0) });
      answers[m] = tritonConfigAnswer(text, `${m}/config.pbtxt`);
      mkdirSync(path.join(mlFolder, m), { recursive: true });
      const settings = mlserverModelSettings(config, {
        onnxPath: path.join(servalRepo, m, '1', 'model.onnx'),
        intraOpThreads: os.availableParallelism(),
        maxBatchTimeS: ML_MAX_BATCH_TIME_S,
      });
      writeFileSync(path.join(mlFolder, m, 'model-settings.json'), `${JSON.stringify(settings, null, 2)}\n`);
      if (!this.inputData[m]) {
        this.inputData[m] = path.join(this.work, `input_${m}.json`);
        writeFileSync(this.inputData[m], JSON.stringify(inputDataJson(config)));
      }
    }
    const configs = path.join(this.work, 'triton_model_configs.json');
    writeFileSync(configs, JSON.stringify(answers));
    return { servalRepo, mlFolder, configs };
  }

  async startAll(servalRepo: string, mlFolder: string, configs: string): Promise<void> {
    const logs = path.join(this.work, 'logs');
    const servalArgs = [CLI, '--model-repository', servalRepo, '--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'];
    this.cmd([process.execPath, ...servalArgs]);
    this.servers.serval = await new Managed('serval', 'Serval', (n) =>
      startServer('serval', servalArgs, path.join(logs, `server_serval${n ? `.restart${n}` : ''}.log`), { http: true, grpc: true }, ROOT),
    ).start();

    const ports = { http: await freePort(), grpc: await freePort(), metrics: await freePort() };
    writeFileSync(path.join(mlFolder, 'settings.json'), `${JSON.stringify(mlserverServerSettings(ports), null, 2)}\n`);
    this.cmd([ML_PYTHON, path.join(PEERS_SRC, 'mlserver_launch.py'), mlFolder, configs]);
    this.servers.mlserver = await new Managed('mlserver', 'MLServer', (n) =>
      startMlserver(mlFolder, configs, ports, path.join(logs, `server_mlserver${n ? `.restart${n}` : ''}.log`)),
    ).start();

    for (const [key, file, want] of [
      ['bareHttp', BARE_HTTP, { http: true, grpc: false }],
      ['bareGrpc', BARE_GRPC, { http: false, grpc: true }],
    ] as const) {
      this.cmd([process.execPath, file, '--port', '0']);
      this.servers[key] = await new Managed('bare', key === 'bareHttp' ? 'bare fastify server' : 'bare grpc-js server', (n) =>
        startServer(key, [file, '--port', '0'], path.join(logs, `server_${key}${n ? `.restart${n}` : ''}.log`), want, ROOT),
      ).start();
    }
  }

  /** Memory of Serval and MLServer with every model loaded and no traffic. */
  async idleMemory(): Promise<void> {
    await sleep(2000);
    for (const peer of ['serval', 'mlserver'] as const) {
      const m = treeMemory(this.servers[peer]!.server.pid);
      this.memory[peer] = { processes: m.processes, idleRss: m.rss, idlePss: m.pss, peakRss: m.rss, peakPss: m.pss, endRss: 0, endPss: 0 };
      log(`  ${peer} idle: ${m.processes} process(es), RSS ${(m.rss / 2 ** 20).toFixed(0)} MiB, PSS ${(m.pss / 2 ** 20).toFixed(0)} MiB`);
    }
  }

  async endMemory(): Promise<void> {
    await sleep(2000);
    for (const peer of ['serval', 'mlserver'] as const) {
      const rec = this.memory[peer];
      const s = this.servers[peer];
      if (!rec || !s || !alive(s.server)) continue;
      const m = treeMemory(s.server.pid);
      rec.endRss = m.rss;
      rec.endPss = m.pss;
    }
  }

  managedFor(w: Workload, peer: Peer): Managed {
    if (peer !== 'bare') return this.servers[peer]!;
    return (w.proto === 'grpc' ? this.servers.bareGrpc : this.servers.bareHttp)!;
  }

  async measure(w: Workload, peer: Peer, round: number): Promise<PointRecord> {
    const managed = this.managedFor(w, peer);
    const notes: string[] = [];
    const died = await managed.ensure();
    if (died) notes.push(died);
    const id = `${w.id}_${peer}_r${round}`;
    const logFile = path.join(this.work, 'logs', `pa_${id}.log`);
    const csv = path.join(this.work, 'csv', `pa_${id}.csv`);
    const windowMs = this.plan.windowMs[w.model]!;
    const extra = ['--input-data', this.inputData[w.model]!];
    // MLServer has no binary tensor extension; both servers get JSON tensors over HTTP.
    if (w.proto === 'http') extra.push('--input-tensor-format', 'json', '--output-tensor-format', 'json');
    let peakRss = 0;
    let peakPss = 0;
    /** `count` > 0: one fixed-size measurement instead of stabilised windows. */
    const attempt = async (stability: number, trials: number, win: number, count = 0) => {
      const s = managed.server;
      const url = w.proto === 'grpc' ? s.grpc! : s.http!;
      const c = [PA, '-m', w.model, '-u', url, '-i', w.proto, '-b', '1', '--concurrency-range', `${w.conc}:${w.conc}`];
      if (count > 0) c.push('--request-count', String(count));
      else c.push('-p', String(win), '-s', String(stability), '-r', String(trials));
      c.push('-f', csv, ...extra);
      const command = this.cmd(c);
      const cpu0 = treeCpu(s.pid);
      const t0 = performance.now();
      const sample = () => {
        const m = treeMemory(s.pid);
        peakRss = Math.max(peakRss, m.rss);
        peakPss = Math.max(peakPss, m.pss);
      };
      const timer = setInterval(sample, 250);
      const timeout = Math.ceil((win / 1000) * (trials + 3) * 2 + 30);
      let r: Awaited<ReturnType<typeof runMeasured>>;
      try {
        r = await runMeasured(c, logFile, timeout, s.pid);
      } finally {
        clearInterval(timer);
      }
      sample();
      const wallS = (performance.now() - t0) / 1000;
      const serverCores = (treeCpu(s.pid) - cpu0) / ticksPerSecond() / wallS;
      return { r, command, serverCores };
    };
    const unstable = (x: typeof a) => x.r.code !== 0 && /Failed to obtain stable measurement/.test(x.r.stdout);
    let stability = this.plan.stability;
    let a = await attempt(stability, this.plan.trials, windowMs);
    // Past the time budget an unstable point goes straight to the fixed-size measurement.
    const late = (Date.now() - this.t0) / 1000 > this.plan.budgetS;
    if (unstable(a) && !late) {
      stability = this.plan.retryStability;
      notes.push(`unstable at -s ${this.plan.stability}; re-run with -s ${stability} -r ${this.plan.trials + 4}`);
      a = await attempt(stability, this.plan.trials + 4, windowMs);
    }
    if (unstable(a)) {
      const count = this.plan.requestCount[w.model]!;
      notes.push(`${late ? 'unstable (run past its time budget)' : 'still unstable'}; one measurement of --request-count ${count} instead`);
      stability = 0;
      a = await attempt(stability, 0, windowMs, count);
    }
    if (a.r.timedOut && !printedReport(a.r.stdout)) {
      // perf_analyzer 2.51 can stall collecting timestamps at very high request rates (see bench.ts).
      const shorter = Math.max(500, Math.round(windowMs / 2));
      notes.push(`perf_analyzer stalled without a report; re-run with -p ${shorter} -r 3`);
      stability = this.plan.retryStability;
      a = await attempt(stability, 3, shorter);
    }
    if (a.r.code !== 0) {
      const why = await managed.ensure();
      if (why) {
        notes.push(`${why} (during this point); re-run`);
        stability = this.plan.stability;
        a = await attempt(stability, this.plan.trials, windowMs);
      }
    }
    const reportDone = a.r.timedOut && printedReport(a.r.stdout);
    if (reportDone) notes.push('perf_analyzer hung after printing its report and was killed; the report is used');
    const res = a.r.code === 0 || reportDone ? parsePerfAnalyzer(a.r.stdout) : undefined;
    const point: PointRecord = {
      round,
      workload: w.id,
      peer,
      ok: !!res,
      res,
      stability,
      serverCores: a.serverCores,
      loadGenCores: a.r.use.loadGenCores,
      otherCores: Math.max(0, a.r.use.machineBusyCores - a.serverCores - a.r.use.loadGenCores),
      peakRss,
      peakPss,
      notes,
      command: a.command,
      log: rel(logFile),
    };
    if (point.otherCores > NOISY_CORES) notes.push(`noisy: other processes used ${point.otherCores.toFixed(2)} cores`);
    if (!res) {
      point.error = a.r.timedOut ? 'timed out' : `exit ${a.r.code}: ${a.r.stdout.trim().split('\n').slice(-3).join(' | ')}`;
      this.errors.push(`${id}: ${point.error}`);
      log(`    FAILED ${id}: ${point.error}`);
    } else {
      log(
        `    ${w.id.padEnd(26)} ${peer.padEnd(8)} ${res.throughput.toFixed(1).padStart(8)} infer/s, p50 ${(res.p50Us / 1000).toFixed(2)} ms, p99 ${(res.p99Us / 1000).toFixed(2)} ms; cores: server ${point.serverCores.toFixed(2)}, perf_analyzer ${point.loadGenCores.toFixed(2)}, other ${point.otherCores.toFixed(2)}; peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB`,
      );
    }
    if (peer !== 'bare') {
      const rec = this.memory[peer];
      if (rec) {
        rec.peakRss = Math.max(rec.peakRss, peakRss);
        rec.peakPss = Math.max(rec.peakPss, peakPss);
      }
    }
    this.points.push(point);
    return point;
  }

  async rounds(): Promise<void> {
    for (let round = 1; round <= this.plan.rounds; round++) {
      const elapsed = (Date.now() - this.t0) / 1000;
      if (round > this.plan.minRounds) {
        const perRound = elapsed / (round - 1);
        if (elapsed + perRound > this.plan.budgetS) {
          log(
            `round ${round} skipped: ${elapsed.toFixed(0)} s so far, a round takes ~${perRound.toFixed(0)} s, budget ${this.plan.budgetS} s`,
          );
          break;
        }
      }
      // Alternate the order each round so no server always runs first (or right after another's load).
      const order: Peer[] = round % 2 === 1 ? ['serval', 'mlserver', 'bare'] : ['bare', 'mlserver', 'serval'];
      log(`round ${round}: ${order.join(', ')} per workload`);
      for (const w of WORKLOADS) {
        for (const peer of order) {
          if (peer === 'bare' && !w.bare) continue;
          await this.measure(w, peer, round);
        }
      }
      this.roundsRun = round;
    }
  }

  async stopAll(): Promise<void> {
    for (const m of Object.values(this.servers)) if (m) await stopServer(m.server);
  }

  combined(): Record<string, Partial<Record<Peer, Sample>>> {
    const perf: Record<string, Partial<Record<Peer, Sample>>> = {};
    for (const w of WORKLOADS) {
      perf[w.id] = {};
      for (const peer of ['serval', 'mlserver', 'bare'] as const) {
        const samples = this.points
          .filter((p) => p.workload === w.id && p.peer === peer && p.res)
          .map((p) => ({ throughput: p.res!.throughput, p50Us: p.res!.p50Us, p99Us: p.res!.p99Us }));
        const c = combineRounds(samples);
        if (c) perf[w.id]![peer] = c;
      }
    }
    return perf;
  }

  memoryForGoals(): Partial<Record<'serval' | 'mlserver', Memory>> {
    const out: Partial<Record<'serval' | 'mlserver', Memory>> = {};
    for (const peer of ['serval', 'mlserver'] as const) {
      const m = this.memory[peer];
      if (m) out[peer] = { idleRss: m.idleRss, peakRss: m.peakRss, idlePss: m.idlePss, peakPss: m.peakPss };
    }
    return out;
  }

  // -------------------------------------------------------------------------------- report
  render(goals: Goal[], perf: Record<string, Partial<Record<Peer, Sample>>>, versions: [string, string][]): string {
    const p = this.plan;
    const durationMin = ((Date.now() - this.t0) / 60000).toFixed(1);
    const ms = (us: number | undefined) => (us === undefined || !Number.isFinite(us) ? '–' : (us / 1000).toFixed(2));
    const rate = (s: Sample | undefined) => (s ? fmtRate(s.throughput) : '–');
    // Rounded as the goals round them (down), so both tables show the same ratio.
    const x = (a: Sample | undefined, b: Sample | undefined, pct = false) =>
      a && b && b.throughput > 0
        ? pct
          ? `${down((a.throughput / b.throughput) * 100, 0)}%`
          : `${down(a.throughput / b.throughput, 2)}×`
        : '–';
    const mib = (b: number | undefined) => (b ? (b / 2 ** 20).toFixed(0) : '–');
    const batched = this.batched;
    const meanCores = (wid: string, peer: Peer) => {
      const ps = this.points.filter((q) => q.workload === wid && q.peer === peer && q.res);
      return ps.length ? ps.reduce((a, q) => a + q.serverCores, 0) / ps.length : undefined;
    };
    const L: string[] = [];
    L.push('### Serval vs MLServer vs the bare protocol servers (issue 16)');
    L.push('');
    L.push(
      `Generated by \`node dist/tools/bench/peers.js${this.args.quick ? ' --quick' : ''}\` (${this.args.quick ? 'quick' : 'full'} run, ${this.roundsRun} round${this.roundsRun === 1 ? '' : 's'}) from ${this.startedAt.toISOString()} (${durationMin} min). Raw perf_analyzer output and \`-f\` CSVs, server logs, the generated MLServer settings and \`results.json\`: \`${rel(this.work)}/\` (not committed).`,
    );
    L.push('');
    L.push(
      'Each number is the median over the rounds of one perf_analyzer run (batch 1 requests). All servers run side by side on the same 2 cores as perf_analyzer, so only ratios measured in the same run mean anything.',
    );
    L.push('');
    L.push('#### Goals');
    L.push('');
    L.push('| goal | measured | required | result |');
    L.push('|---|---|---|---|');
    for (const g of goals)
      L.push(`| ${g.what} | ${g.measured} | ${g.required} | ${g.met === undefined ? 'not measured' : g.met ? '**met**' : '**missed**'} |`);
    L.push('');
    L.push('#### Throughput and latency');
    L.push('');
    L.push(
      '| workload | Serval infer/s | MLServer infer/s | Serval ÷ MLServer | bare infer/s | Serval ÷ bare | p50 / p99 ms Serval | p50 / p99 ms MLServer | p50 / p99 ms bare | Serval p99 ÷ p50 | server cores Serval / MLServer | infer/s per server core Serval / MLServer |',
    );
    L.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const w of WORKLOADS) {
      const s = perf[w.id]?.serval;
      const m = perf[w.id]?.mlserver;
      const b = perf[w.id]?.bare;
      const cs = meanCores(w.id, 'serval');
      const cm = meanCores(w.id, 'mlserver');
      const perCore = (smp: Sample | undefined, c: number | undefined) => (smp && c && c > 0 ? fmtRate(smp.throughput / c) : '–');
      L.push(
        `| ${w.label} | ${rate(s)} | ${rate(m)} | ${x(s, m)} | ${w.bare ? rate(b) : 'n/a'} | ${w.bare ? x(s, b, true) : 'n/a'} | ${ms(s?.p50Us)} / ${ms(s?.p99Us)} | ${ms(m?.p50Us)} / ${ms(m?.p99Us)} | ${w.bare ? `${ms(b?.p50Us)} / ${ms(b?.p99Us)}` : 'n/a'} | ${s && s.p50Us > 0 ? `${up(s.p99Us / s.p50Us, 2)}×` : '–'} | ${cs?.toFixed(2) ?? '–'} / ${cm?.toFixed(2) ?? '–'} | ${perCore(s, cs)} / ${perCore(m, cm)} |`,
      );
    }
    L.push('');
    L.push(
      '"server cores": CPU used by the server\'s whole process tree during its perf_analyzer runs (start-up and stabilisation windows included), from /proc; the last column divides throughput by it.',
    );
    L.push('');
    L.push('#### Memory (same three models loaded in each)');
    L.push('');
    L.push(
      '| server | processes | RSS idle after load (MiB) | RSS peak under load (MiB) | RSS idle after the run (MiB) | PSS idle / peak (MiB) |',
    );
    L.push('|---|---|---|---|---|---|');
    for (const peer of ['serval', 'mlserver'] as const) {
      const m = this.memory[peer];
      if (!m) continue;
      L.push(
        `| ${peer === 'serval' ? 'Serval' : 'MLServer'} | ${m.processes} | ${mib(m.idleRss)} | ${mib(m.peakRss)} | ${mib(m.endRss)} | ${mib(m.idlePss)} / ${mib(m.peakPss)} |`,
      );
    }
    L.push('');
    L.push(
      "RSS summed over the server's process tree (/proc/PID/status VmRSS), sampled every 250 ms during each perf_analyzer run; PSS from /proc/PID/smaps_rollup divides pages shared between processes (MLServer's worker maps the same libraries as its parent) among them, so the sum does not count them twice.",
    );
    L.push('');
    L.push('#### Setup');
    L.push('');
    L.push('|  |  |');
    L.push('|---|---|');
    for (const [k, v] of versions) L.push(`| ${k} | ${v} |`);
    L.push(
      `| Models | ${MODELS.map((m) => `\`${m}\``).join(', ')}: the folders of \`model_repository/\` copied into one temp repository; both servers run the same \`1/model.onnx\` files |`,
    );
    L.push(
      `| Serval | \`node dist/src/cli.js --model-repository <that repository> --http-port 0 --grpc-port 0 --metrics-port 0\`: the bundled config.pbtxt files unchanged (${batched.map((b) => `\`${b.model}\``).join(' and ')} with \`dynamic_batching { }\`: no queue delay), Serval's defaults otherwise (one CPU instance per model; ORT intra-op spinning off) |`,
    );
    L.push(
      `| MLServer | \`mlserver start\`'s start-up through \`tools/bench/peers/mlserver_launch.py\`; settings.json: MLServer's defaults (\`parallel_workers\` 1: inference in one worker process; metrics server on) except \`debug: false\` (no per-request access log); one model-settings.json per model generated from its config.pbtxt (\`tools/bench/peers/mlserver_settings.ts\`) with \`implementation: onnx_runtime.OnnxRuntimeModel\` |`,
    );
    L.push(
      `| MLServer runtime | \`tools/bench/peers/onnx_runtime.py\`: inputs decoded by MLServer's dataplane and \`NumpyCodec\`, one \`onnxruntime.InferenceSession.run\`, outputs encoded by \`NumpyCodec\` (its \`content_type\` output parameter dropped: Triton's HTTP client rejects output parameters without \`binary_data_size\`); session options as Serval gives a model instance with a worker of its own: ${os.availableParallelism()} intra-op threads (the cores), 1 inter-op thread, spinning off, all graph optimisations |`,
    );
    L.push(
      `| Batching | where the config.pbtxt has \`dynamic_batching\` (${batched.map((b) => `${b.model}: max_batch_size ${b.maxBatch}`).join('; ')}), MLServer's adaptive batching with the same \`max_batch_size\` and \`max_batch_time\` = ${ML_MAX_BATCH_TIME_S * 1000} ms, MLServer's best in a sweep (docs/benchmarks.md, Analysis; MLServer cannot batch without a wait: 0 turns batching off) |`,
    );
    L.push(
      "| ModelConfig for MLServer | perf_analyzer asks for Triton's model configuration, which MLServer does not have. `mlserver_launch.py` adds one generic gRPC handler for `/inference.GRPCInferenceService/ModelConfig` to MLServer's own grpc.aio server (consulted only for methods MLServer does not register, so `ModelInfer` is MLServer's) and one FastAPI route `GET /v2/models/{m}[/versions/{v}]/config` to its app, before they start. The answer is the model's config.pbtxt parsed by Serval's parser (`tools/bench/peers/triton_config.ts`): Triton's config JSON over HTTP, an encoded `ModelConfigResponse` over gRPC. No proxy or middleware is in front of MLServer |",
    );
    L.push(
      '| Bare servers | `node dist/tools/bench/bare_grpc.js` and `bare_http.js`: `simple` computed in the protocol handler (no queue, no worker), `simple` workloads only |',
    );
    L.push(
      `| perf_analyzer | \`.venv/bin/perf_analyzer -m MODEL -u HOST:PORT -i grpc\\|http -b 1 --concurrency-range C:C -p WINDOW -s ${p.stability} -r ${p.trials} -f CSV\`, windows ${Object.entries(
        p.windowMs,
      )
        .map(([m, v]) => `${v} ms (${m})`)
        .join(
          ', ',
        )}; on "Failed to obtain stable measurement" one re-run with -s ${p.retryStability} -r ${p.trials + 4}, and if that is unstable too one fixed-size measurement with \`--request-count\` (${Object.entries(
        p.requestCount,
      )
        .map(([m, v]) => `${v} for ${m}`)
        .join(
          ', ',
        )}; marked in the notes); \`simple\` with \`--input-data tools/perf/simple_input.json\` (outputs validated), the other models with one generated request of finite pseudo-random values in [-1, 1) (\`tools/bench/peers/input_data.ts\`; perf_analyzer's default random bit patterns include NaN, which MLServer cannot return over gRPC); HTTP with \`--input-tensor-format json --output-tensor-format json\` (perf_analyzer's default is Triton's binary tensor extension, which MLServer does not implement) |`,
    );
    L.push(
      `| Rounds | ${this.roundsRun} (${this.args.quick ? 'quick: 1' : `full: ${p.minRounds}, a ${p.rounds}th if the run stays within ${p.budgetS} s`}); in each round every workload runs on each server in turn, Serval → MLServer → bare in odd rounds, bare → MLServer → Serval in even ones; all servers stay up for the whole run |`,
    );
    L.push('');
    L.push('#### Every measurement');
    L.push('');
    L.push(
      '| round | workload | server | infer/s | p50 ms | p99 ms | server cores | perf_analyzer cores | other cores | peak RSS (MiB) | notes |',
    );
    L.push('|---|---|---|---|---|---|---|---|---|---|---|');
    for (const q of this.points) {
      const noisy = q.otherCores > NOISY_CORES ? ' †' : '';
      L.push(
        `| ${q.round} | ${q.workload} | ${q.peer} | ${q.res ? fmtRate(q.res.throughput) : `failed: ${q.error ?? ''}`}${noisy} | ${ms(q.res?.p50Us)} | ${ms(q.res?.p99Us)} | ${q.serverCores.toFixed(2)} | ${q.loadGenCores.toFixed(2)} | ${q.otherCores.toFixed(2)} | ${mib(q.peakRss)} | ${q.notes.join('; ').replace(/\|/g, '\\|')} |`,
      );
    }
    L.push('');
    L.push(`† other processes used more than ${NOISY_CORES} cores during that measurement.`);
    if (this.errors.length) {
      L.push('');
      L.push('Failures:');
      L.push('');
      for (const e of this.errors) L.push(`- ${e.replace(/\|/g, '\\|')}`);
    }
    return L.join('\n');
  }
}

function versionsTable(): [string, string][] {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const modelName = cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  const py = sh(ML_PYTHON, [
    '-c',
    'import sys, importlib.metadata as m; print(sys.version.split()[0], *(m.version(p) for p in ("mlserver", "onnxruntime", "numpy", "grpcio", "uvloop", "fastapi", "uvicorn")))',
  ]).split(' ');
  const dirty = sh('git', ['status', '--porcelain']).split('\n').filter(Boolean).length;
  return [
    ['CPU', `${modelName}, ${os.availableParallelism()} logical cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`],
    ['OS', `${os.type()} ${os.release()} (${os.arch()})`],
    [
      'Serval',
      `commit ${sh('git', ['rev-parse', '--short', 'HEAD'])}${dirty ? ` + ${dirty} uncommitted changes` : ''}; Node.js ${process.version}, onnxruntime-node ${pkgVersion('onnxruntime-node')}`,
    ],
    [
      'MLServer',
      py.length >= 8
        ? `mlserver ${py[1]} on Python ${py[0]} (${rel(ML_VENV)}, tools/bench/peers/requirements-mlserver.txt): onnxruntime ${py[2]}, numpy ${py[3]}, grpcio ${py[4]}, uvloop ${py[5]}, fastapi ${py[6]}, uvicorn ${py[7]}`
        : 'unknown',
    ],
    ['perf_analyzer', paVersion()],
    [
      'Load average at start',
      os
        .loadavg()
        .map((v) => v.toFixed(2))
        .join(' '),
    ],
  ];
}

async function main(): Promise<void> {
  const args = sectionArgs(process.argv.slice(2));
  if (!existsSync(PA)) throw new Error(`${PA} not found; run 'bash tools/ci/setup-python.sh' first (or set PERF_ANALYZER)`);
  for (const f of [CLI, BARE_HTTP, BARE_GRPC]) if (!existsSync(f)) throw new Error(`${rel(f)} not found; run 'npm run build' first`);
  const run = new PeersRun(args);
  log(`${args.quick ? 'quick' : 'full'} run; raw output in ${rel(run.work)}/`);
  run.setupMlserver();
  const versions = versionsTable();
  const { servalRepo, mlFolder, configs } = run.prepare();
  try {
    await run.startAll(servalRepo, mlFolder, configs);
    await run.idleMemory();
    await run.rounds();
    await run.endMemory();
  } finally {
    await run.stopAll();
    killEverything();
  }
  const perf = run.combined();
  const goals = evaluateGoals({ perf, memory: run.memoryForGoals() });
  const md = run.render(goals, perf, versions);
  writeFileSync(
    path.join(run.work, 'results.json'),
    `${JSON.stringify({ mode: args.quick ? 'quick' : 'full', startedAt: run.startedAt, plan: run.plan, versions, perf, memory: run.memory, goals, points: run.points, errors: run.errors, commands: run.commands }, null, 2)}\n`,
  );
  writeSection(args.out, 'peers', md);
  log(
    `wrote the peers block of ${rel(args.out)}; goals: ${goals.map((g) => (g.met === undefined ? '?' : g.met ? 'met' : 'missed')).join(', ')}`,
  );
}

runSection('peers', main, killEverything);
