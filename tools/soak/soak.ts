// Soak and fault run (issue 14): a built server (dist/src/cli.js) in explicit mode serving three
// copies of the "simple" model, mixed HTTP and gRPC load from concurrent clients that check every
// answer, a fourth model loaded and unloaded over and over meanwhile, one instance worker killed
// (the SERVAL_TEST_KILL_WORKER_FILE test hook), and SIGTERM while requests are in flight.
//
//   npm run soak                      full run: 200 load/unload cycles, at least 120 s of load
//   npm run soak -- --short           CI: 20 cycles, about 30 s
//   npm run soak -- --cycles N --seconds S --clients C
//
// Prints requests, errors, p50/p99 latency, and the server's RSS, threads and open file
// descriptors at the start, middle and end of the load. Exits 1 when a request is lost (no answer,
// a transport error, a wrong result), an error is not one the run provoked, the restart is not
// counted, the server does not exit 0 on SIGTERM, or memory, threads or descriptors grow beyond
// the bounds below between the middle and the end of the load.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { loadProtos } from '../../src/frontends/grpc/proto.js';
import { projectRoot } from '../../src/kernel/paths.js';
import { buildSimple } from '../onnx/models.js';

/** Growth allowed between the middle and the end of the load (after warm-up). */
const BOUNDS = { rssRatio: 1.25, rssSlackMiB: 64, threads: 8, fds: 32 };
/** Requests the killed worker may hold when it dies: its slots (backends/onnxruntime/channel.ts). */
const MAX_KILLED = 8;
const CRASH_TEXT = /stopped unexpectedly .* while running this request; it is being restarted/;

interface Options {
  cycles: number;
  seconds: number;
  clients: number;
}

function parseOptions(argv: string[]): Options {
  const short = argv.includes('--short');
  const num = (name: string, fallback: number): number => {
    const i = argv.indexOf(`--${name}`);
    if (i < 0) return fallback;
    const v = Number(argv[i + 1]);
    if (!Number.isSafeInteger(v) || v <= 0) throw new Error(`--${name} takes a positive integer`);
    return v;
  };
  return { cycles: num('cycles', short ? 20 : 200), seconds: num('seconds', short ? 30 : 120), clients: num('clients', 8) };
}

interface Sample {
  rssMiB: number;
  threads: number;
  fds: number;
}

function sample(pid: number): Sample {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssMiB: Math.round(field('VmRSS') / 1024), threads: field('Threads'), fds: readdirSync(`/proc/${pid}/fd`).length };
}

class Stats {
  ok = 0;
  /** Refusals the run provoked: the cycled model while unloaded, the killed worker's requests. */
  expected = 0;
  crashFailures = 0;
  errors: string[] = [];
  lost: string[] = [];
  latenciesMs: number[] = [];
  /** Client requests sent while the server closed its connections (HTTP keep-alive race). */
  resetAtShutdown = 0;
  errorCount = 0;
  lostCount = 0;

  error(what: string): void {
    this.errorCount++;
    if (this.errors.length < 20) this.errors.push(what);
  }
  loss(what: string): void {
    this.lostCount++;
    if (this.lost.length < 20) this.lost.push(what);
  }
  percentile(p: number): number {
    const s = [...this.latenciesMs].sort((a, b) => a - b);
    return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : Number.NaN;
  }
}

function makeRepository(): string {
  const simple = buildSimple();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-soak-'));
  const models: [string, number, string][] = [
    ['soak_a', 1, ''],
    ['soak_b', 2, ''],
    ['soak_c', 1, 'dynamic_batching { max_queue_delay_microseconds: 500 }\n'],
    ['soak_cycle', 1, ''],
    // Holds a few requests in its queue for half a second: surely inside the server at SIGTERM.
    ['soak_slow', 1, 'dynamic_batching { max_queue_delay_microseconds: 500000 }\n'],
  ];
  for (const [name, count, extra] of models) {
    mkdirSync(path.join(dir, 'repo', name, '1'), { recursive: true });
    writeFileSync(path.join(dir, 'repo', name, '1', 'model.onnx'), simple.onnx);
    const config = simple.config.replace('name: "simple"', `name: "${name}"`).replace('count: 1', `count: ${count}`) + extra;
    writeFileSync(path.join(dir, 'repo', name, 'config.pbtxt'), config);
  }
  // The killed model's version folder is above shared-model-max-bytes, so its instances get
  // workers of their own and the kill must leave every other model untouched. (Small models
  // sharing a worker all fail what that worker was running: test/integration/shared_workers.test.ts.)
  writeFileSync(path.join(dir, 'repo', 'soak_b', '1', 'padding.bin'), new Uint8Array(512 * 1024));
  return dir;
}

interface Server {
  child: ChildProcess;
  http: string;
  grpc: string;
  metrics: string;
  exited: Promise<number | null>;
  output: () => string;
}

async function startServer(dir: string): Promise<Server> {
  const cli = path.join(projectRoot(), 'dist', 'src', 'cli.js');
  const args = [cli, '--model-repository', path.join(dir, 'repo'), '--model-control-mode', 'explicit'];
  for (const m of ['soak_a', 'soak_b', 'soak_c', 'soak_slow']) args.push('--load-model', m);
  for (const s of ['http', 'grpc', 'metrics']) args.push(`--${s}-port`, '0', `--${s}-address`, '127.0.0.1');
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, SERVAL_TEST_KILL_WORKER_FILE: path.join(dir, 'kill') },
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  // Never leave the server behind, whatever ends this run.
  process.once('exit', () => child.exitCode === null && child.kill('SIGKILL'));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const port = (what: string) => new RegExp(`Started ${what} at [^\\s:]+:(\\d+)`).exec(out)?.[1];
    const [h, g, m] = [port('HTTPService'), port('GRPCInferenceService'), port('Metrics Service')];
    if (h && g && m) {
      const server = {
        child,
        http: `http://127.0.0.1:${h}`,
        grpc: `127.0.0.1:${g}`,
        metrics: `http://127.0.0.1:${m}`,
        exited,
        output: () => out,
      };
      const ready = await fetch(`${server.http}/v2/health/ready`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) return server;
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the server did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const A = Array.from({ length: 16 }, (_, i) => i);
const B = Array.from({ length: 16 }, (_, i) => 3 * i - 7);
const SUM = A.map((a, i) => a + B[i]!);

type Outcome = { kind: 'ok' } | { kind: 'refused'; status: string; text: string } | { kind: 'lost'; text: string };

async function httpInfer(base: string, model: string): Promise<Outcome> {
  const body = JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: A },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: B },
    ],
    outputs: [{ name: 'OUTPUT0' }],
  });
  let res: Response;
  try {
    res = await fetch(`${base}/v2/models/${model}/infer`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  } catch (e) {
    return { kind: 'lost', text: `HTTP ${model}: ${(e as Error).message} ${String((e as { cause?: unknown }).cause ?? '')}` };
  }
  const text = await res.text().catch((e: Error) => `(body lost: ${e.message})`);
  if (res.status !== 200) return { kind: 'refused', status: String(res.status), text };
  try {
    const got = (JSON.parse(text) as { outputs: { data: number[] }[] }).outputs[0]!.data;
    if (JSON.stringify(got) !== JSON.stringify(SUM)) return { kind: 'lost', text: `HTTP ${model}: wrong result ${JSON.stringify(got)}` };
  } catch {
    return { kind: 'lost', text: `HTTP ${model}: unreadable response ${text.slice(0, 200)}` };
  }
  return { kind: 'ok' };
}

function grpcInferrer(address: string): { infer: (model: string) => Promise<Outcome>; close: () => void } {
  const pkg = loadProtos(['grpc_service.proto']);
  const svc = pkg['inference.GRPCInferenceService'] as protoLoader.ServiceDefinition;
  const m = svc.ModelInfer!;
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const raw = (v: number[]) => Buffer.from(Int32Array.from(v).buffer);
  const infer = (model: string): Promise<Outcome> =>
    new Promise((resolve) => {
      const req = {
        model_name: model,
        inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: ['1', '16'] })),
        outputs: [{ name: 'OUTPUT0' }],
        raw_input_contents: [raw(A), raw(B)],
      };
      client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, req, { deadline: Date.now() + 60_000 }, (err, res) => {
        if (err) {
          // A status the server sent is an answer; a transport failure is a lost request.
          const transport =
            err.code === grpc.status.UNAVAILABLE && /No connection|ECONNRE|Connection dropped|Socket closed/i.test(err.details);
          resolve(
            transport
              ? { kind: 'lost', text: `gRPC ${model}: ${err.details}` }
              : { kind: 'refused', status: grpc.status[err.code] ?? String(err.code), text: err.details },
          );
          return;
        }
        const r = res as { raw_output_contents: Buffer[] };
        const out = r.raw_output_contents[0]!;
        const got = Array.from(new Int32Array(out.buffer.slice(out.byteOffset, out.byteOffset + out.byteLength)));
        resolve(
          JSON.stringify(got) === JSON.stringify(SUM)
            ? { kind: 'ok' }
            : { kind: 'lost', text: `gRPC ${model}: wrong result ${JSON.stringify(got)}` },
        );
      });
    });
  return { infer, close: () => client.close() };
}

async function metric(server: Server, name: string, model: string): Promise<number> {
  const text = await (await fetch(`${server.metrics}/metrics`)).text();
  const m = new RegExp(`^${name}\\{model="${model}",version="1"\\} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  const dir = makeRepository();
  const server = await startServer(dir);
  const pid = server.child.pid!;
  const stats = new Stats();
  const grpcClient = grpcInferrer(server.grpc);
  const started = Date.now();
  const endAt = started + opts.seconds * 1000;
  let stop = false;
  /** True while the cycled model may be unloaded: refusals for it are expected. */
  let cycledLoaded = false;
  let killWindow = false;
  /** After SIGTERM: a 503 / UNAVAILABLE is the server's answer while it closes. */
  let terminating = false;
  const models = ['soak_a', 'soak_b', 'soak_c', 'soak_cycle'];

  const record = (model: string, o: Outcome, ms: number) => {
    if (o.kind === 'ok') {
      stats.ok++;
      stats.latenciesMs.push(ms);
    } else if (o.kind === 'lost' && terminating && /ECONNRESET|ECONNREFUSED|other side closed|No connection/i.test(o.text)) {
      // Sent as the server closed its listener and idle keep-alive connections: never received.
      stats.resetAtShutdown++;
    } else if (o.kind === 'lost') stats.loss(o.text);
    else if (
      model === 'soak_cycle' &&
      (!cycledLoaded || /unknown model|not ready|UNAVAILABLE|unloading|no available versions/i.test(o.text))
    )
      stats.expected++;
    else if (terminating && (o.status === '503' || o.status === 'UNAVAILABLE')) stats.expected++;
    else if (model === 'soak_b' && killWindow && CRASH_TEXT.test(o.text)) {
      stats.expected++;
      stats.crashFailures++;
    } else stats.error(`${model}: ${o.status} ${o.text.slice(0, 200)}`);
  };

  const client = async (n: number) => {
    for (let i = 0; !stop; i++) {
      const model = models[(n + i) % models.length]!;
      const t0 = performance.now();
      const o = n % 2 === 0 ? await httpInfer(server.http, model) : await grpcClient.infer(model);
      record(model, o, performance.now() - t0);
    }
  };

  const cycler = async () => {
    let done = 0;
    while (done < opts.cycles && !stop) {
      const load = await fetch(`${server.http}/v2/repository/models/soak_cycle/load`, { method: 'POST', body: '{}' });
      if (load.status !== 200) stats.error(`load soak_cycle: ${load.status} ${await load.text()}`);
      cycledLoaded = true;
      await new Promise((r) => setTimeout(r, 20));
      cycledLoaded = false;
      const unload = await fetch(`${server.http}/v2/repository/models/soak_cycle/unload`, { method: 'POST', body: '{}' });
      if (unload.status !== 200) stats.error(`unload soak_cycle: ${unload.status} ${await unload.text()}`);
      done++;
    }
    return done;
  };

  // Warm-up, then the start sample.
  await Promise.all([httpInfer(server.http, 'soak_a'), grpcClient.infer('soak_b'), httpInfer(server.http, 'soak_c')]);
  const samples: Record<string, Sample> = { start: sample(pid) };
  const clients = Array.from({ length: opts.clients }, (_, n) => client(n));
  const cycles = cycler();

  // The fault: one of soak_b's workers dies a third of the way in.
  await new Promise((r) => setTimeout(r, (opts.seconds * 1000) / 3));
  killWindow = true;
  writeFileSync(path.join(dir, 'kill'), 'soak_b');
  await new Promise((r) => setTimeout(r, (opts.seconds * 1000) / 6));
  samples.middle = sample(pid);
  const restarts = await metric(server, 'nv_inference_instance_restarts', 'soak_b');

  // The rest of the load, and at least every cycle.
  while (Date.now() < endAt) await new Promise((r) => setTimeout(r, 100));
  const cyclesDone = await cycles;
  samples.end = sample(pid);

  // SIGTERM mid-load: requests the server holds must all be answered; then it exits 0. Six
  // requests wait in soak_slow's queue (fewer than a batch, so for its 0.5 s delay) while the
  // clients keep sending; SIGTERM comes once the server reports all six pending.
  const inFlight = Array.from({ length: 6 }, (_, i) => {
    const model = 'soak_slow';
    return (i % 2 === 0 ? httpInfer(server.http, model) : grpcClient.infer(model)).then((o) => ({ model, o }));
  });
  const held = Date.now() + 5000;
  while ((await metric(server, 'nv_inference_pending_request_count', 'soak_slow')) < inFlight.length && Date.now() < held) {
    await new Promise((r) => setTimeout(r, 5));
  }
  terminating = true;
  server.child.kill('SIGTERM');
  stop = true;
  await Promise.all(clients);
  let shutdownAnswered = 0;
  for (const { model, o } of await Promise.all(inFlight)) {
    if (o.kind === 'lost') stats.loss(`at SIGTERM: ${o.text}`);
    else if (o.kind === 'refused') stats.error(`held at SIGTERM: ${model}: ${o.status} ${o.text}`);
    else shutdownAnswered++;
  }
  const exitCode = await Promise.race([server.exited, new Promise<string>((r) => setTimeout(() => r('timeout'), 60_000))]);
  grpcClient.close();
  if (exitCode === 'timeout') server.child.kill('SIGKILL');

  const seconds = (Date.now() - started) / 1000;
  const total = stats.ok + stats.expected + stats.errorCount + stats.lostCount + stats.resetAtShutdown;
  const fmt = (s: Sample) => `RSS ${s.rssMiB} MiB, ${s.threads} threads, ${s.fds} fds`;
  console.log(
    `soak: ${seconds.toFixed(0)} s, ${opts.clients} clients (HTTP + gRPC), 3 models + 1 cycled, ${cyclesDone} load/unload cycles`,
  );
  console.log(
    `soak: ${total} requests, ${stats.ok} ok, ${stats.expected} provoked refusals (${stats.crashFailures} on the killed worker), ${stats.errorCount} errors, ${stats.lostCount} lost, ${stats.resetAtShutdown} reset while the server closed`,
  );
  console.log(`soak: latency p50 ${stats.percentile(50).toFixed(2)} ms, p99 ${stats.percentile(99).toFixed(2)} ms`);
  for (const k of ['start', 'middle', 'end']) console.log(`soak: ${k.padEnd(6)} ${fmt(samples[k]!)}`);
  console.log(
    `soak: nv_inference_instance_restarts{model="soak_b"} = ${restarts}; ${shutdownAnswered}/${inFlight.length} requests held at SIGTERM answered; exit code ${exitCode}`,
  );

  const problems: string[] = [];
  if (stats.lostCount) problems.push(`${stats.lostCount} lost request(s): ${stats.lost.join(' | ')}`);
  if (stats.errorCount) problems.push(`${stats.errorCount} unexpected error(s): ${stats.errors.join(' | ')}`);
  if (stats.crashFailures > MAX_KILLED)
    problems.push(`${stats.crashFailures} requests failed with the killed worker (at most ${MAX_KILLED})`);
  if (restarts !== 1) problems.push(`nv_inference_instance_restarts for soak_b is ${restarts}, expected 1`);
  if (cyclesDone < opts.cycles) problems.push(`only ${cyclesDone} of ${opts.cycles} load/unload cycles ran`);
  if (exitCode !== 0) problems.push(`the server exited with ${exitCode} after SIGTERM`);
  const { middle, end } = samples as { middle: Sample; end: Sample };
  if (end.rssMiB > middle.rssMiB * BOUNDS.rssRatio + BOUNDS.rssSlackMiB)
    problems.push(`RSS grew from ${middle.rssMiB} to ${end.rssMiB} MiB`);
  if (end.threads > middle.threads + BOUNDS.threads) problems.push(`threads grew from ${middle.threads} to ${end.threads}`);
  if (end.fds > middle.fds + BOUNDS.fds) problems.push(`open fds grew from ${middle.fds} to ${end.fds}`);
  for (const p of problems) console.log(`soak: FAIL ${p}`);
  if (problems.length) console.log(`--- server output (last 3000 characters) ---\n${server.output().slice(-3000)}`);
  else console.log('soak: PASS');
  rmSync(dir, { recursive: true, force: true });
  return problems.length ? 1 : 0;
}

process.exit(await main());
