/**
 * Server memory for one large request: starts a fresh server per case (only identity_uint8
 * loaded, --http-max-input-size raised), sends one identity request of the given size over
 * HTTP binary, HTTP JSON or gRPC, checks the answer byte for byte, and reports the server's
 * peak RSS (VmHWM, which covers the instance worker threads) against the payload and the time
 * per MB. One case at a time: a 1.9 GB case needs several GB on the client side too.
 *
 *   npm run build
 *   node dist/tools/bench/large_request.js --size 64Mi --protocol http-binary,grpc [--server-args "..."]
 *
 * SERVAL_CLI=path/to/cli.js measures another build (a copy of dist from before a change).
 *
 * Sizes: bytes, or with Ki/Mi/Gi (binary) or K/M/G (decimal). Protocols: http-binary, http-json, grpc.
 * `--elements N` sends a BYTES tensor of N one-byte elements to identity_string instead (5N bytes
 * serialized; gRPC as bytes_contents, one protobuf field per element, as the issue measured).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadProtos } from '../../src/frontends/grpc/proto.js';

let MODEL = 'identity_uint8';

function root(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'proto', 'grpc_service.proto'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('large_request: cannot find the project root');
    dir = up;
  }
  return dir;
}

export function parseSize(s: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|K|M|G)?$/.exec(s.trim());
  if (!m) throw new Error(`bad size '${s}'`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
  return Math.round(Number(m[1]) * unit);
}

function status(pid: number): { rss: number; hwm: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

interface Server {
  child: ChildProcess;
  httpPort: number;
  grpcPort: number;
}

async function startServer(maxInput: number, extra: string[]): Promise<Server> {
  const dir = root();
  const args = [
    process.env.SERVAL_CLI ?? path.join(dir, 'dist/src/cli.js'),
    '--model-repository',
    path.join(dir, 'model_repository'),
    '--model-control-mode',
    'explicit',
    '--load-model',
    MODEL,
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
    '--allow-metrics',
    'false',
    '--http-max-input-size',
    String(maxInput),
    ...extra,
  ];
  const child = spawn(process.execPath, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  // A killed benchmark must not leave a server holding gigabytes behind.
  const kill = (): void => void child.kill('SIGKILL');
  process.once('exit', kill);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => process.exit(1));
  child.once('exit', () => process.off('exit', kill));
  let out = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => process.stderr.write(d));
  return new Promise<Server>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 120_000);
    child.once('exit', (code) => reject(new Error(`server exited (${code}):\n${out}`)));
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const h = /Started HTTPService at [^:\s]+:(\d+)/.exec(out);
      const g = /Started GRPCInferenceService at [^:\s]+:(\d+)/.exec(out);
      if (h && g) {
        clearTimeout(timer);
        resolve({ child, httpPort: Number(h[1]), grpcPort: Number(g[1]) });
      }
    });
  });
}

async function stopServer(s: Server): Promise<void> {
  if (s.child.exitCode !== null) return;
  const exited = new Promise((r) => s.child.once('exit', r));
  s.child.kill('SIGTERM');
  const t = setTimeout(() => s.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(t);
}

function payload(size: number, small: boolean): Buffer {
  const b = Buffer.allocUnsafe(size);
  // A repeating pattern (digits only for JSON, to keep the text short) so a misplaced byte shows.
  const period = small ? 10 : 251;
  const block = Buffer.alloc(1 << 16);
  for (let i = 0; i < block.length; i++) block[i] = i % period;
  for (let o = 0; o < size; o += block.length - (block.length % period)) block.copy(b, o, 0, block.length - (block.length % period));
  return b;
}

function post(
  port: number,
  headers: Record<string, string | number>,
  chunks: Buffer[],
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: `/v2/models/${MODEL}/infer`, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    for (const c of chunks) req.write(c);
    req.end();
  });
}

async function httpBinary(port: number, data: Buffer): Promise<Buffer> {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, data.length], parameters: { binary_data_size: data.length } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }),
  );
  const res = await post(
    port,
    {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': header.length,
      'content-length': header.length + data.length,
    },
    [header, data],
  );
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.body.subarray(0, 500).toString()}`);
  const hl = Number(res.headers['inference-header-content-length']);
  return res.body.subarray(hl);
}

async function httpJson(port: number, data: Buffer): Promise<Buffer> {
  // Digits 0-9 only: "d," per element, built without a JS array of numbers.
  const text = Buffer.allocUnsafe(data.length * 2);
  for (let i = 0; i < data.length; i++) {
    text[2 * i] = 48 + data[i]!;
    text[2 * i + 1] = 44;
  }
  const head = Buffer.from(`{"inputs":[{"name":"INPUT0","datatype":"UINT8","shape":[1,${data.length}],"data":[`);
  const tail = Buffer.from(']}]}');
  const body = [head, text.subarray(0, text.length - 1), tail];
  const len = body.reduce((a, b) => a + b.length, 0);
  const res = await post(port, { 'content-type': 'application/json', 'content-length': len }, body);
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.body.subarray(0, 500).toString()}`);
  const doc = JSON.parse(res.body.toString('utf8')) as { outputs: { data: number[] }[] };
  return Buffer.from(Uint8Array.from(doc.outputs[0]!.data));
}

function grpcClient(port: number): grpc.Client & Record<string, grpc.MethodDefinition<unknown, unknown> | unknown> {
  const def = loadProtos(['grpc_service.proto']);
  const pkg = grpc.loadPackageDefinition(def) as unknown as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } };
  return new pkg.inference.GRPCInferenceService(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': 2 ** 31 - 1,
    'grpc.max_send_message_length': 2 ** 31 - 1,
  }) as never;
}

async function grpcInfer(port: number, data: Buffer): Promise<Buffer> {
  const client = grpcClient(port);
  try {
    const fn = (
      client as unknown as Record<string, (r: unknown, cb: (e: grpc.ServiceError | null, r?: unknown) => void) => void>
    ).ModelInfer!.bind(client);
    const res = await new Promise<{ raw_output_contents: Buffer[] }>((resolve, reject) =>
      fn(
        { model_name: MODEL, inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, data.length] }], raw_input_contents: [data] },
        (e, r) => (e ? reject(new Error(`gRPC ${e.code}: ${e.details}`)) : resolve(r as { raw_output_contents: Buffer[] })),
      ),
    );
    return res.raw_output_contents[0]!;
  } finally {
    client.close();
  }
}

export interface CaseResult {
  protocol: string;
  size: number;
  ok: boolean;
  error?: string;
  seconds: number;
  baseRss: number;
  peakRss: number;
  /** RSS 2 s after the answer: what the request left behind (memory pools, garbage not yet collected). */
  afterRss: number;
}

/** The server's peak RSS now, and its RSS once it has had 2 s to settle. */
async function settle(pid: number): Promise<{ peak: number; after: number }> {
  const peak = status(pid).hwm;
  await new Promise((r) => setTimeout(r, 2000));
  return { peak, after: status(pid).rss };
}

/** N one-byte BYTES elements, serialized (4-byte length + byte each). */
function bytesPayload(n: number): Buffer {
  const b = Buffer.alloc(5 * n);
  for (let i = 0; i < n; i++) {
    b[5 * i] = 1;
    b[5 * i + 4] = 97 + (i % 26);
  }
  return b;
}

async function bytesCase(protocol: string, n: number, server: Server): Promise<boolean> {
  const data = bytesPayload(n);
  if (protocol === 'grpc') {
    const client = grpcClient(server.grpcPort);
    try {
      const elements: Buffer[] = [];
      for (let i = 0; i < n; i++) elements.push(data.subarray(5 * i + 4, 5 * i + 5));
      const fn = (
        client as unknown as Record<string, (r: unknown, cb: (e: grpc.ServiceError | null, r?: unknown) => void) => void>
      ).ModelInfer!.bind(client);
      const res = await new Promise<{ raw_output_contents: Buffer[] }>((resolve, reject) =>
        fn(
          { model_name: MODEL, inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, n], contents: { bytes_contents: elements } }] },
          (e, r) => (e ? reject(new Error(`gRPC ${e.code}: ${e.details}`)) : resolve(r as { raw_output_contents: Buffer[] })),
        ),
      );
      return res.raw_output_contents[0]!.equals(data);
    } finally {
      client.close();
    }
  }
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, n], parameters: { binary_data_size: data.length } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }),
  );
  const res = await post(
    server.httpPort,
    {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': header.length,
      'content-length': header.length + data.length,
    },
    [header, data],
  );
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.body.subarray(0, 500).toString()}`);
  return res.body.subarray(Number(res.headers['inference-header-content-length'])).equals(data);
}

async function runCase(protocol: string, size: number, extra: string[], elements = 0): Promise<CaseResult> {
  if (elements) {
    MODEL = 'identity_string';
    const server = await startServer(Math.max(5 * elements + (1 << 20), 64 << 20), extra);
    const pid = server.child.pid!;
    await new Promise((r) => setTimeout(r, 500));
    const base = status(pid);
    const t0 = process.hrtime.bigint();
    let ok = false;
    let error: string | undefined;
    try {
      ok = await bytesCase(protocol, elements, server);
      if (!ok) error = 'answer differs';
    } catch (e) {
      error = (e as Error).message;
    }
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const { peak, after } = await settle(pid);
    await stopServer(server);
    return { protocol, size: 5 * elements, ok, ...(error && { error }), seconds, baseRss: base.rss, peakRss: peak, afterRss: after };
  }
  const data = payload(size, protocol === 'http-json');
  const server = await startServer(Math.max(size * (protocol === 'http-json' ? 3 : 1) + (1 << 20), 64 << 20), extra);
  const pid = server.child.pid!;
  await new Promise((r) => setTimeout(r, 500));
  const base = status(pid);
  const t0 = process.hrtime.bigint();
  let ok = false;
  let error: string | undefined;
  try {
    const out =
      protocol === 'grpc'
        ? await grpcInfer(server.grpcPort, data)
        : protocol === 'http-json'
          ? await httpJson(server.httpPort, data)
          : await httpBinary(server.httpPort, data);
    ok = out.length === data.length && out.equals(data);
    if (!ok) error = `answer differs (${out.length} bytes back)`;
  } catch (e) {
    error = (e as Error).message;
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  let peak = 0;
  let after = 0;
  try {
    ({ peak, after } = await settle(pid));
  } catch {
    error = `${error ?? ''} (server gone: ${server.child.exitCode ?? server.child.signalCode})`;
  }
  await stopServer(server);
  return { protocol, size, ok, ...(error && { error }), seconds, baseRss: base.rss, peakRss: peak, afterRss: after };
}

const MiB = 2 ** 20;

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opt = (name: string, dflt: string): string => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : dflt;
  };
  const sizes = opt('size', '64Mi').split(',').map(parseSize);
  const protocols = opt('protocol', 'http-binary,http-json,grpc').split(',');
  const extra = opt('server-args', '').split(' ').filter(Boolean);
  const elements = parseSize(opt('elements', '0'));
  console.log(
    '| protocol | payload | ok | time (s) | ms/MB | base RSS (MiB) | peak RSS (MiB) | peak ÷ payload | (peak − base) ÷ payload | RSS 2 s after (MiB) |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const size of elements ? [5 * elements] : sizes) {
    for (const p of protocols) {
      const r = await runCase(p, size, extra, elements);
      const mb = size / 1e6;
      console.log(
        `| ${r.protocol} | ${(size / MiB).toFixed(0)} MiB | ${r.ok ? 'yes' : `NO: ${r.error}`} | ${r.seconds.toFixed(2)} | ${((r.seconds * 1000) / mb).toFixed(2)} | ` +
          `${(r.baseRss / MiB).toFixed(0)} | ${(r.peakRss / MiB).toFixed(0)} | ${(r.peakRss / size).toFixed(2)} | ${((r.peakRss - r.baseRss) / size).toFixed(2)} | ${(r.afterRss / MiB).toFixed(0)} |`,
      );
    }
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
