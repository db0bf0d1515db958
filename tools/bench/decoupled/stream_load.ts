/**
 * The decoupled section's streaming load generator: CONCURRENCY workers each keep one request to
 * a decoupled model in flight, over a gRPC ModelStreamInfer stream (the project's Node client,
 * InferStream.inferEach; one stream per worker on one channel) or HTTP generate_stream
 * (Server-Sent Events over node:http, one keep-alive connection per worker), and time every
 * response as it arrives. After a warm-up, a window of DURATION ms is measured: responses that
 * arrive in it give responses/s; requests sent in it give the time to the first response and the
 * times between responses. Prints one JSON line (workloads.ts StreamResult).
 *
 *   node dist/tools/bench/decoupled/stream_load.js --proto grpc|sse --url HOST:PORT \
 *     --workload repeat32|text10 --concurrency N [--warmup-ms 1000] [--duration-ms 3000]
 */
import http from 'node:http';
import { GrpcClient, ServalClientError } from '../../../src/client/index.js';
import { type Dist, dist, type StreamProto, type StreamResult, type StreamWorkload, streamWorkload } from './workloads.js';

interface Args {
  proto: StreamProto;
  url: string;
  workload: StreamWorkload;
  concurrency: number;
  warmupMs: number;
  durationMs: number;
}

function parseArgs(argv: string[]): Args {
  const m = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) m.set(argv[i]!.replace(/^--/, ''), argv[i + 1] ?? '');
  const proto = m.get('proto');
  if (proto !== 'grpc' && proto !== 'sse') throw new Error('--proto grpc|sse');
  const url = m.get('url');
  if (!url) throw new Error('--url HOST:PORT');
  return {
    proto,
    url,
    workload: streamWorkload(m.get('workload') ?? 'repeat32'),
    concurrency: Number(m.get('concurrency') ?? 1),
    warmupMs: Number(m.get('warmup-ms') ?? 1000),
    durationMs: Number(m.get('duration-ms') ?? 3000),
  };
}

/** One request's outcome: when it was sent, when each data response arrived, and its error. */
interface Outcome {
  sent: number;
  times: number[];
  error?: string;
}

class Recorder {
  readonly ttfr: number[] = [];
  readonly gap: number[] = [];
  readonly total: number[] = [];
  requests = 0;
  responses = 0;
  failed = 0;
  firstError: string | undefined;

  constructor(
    readonly from: number,
    readonly to: number,
    readonly expected: number,
  ) {}

  add(o: Outcome): void {
    for (const t of o.times) if (t >= this.from && t < this.to) this.responses++;
    if (o.sent < this.from || o.sent >= this.to) return;
    if (o.error !== undefined || o.times.length !== this.expected) {
      this.failed++;
      this.firstError ??= o.error ?? `${o.times.length} data responses, expected ${this.expected}`;
      return;
    }
    this.requests++;
    const t = o.times;
    this.ttfr.push(t[0]! - o.sent);
    this.total.push(t[t.length - 1]! - o.sent);
    for (let i = 1; i < t.length; i++) this.gap.push(t[i]! - t[i - 1]!);
  }
}

async function grpcWorkers(a: Args, rec: Recorder): Promise<void> {
  const client = new GrpcClient(a.url);
  const inputs = a.workload.grpcInputs();
  const worker = async (): Promise<void> => {
    const stream = client.stream();
    while (performance.now() < rec.to) {
      const o: Outcome = { sent: performance.now(), times: [] };
      try {
        // The empty final response tells the client the request is over (Triton sends the final flag alone otherwise).
        await stream.inferEach(a.workload.model, inputs, { enableEmptyFinalResponse: true }, (r) => {
          const t = performance.now();
          if (r instanceof ServalClientError) o.error ??= r.message;
          else if (r.outputs.length > 0) o.times.push(t);
        });
      } catch (e) {
        o.error ??= e instanceof Error ? e.message : String(e);
        rec.add(o);
        break; // the stream is gone; a new one each time would only spin
      }
      rec.add(o);
    }
    stream.end();
  };
  await Promise.all(Array.from({ length: a.concurrency }, worker));
  client.close();
}

async function sseWorkers(a: Args, rec: Recorder): Promise<void> {
  const [host, port] = a.url.split(':');
  const agent = new http.Agent({ keepAlive: true, maxSockets: a.concurrency });
  const body = a.workload.sseBody();
  const path = `/v2/models/${a.workload.model}/generate_stream`;
  const once = (): Promise<Outcome> =>
    new Promise((resolve) => {
      const o: Outcome = { sent: performance.now(), times: [] };
      const req = http.request(
        {
          host,
          port: Number(port),
          method: 'POST',
          path,
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          if (res.statusCode !== 200) o.error = `HTTP ${res.statusCode}`;
          res.setEncoding('utf8');
          let buf = '';
          res.on('data', (chunk: string) => {
            // Events that arrive in one chunk share its arrival time: that is what the client sees.
            const t = performance.now();
            buf += chunk;
            for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
              const ev = buf.slice(0, i);
              buf = buf.slice(i + 2);
              if (!ev.startsWith('data:')) continue;
              if (ev.includes('"error"')) o.error ??= ev.slice(0, 300);
              else o.times.push(t);
            }
          });
          res.on('end', () => resolve(o));
          res.on('error', (e) => {
            o.error ??= e.message;
            resolve(o);
          });
        },
      );
      req.on('error', (e) => {
        o.error ??= e.message;
        resolve(o);
      });
      req.end(body);
    });
  const worker = async (): Promise<void> => {
    while (performance.now() < rec.to) rec.add(await once());
  };
  await Promise.all(Array.from({ length: a.concurrency }, worker));
  agent.destroy();
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const rec = new Recorder(t0 + a.warmupMs, t0 + a.warmupMs + a.durationMs, a.workload.responses);
  await (a.proto === 'grpc' ? grpcWorkers(a, rec) : sseWorkers(a, rec));
  const cpu = process.cpuUsage(cpu0);
  const windowS = a.durationMs / 1000;
  const d = (xs: number[]): Dist => dist(xs);
  const out: StreamResult = {
    proto: a.proto,
    workload: a.workload.id,
    concurrency: a.concurrency,
    windowS,
    requests: rec.requests,
    responses: rec.responses,
    responsesPerS: rec.responses / windowS,
    requestsPerS: rec.requests / windowS,
    ttfr: d(rec.ttfr),
    gap: d(rec.gap),
    total: d(rec.total),
    failed: rec.failed,
    ...(rec.firstError !== undefined && { firstError: rec.firstError }),
    cpuS: (cpu.user + cpu.system) / 1e6,
  };
  console.log(JSON.stringify(out));
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    process.exit(1);
  },
);
