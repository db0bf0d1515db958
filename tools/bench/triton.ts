/**
 * The Python backend vs tritonserver 2.51's (docs/benchmarks.md block `triton`, issue 23): the same
 * model.py files (tools/bench/triton/models/ and model_repository/food_classifier) served by Serval
 * and by the real tritonserver, perf_analyzer over gRPC and HTTP at concurrency 1 and 16, rounds
 * interleaved (the order of the servers alternates per workload and round). Reported: throughput
 * and p50/p99 ratios, and the memory of each server's process tree (server + Python stubs).
 *
 *   node dist/tools/bench/triton.js [--quick] [--out FILE]
 *
 * Both servers run the models with one interpreter, the tritonserver venv's Python and numpy 1.26
 * (the 2.51 stub needs numpy 1.x), so only the servers differ. Environment: TRITON_BENCH_BASELINE
 * (a commit): also runs that commit's build (a git worktree under /tmp, made by
 * tools/bench/decoupled/setup-baseline.sh) as a third peer, for a before/after in the same run;
 * TRITON_BENCH_ROUNDS: rounds of a full run (default 2). Cells move ±15% from run to run on a
 * small VM, so the table also lists each round's throughput ratio.
 * Raw output: tmp/bench/triton-<time>/.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { disturbance, NOISY_CORES, UNEVEN_STEAL } from './disturbance.js';
import { writeSection } from './doc_section.js';
import { type PaResult, parsePerfAnalyzer, runMeasured, type Server, sleep, startServer, stopServer } from './harness.js';
import { PERF_ANALYZER, ROOT, rel, SERVAL_CLI } from './paths.js';
import { kbField, processTree, rssOf, statusSum, treeCpu, treeMemory } from './peers/proctree.js';
import { machineCpu, ticksPerSecond, waitForQuiet } from './procstat.js';
import { paVersion, runSection, type SectionArgs, sectionArgs } from './section.js';
import { median } from './seeds/logic.js';
import { killEverything, SETUP_TRITON, startTriton, TRITON_VENV } from './tritonserver.js';

const MODELS = path.join(ROOT, 'tools', 'bench', 'triton', 'models');
const SETUP_BASELINE = path.join(ROOT, 'tools', 'bench', 'decoupled', 'setup-baseline.sh');
const PY = path.join(TRITON_VENV, 'bin', 'python');
/**
 * Serval's interpreter: CPython's main() on the libpython tritonserver's stub embeds, which
 * tools/ci/setup-triton.sh builds when it can, so both servers run models on one library
 * (builds of one Python version differ by up to a quarter in speed); else the venv's python.
 */
const LAUNCHER = path.join(TRITON_VENV, 'bin', 'python-libpython');
const servalPython = (): string => (existsSync(LAUNCHER) ? LAUNCHER : PY);
const BASELINE = process.env.TRITON_BENCH_BASELINE ?? '';
const ROUNDS = Number(process.env.TRITON_BENCH_ROUNDS ?? 2);

type Peer = 'serval' | 'triton' | 'baseline';

interface Workload {
  id: string;
  model: string;
  proto: 'grpc' | 'http';
  conc: number;
  label: string;
  /** perf_analyzer --input-data file name in the work folder (else its random data). */
  input?: string;
}

const WORKLOADS: Workload[] = [];
const add = (model: string, label: string, protos: ('grpc' | 'http')[], concs: number[], input?: string) => {
  for (const proto of protos)
    for (const conc of concs)
      WORKLOADS.push({
        id: `${model}_${proto}_c${conc}`,
        model,
        proto,
        conc,
        label: `${label}, ${proto === 'grpc' ? 'gRPC' : 'HTTP'}, c${conc}`,
        input,
      });
};
add('add_sub', '`add_sub` (FP32 [4] ×2)', ['grpc', 'http'], [1, 16]);
add('identity_batched', '`identity_batched` (FP32 [16], dynamic batching)', ['grpc', 'http'], [16]);
add('identity_1mb', '`identity_1mb` (FP32 1 MiB)', ['grpc', 'http'], [1]);
add('identity_1mb', '`identity_1mb` (FP32 1 MiB)', ['grpc'], [16]);
add('bls_add_sub', '`bls_add_sub` (BLS → `add_sub`)', ['grpc'], [1, 16]);
add('food_classifier', '`food_classifier` (+ BLS → `image_classifier`)', ['grpc'], [1, 16], 'food_input.json');

interface Plan {
  rounds: number;
  /** Time re-measuring sets that had other load may take, and the wait for a quiet machine before each. */
  rerunS: number;
  quietWaitS: number;
  windowMs: number;
  stability: number;
  trials: number;
  requestCount: number;
}
const FULL: Plan = { rounds: ROUNDS, rerunS: 240, quietWaitS: 15, windowMs: 1500, stability: 20, trials: 6, requestCount: 1500 };
const QUICK: Plan = { rounds: 1, rerunS: 0, quietWaitS: 0, windowMs: 800, stability: 50, trials: 4, requestCount: 1000 };

interface Point {
  round: number;
  workload: string;
  peer: Peer;
  res?: PaResult;
  error?: string;
  /** Cores used during the run: the server's process tree, perf_analyzer, everything else; cores stolen by the hypervisor. */
  cores: { server: number; loadGen: number; other: number; steal: number };
  /** The highest process-tree RSS sampled (every 100 ms) during the run, bytes. */
  peakRss: number;
  notes: string[];
}

const log = (s: string) => console.log(`[triton ${new Date().toISOString().slice(11, 19)}] ${s}`);

/** Sum over the tree of each process's own peak RSS (VmHWM), bytes: the most it can have held at once. */
function treeHwm(pid: number): number {
  return statusSum(processTree(pid), 'VmHWM');
}

class TritonRun {
  readonly plan: Plan;
  readonly work: string;
  readonly startedAt = new Date();
  readonly points: Point[] = [];
  readonly errors: string[] = [];
  readonly commands = new Set<string>();
  readonly memory: Partial<Record<Peer, { idle: number; server: number; after: number; hwm: number; processes: number }>> = {};
  readonly discarded: Point[] = [];
  rerunLeftS: number;
  peers: Peer[] = ['serval', 'triton'];
  baselineDir = '';
  tritonVersion = 'unknown';

  constructor(readonly args: SectionArgs) {
    if (!Number.isInteger(ROUNDS) || ROUNDS < 1)
      throw new Error(`TRITON_BENCH_ROUNDS must be a positive integer, not '${process.env.TRITON_BENCH_ROUNDS}'`);
    this.plan = args.quick ? QUICK : FULL;
    this.rerunLeftS = this.plan.rerunS;
    const stamp = this.startedAt.toISOString().replace(/[:]/g, '').replace(/\..*$/, '');
    this.work = path.join(ROOT, 'tmp', 'bench', `triton-${stamp}${args.quick ? '-quick' : ''}`);
    mkdirSync(path.join(this.work, 'logs'), { recursive: true });
  }

  setup(): string {
    log(`tritonserver: bash ${rel(SETUP_TRITON)}`);
    execFileSync('bash', [SETUP_TRITON], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
    // food_classifier decodes its images with Pillow, in the interpreter both servers use.
    try {
      execFileSync(PY, ['-c', 'import PIL'], { stdio: 'ignore' });
    } catch {
      log(`Pillow into ${rel(TRITON_VENV)}`);
      execFileSync(PY, ['-m', 'pip', 'install', '--quiet', 'Pillow'], { stdio: ['ignore', 'inherit', 'inherit'] });
    }
    if (BASELINE) {
      log(`the baseline build (${BASELINE}): bash ${rel(SETUP_BASELINE)} ${BASELINE}`);
      this.baselineDir = execFileSync('bash', [SETUP_BASELINE, BASELINE], {
        cwd: ROOT,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      })
        .trim()
        .split('\n')
        .pop()!;
      this.peers.push('baseline');
    }
    const repo = path.join(this.work, 'repo');
    for (const m of readdirSync(MODELS)) cpSync(path.join(MODELS, m), path.join(repo, m), { recursive: true });
    cpSync(path.join(ROOT, 'model_repository', 'food_classifier'), path.join(repo, 'food_classifier'), { recursive: true });
    // One photo-like 256x256 JPEG (a smooth gradient with noise), base64 as the model expects.
    const b64 = execFileSync(
      PY,
      [
        '-c',
        'import base64, io, numpy as np; from PIL import Image\n' +
          'y, x = np.mgrid[0:256, 0:256]; rng = np.random.default_rng(1)\n' +
          'img = np.stack([x, y, (x + y) // 2], -1) + rng.integers(0, 40, (256, 256, 3))\n' +
          'b = io.BytesIO(); Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(b, "JPEG", quality=90)\n' +
          'print(base64.b64encode(b.getvalue()).decode())',
      ],
      { encoding: 'utf8' },
    ).trim();
    writeFileSync(path.join(this.work, 'food_input.json'), JSON.stringify({ data: [{ INPUT_IMAGE: { content: [b64], shape: [1] } }] }));
    return repo;
  }

  private cmd(c: string[]): void {
    this.commands.add(c.map((x) => (x.startsWith(ROOT) ? rel(x) : x)).join(' '));
  }

  async start(repo: string): Promise<Record<Peer, Server>> {
    const logs = path.join(this.work, 'logs');
    const servalArgs = (cli: string) => [
      cli,
      '--model-repository',
      repo,
      '--http-port',
      '0',
      '--grpc-port',
      '0',
      '--metrics-port',
      '0',
      `--backend-config=python,interpreter=${servalPython()}`,
    ];
    const servers: Partial<Record<Peer, Server>> = {};
    this.cmd(['node', ...servalArgs(SERVAL_CLI)]);
    servers.serval = await startServer(
      'serval',
      servalArgs(SERVAL_CLI),
      path.join(logs, 'server_serval.log'),
      { http: true, grpc: true },
      ROOT,
    );
    servers.triton = await startTriton(repo, path.join(logs, 'server_triton.log'));
    this.cmd(['bash', 'tools/reference/tritonserver.sh', repo, 'HTTP_PORT', 'GRPC_PORT', 'METRICS_PORT']);
    if (this.baselineDir) {
      const cli = path.join(this.baselineDir, 'dist', 'src', 'cli.js');
      servers.baseline = await startServer(
        'baseline',
        servalArgs(cli),
        path.join(logs, 'server_baseline.log'),
        { http: true, grpc: true },
        this.baselineDir,
      );
    }
    try {
      this.tritonVersion = ((await (await fetch(`http://${servers.triton.http}/v2`)).json()) as { version: string }).version;
    } catch {
      /* stays unknown */
    }
    return servers as Record<Peer, Server>;
  }

  async point(server: Server, peer: Peer, w: Workload, round: number): Promise<Point> {
    const p = this.plan;
    const base = [
      PERF_ANALYZER,
      '-m',
      w.model,
      '-u',
      w.proto === 'grpc' ? server.grpc! : server.http!,
      '-i',
      w.proto,
      ...(w.input ? ['--input-data', path.join(this.work, w.input)] : []),
      '-b',
      '1',
      '--concurrency-range',
      `${w.conc}:${w.conc}`,
    ];
    const logFile = path.join(this.work, 'logs', `pa_${peer}_${w.id}.log`);
    const notes: string[] = [];
    const attempt = async (stability: number, trials: number, count = 0) => {
      const c = [
        ...base,
        ...(count > 0 ? ['--request-count', String(count)] : ['-p', String(p.windowMs), '-s', String(stability), '-r', String(trials)]),
      ];
      this.cmd(c.map((x) => (x === server.grpc || x === server.http ? 'HOST:PORT' : x)));
      let peak = 0;
      // Listed once: the sampler must not perturb what it measures (rssOf).
      const pids = processTree(server.pid);
      const sampler = setInterval(() => {
        peak = Math.max(peak, rssOf(pids));
      }, 100);
      const cpu0 = treeCpu(server.pid);
      const t0 = performance.now();
      const r = await runMeasured(c, logFile, count > 0 ? 180 : Math.ceil((p.windowMs / 1000) * (trials + 3) * 3 + 60));
      clearInterval(sampler);
      const wall = (performance.now() - t0) / 1000;
      const serverCores = (treeCpu(server.pid) - cpu0) / ticksPerSecond() / wall;
      peak = Math.max(peak, rssOf(processTree(server.pid)));
      const cores = {
        server: serverCores,
        loadGen: r.use.loadGenCores,
        other: Math.max(0, r.use.machineBusyCores - serverCores - r.use.loadGenCores),
        steal: r.use.stealCores,
      };
      return { r, cores, peak };
    };
    const unstable = (x: Awaited<ReturnType<typeof attempt>>) => x.r.code !== 0 && /Failed to obtain stable measurement/.test(x.r.stdout);
    let a = await attempt(p.stability, p.trials);
    if (unstable(a)) {
      notes.push(`unstable at -s ${p.stability}; re-run with -s 50`);
      a = await attempt(50, p.trials + 4);
    }
    if (unstable(a)) {
      notes.push(`still unstable; one --request-count ${p.requestCount} measurement`);
      a = await attempt(0, 0, p.requestCount);
    }
    const pt: Point = { round, workload: w.id, peer, cores: a.cores, peakRss: a.peak, notes };
    const res = a.r.code === 0 ? parsePerfAnalyzer(a.r.stdout) : undefined;
    if (res) pt.res = res;
    else {
      pt.error = a.r.timedOut ? 'timed out' : `exit ${a.r.code}: ${a.r.stdout.trim().split('\n').slice(-3).join(' | ')}`;
      this.errors.push(`${peer} ${w.id} round ${round}: ${pt.error}`);
    }
    if (a.cores.other > NOISY_CORES) notes.push(`other processes used ${a.cores.other.toFixed(2)} cores`);
    log(
      `  ${peer.padEnd(8)} ${w.id.padEnd(26)} ${res ? `${res.throughput.toFixed(1).padStart(8)} infer/s, p50 ${(res.p50Us / 1000).toFixed(2)} ms, p99 ${(res.p99Us / 1000).toFixed(2)} ms` : `FAILED ${pt.error}`}; RSS ${(a.peak / 2 ** 20).toFixed(0)} MiB; cores server ${a.cores.server.toFixed(2)} pa ${a.cores.loadGen.toFixed(2)} other ${a.cores.other.toFixed(2)} steal ${a.cores.steal.toFixed(2)}`,
    );
    return pt;
  }

  async measure(servers: Record<Peer, Server>): Promise<void> {
    await sleep(1500);
    for (const peer of this.peers) {
      const m = treeMemory(servers[peer].pid);
      const own = kbField(readFileSync(`/proc/${servers[peer].pid}/status`, 'utf8'), 'VmRSS');
      this.memory[peer] = { idle: m.rss, server: own, after: 0, hwm: 0, processes: m.processes };
    }
    let turn = 0;
    for (let round = 1; round <= this.plan.rounds; round++) {
      log(`round ${round}/${this.plan.rounds}`);
      for (const w of WORKLOADS) {
        // The order rotates from one workload to the next: neither server always goes first.
        const order = this.peers.map((_, i) => this.peers[(i + turn) % this.peers.length]!);
        turn++;
        let set: Point[] = [];
        for (const peer of order) set.push(await this.point(servers[peer], peer, w, round));
        // A ratio needs its sides measured alike: when other processes loaded the machine during
        // one of them, or the hypervisor took much more from one than the other, wait for a
        // quieter machine and measure the set again (within a budget).
        let why = disturbance(set.map((q) => q.cores));
        if (why && this.rerunLeftS > 0) {
          const t0 = Date.now();
          const quiet = await waitForQuiet(this.plan.quietWaitS, NOISY_CORES);
          log(`    ${why} during the set; ${quiet ? 'quieter now' : 'still busy'}, measuring it again`);
          const again: Point[] = [];
          for (const peer of order) again.push(await this.point(servers[peer], peer, w, round));
          for (const q of again) q.notes.push(`re-run: ${why} during the first set`);
          this.discarded.push(...set);
          set = again;
          this.rerunLeftS -= (Date.now() - t0) / 1000;
          why = disturbance(set.map((q) => q.cores));
        }
        if (why) for (const q of set) q.notes.push(`disturbed: ${why}`);
        this.points.push(...set);
      }
    }
    for (const peer of this.peers) {
      const m = this.memory[peer]!;
      m.after = treeMemory(servers[peer].pid).rss;
      m.hwm = treeHwm(servers[peer].pid);
    }
  }

  render(loadAvg: number[]): string {
    const L: string[] = [];
    const rate = (x: number) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x.toFixed(1)) : '–');
    const ms = (us: number) => (Number.isFinite(us) ? (us / 1000).toFixed(2) : '–');
    const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : '–');
    const mib = (b: number | undefined) => (b ? (b / 2 ** 20).toFixed(0) : '–');
    const of = (w: string, peer: Peer) => this.points.filter((q) => q.workload === w && q.peer === peer);
    const m = (w: string, peer: Peer, f: (r: PaResult) => number) => median(of(w, peer).flatMap((q) => (q.res ? [f(q.res)] : [])));
    // Each round's Serval ÷ Triton throughput: the spread says how far to trust the median's ratio.
    const perRound = (w: string) => {
      const out: string[] = [];
      for (let round = 1; round <= this.plan.rounds; round++) {
        const at = (peer: Peer) => of(w, peer).find((q) => q.round === round)?.res?.throughput ?? NaN;
        out.push(ratio(at('serval'), at('triton')).replace('×', ''));
      }
      return out.join(', ');
    };
    // A kept set is one workload's points of one round.
    const disturbed = (w: string, round: number) =>
      disturbance(this.points.filter((q) => q.workload === w && q.round === round).map((q) => q.cores));
    const noisy = (w: string) => (Array.from({ length: this.plan.rounds }, (_, i) => disturbed(w, i + 1)).some(Boolean) ? ' †' : '');
    const base = this.peers.includes('baseline');
    L.push('### The Python backend vs tritonserver 2.51 (issue 23)');
    L.push('');
    L.push(
      `Serval's Python backend and tritonserver 2.51's on the same model.py files, same interpreter, perf_analyzer, ${this.plan.rounds} round(s) interleaved. Ratios are Serval ÷ Triton of the medians over rounds: throughput ≥ 1.00× and p50/p99 ≤ 1.00× meet issue 23's target; "per round" is each round's throughput ratio (both servers measured back to back).${base ? ` "before": the build of ${BASELINE}, the comparison build (TRITON_BENCH_BASELINE), in the same run.` : ''}`,
    );
    L.push('');
    L.push(
      `| workload | infer/s Serval / Triton | throughput ratio | per round | p50 ms Serval / Triton | p50 ratio | p99 ms Serval / Triton | p99 ratio | peak RSS MiB Serval / Triton |${base ? ' before: infer/s, p50 ms, p99 ms |' : ''}`,
    );
    L.push(`|---|---|---|---|---|---|---|---|---|${base ? '---|' : ''}`);
    for (const w of WORKLOADS) {
      const t = [m(w.id, 'serval', (r) => r.throughput), m(w.id, 'triton', (r) => r.throughput)] as const;
      const p50 = [m(w.id, 'serval', (r) => r.p50Us), m(w.id, 'triton', (r) => r.p50Us)] as const;
      const p99 = [m(w.id, 'serval', (r) => r.p99Us), m(w.id, 'triton', (r) => r.p99Us)] as const;
      const rss = (peer: Peer) => Math.max(0, ...of(w.id, peer).map((q) => q.peakRss));
      const before = base
        ? ` ${rate(m(w.id, 'baseline', (r) => r.throughput))}, ${ms(m(w.id, 'baseline', (r) => r.p50Us))}, ${ms(m(w.id, 'baseline', (r) => r.p99Us))} |`
        : '';
      L.push(
        `| ${w.label}${noisy(w.id)} | ${rate(t[0])} / ${rate(t[1])} | **${ratio(t[0], t[1])}** | ${perRound(w.id)} | ${ms(p50[0])} / ${ms(p50[1])} | ${ratio(p50[0], p50[1])} | ${ms(p99[0])} / ${ms(p99[1])} | ${ratio(p99[0], p99[1])} | ${mib(rss('serval'))} / ${mib(rss('triton'))} |${before}`,
      );
    }
    L.push('');
    L.push(
      `Memory of each server's process tree (the server and its Python stub processes, one per model instance), MiB: idle after loading → after the runs; "peak" is the sum over the tree of each process's own peak (VmHWM). The table above: the highest tree RSS sampled every 100 ms during the workload's runs.`,
    );
    L.push('');
    L.push(
      "| server | processes | idle RSS (server process + stubs) | RSS after the runs | peak (sum of VmHWM) | idle ÷ Triton's | peak ÷ Triton's |",
    );
    L.push('|---|---|---|---|---|---|---|');
    for (const peer of this.peers) {
      const x = this.memory[peer];
      const name = peer === 'serval' ? 'Serval' : peer === 'triton' ? `tritonserver ${this.tritonVersion}` : `Serval before (${BASELINE})`;
      L.push(
        `| ${name} | ${x?.processes ?? '–'} | ${mib(x?.idle)} (${mib(x?.server)} + ${mib(x ? x.idle - x.server : undefined)}) | ${mib(x?.after)} | ${mib(x?.hwm)} | ${ratio(x?.idle ?? NaN, this.memory.triton?.idle ?? NaN)} | ${ratio(x?.hwm ?? NaN, this.memory.triton?.hwm ?? NaN)} |`,
      );
    }
    L.push('');
    const cpu = (readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? os.cpus()[0]?.model ?? 'unknown').trim();
    const sh = (c: string, a: string[]) => {
      try {
        return execFileSync(c, a, { encoding: 'utf8', cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      } catch {
        return 'unknown';
      }
    };
    const dirty = sh('git', ['status', '--porcelain']).split('\n').filter(Boolean).length;
    L.push('#### Setup');
    L.push('');
    L.push('|  |  |');
    L.push('|---|---|');
    L.push(`| CPU | ${cpu}, ${os.availableParallelism()} logical cores, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB |`);
    L.push(
      `| Serval | \`dist/\` of commit ${sh('git', ['rev-parse', '--short', 'HEAD'])}${dirty ? ` + ${dirty} uncommitted changes` : ''}, Node.js ${process.version} |`,
    );
    L.push(
      `| tritonserver | ${this.tritonVersion} from PyPI's nvidia-pytriton 0.7.0 (\`${rel(TRITON_VENV)}\`), \`tools/reference/tritonserver.sh\`, its defaults |`,
    );
    // tritonserver's stub embeds the libpython the loader finds; Serval runs servalPython().
    const libpythonOf = (exe: readonly string[]): string =>
      sh('bash', ['-c', 'LD_LIBRARY_PATH="$1" ldd "$0" | awk \'$1 ~ /^libpython/ {print $3}\' | xargs -r realpath', ...exe]);
    const site = sh(PY, ['-c', "import sysconfig; print(sysconfig.get_paths()['purelib'])"]);
    const pyLibs = path.join(site, 'nvidia_pytriton.libs');
    const stubLoads = libpythonOf([
      path.join(site, 'pytriton', 'tritonserver', 'backends', 'python', 'triton_python_backend_stub'),
      pyLibs,
    ]);
    const serval = servalPython();
    const servalLoads = libpythonOf([serval, '']) || 'none (statically linked)';
    L.push(
      `| Python | Serval: \`${rel(serval)}\` (\`--backend-config=python,interpreter=…\`) on \`${servalLoads}\`; tritonserver's stub on \`${stubLoads}\`${servalLoads === stubLoads ? ', the same library' : ' (**not the same**: interpreter-bound code runs at different speeds)'}; ${sh(serval, ['-c', 'import sys, numpy, PIL; print(f"Python {sys.version.split()[0]}, numpy {numpy.__version__}, Pillow {PIL.__version__}")'])} |`,
    );
    // The settings that make Serval's stubs leave glibc's thresholds alone (serval_python_stub.py, keep_freed_memory).
    const mallocEnv = Object.keys(process.env).filter(
      (k) =>
        /^MALLOC_(TOP_PAD|TRIM_THRESHOLD|MMAP_THRESHOLD|MMAP_MAX)_$/.test(k) ||
        (k === 'GLIBC_TUNABLES' && process.env[k]!.includes('glibc.malloc.')),
    );
    L.push(
      `| Model processes' allocator | Serval's stubs keep freed memory for the next execution (\`stub-malloc=keep\`, its default: glibc's mmap threshold 32 MiB, trim threshold 64 MiB, \`malloc_trim\` after a second idle); tritonserver's stubs run with glibc's own dynamic thresholds, its default. ${mallocEnv.length ? `The environment sets ${mallocEnv.join(', ')} for both (Serval's stubs then leave glibc alone)` : "Neither side's environment sets malloc's thresholds (`MALLOC_*_`, `glibc.malloc.*` in `GLIBC_TUNABLES`)"} |`,
    );
    L.push(
      `| perf_analyzer | ${paVersion()}; \`-b 1 -p ${this.plan.windowMs} -s ${this.plan.stability} -r ${this.plan.trials}\` (unstable: \`-s 50\`, then one \`--request-count ${this.plan.requestCount}\`) |`,
    );
    L.push(
      `| Load average at start | ${loadAvg.map((v) => v.toFixed(2)).join(' ')} (other work on the machine: † marks a workload with a set, kept after its re-run budget was spent, where other processes used more than ${NOISY_CORES} cores or the two sides' steal differed by more than ${UNEVEN_STEAL} cores) |`,
    );
    const steal = this.points.map((q) => q.cores.steal).sort((x, y) => x - y);
    if (steal.length)
      L.push(
        `| Steal during measurements | median ${median(steal).toFixed(2)}, highest ${steal[steal.length - 1]!.toFixed(2)} cores (CPU time the hypervisor gave to other guests; sets were re-run when their sides differed by more than ${UNEVEN_STEAL}) |`,
      );
    L.push(`| Rounds | ${this.plan.rounds} (${this.args.quick ? 'quick' : 'full'}), raw output in \`${rel(this.work)}/\` |`);
    L.push('');
    L.push(
      "Models (`tools/bench/triton/models/`): `add_sub` is python_backend's example; `identity_batched` returns its input, `max_batch_size: 32` with `dynamic_batching {}`; `identity_1mb` returns a 1 MiB FP32 tensor; `bls_add_sub` calls `add_sub` with a blocking BLS request per request; `food_classifier` is `model_repository/food_classifier` unchanged (base64 JPEG → Pillow decode and resize → numpy normalisation → one BLS request per batch), its `image_classifier` a numpy stand-in for the ONNX one (the tritonserver wheel has only the Python backend): average pooling, a linear layer, softmax. perf_analyzer sends random data except to `food_classifier` (one 256×256 JPEG).",
    );
    L.push('');
    L.push('```sh');
    L.push(
      `bash tools/bench/run.sh --sections triton${this.args.quick ? ' --quick' : ''}   # this block (or: node dist/tools/bench/triton.js)`,
    );
    for (const c of this.commands) L.push(c.replace(rel(this.work), 'tmp/bench/triton-…'));
    L.push('```');
    if (this.errors.length) {
      L.push('');
      L.push('Failures:');
      L.push('');
      for (const e of this.errors) L.push(`- ${e.replace(/\|/g, '\\|')}`);
    }
    return L.join('\n');
  }
}

async function main(): Promise<void> {
  const args = sectionArgs(process.argv.slice(2));
  if (!existsSync(PERF_ANALYZER))
    throw new Error(`${PERF_ANALYZER} not found; run 'bash tools/ci/setup-python.sh' first (or set PERF_ANALYZER)`);
  if (!existsSync(SERVAL_CLI)) throw new Error(`${rel(SERVAL_CLI)} not found; run 'npm run build' first`);
  const run = new TritonRun(args);
  log(`${args.quick ? 'quick' : 'full'} run; raw output in ${rel(run.work)}/`);
  const loadAvg = os.loadavg();
  const repo = run.setup();
  const servers = await run.start(repo);
  try {
    await run.measure(servers);
  } finally {
    for (const s of Object.values(servers)) await stopServer(s).catch(() => undefined);
    killEverything();
  }
  const md = run.render(loadAvg);
  writeFileSync(
    path.join(run.work, 'results.json'),
    `${JSON.stringify({ mode: args.quick ? 'quick' : 'full', startedAt: run.startedAt, plan: run.plan, machineBusyAtStart: machineCpu(), memory: run.memory, points: run.points, discarded: run.discarded, errors: run.errors, commands: [...run.commands] }, null, 2)}\n`,
  );
  writeSection(args.out, 'triton', md);
  log(`wrote the triton block of ${rel(args.out)}${run.errors.length ? `; ${run.errors.length} failure(s)` : ''}`);
}

runSection('triton', main, killEverything);
