/**
 * The HTTP protocol ceiling for small requests: a bare fastify server that answers
 * `POST /v2/models/simple/infer` (KServe v2 with Triton's binary tensor data extension) by
 * computing `simple`'s sum and difference inside the route handler. No queue, no worker
 * thread, no validation beyond what the sums need. It also serves the model metadata, config
 * and statistics routes perf_analyzer reads, so perf_analyzer drives it exactly as it drives
 * Serval.
 *
 *   node dist/tools/bench/bare_http.js [--port 0]   # prints "Started HTTPService at 0.0.0.0:PORT"
 */
import Fastify from 'fastify';
import { Counters, config, MODEL, metadata, parsePort, sumAndDiff, VERSION } from './simple_model.js';

interface JsonTensor {
  name: string;
  datatype?: string;
  shape?: number[];
  data?: unknown[];
  parameters?: { binary_data_size?: number; binary_data?: boolean };
}

interface InferHeader {
  id?: string;
  inputs?: JsonTensor[];
  outputs?: { name: string; parameters?: { binary_data?: boolean } }[];
  parameters?: { binary_data_output?: boolean };
}

const counters = new Counters();
const app = Fastify({ logger: false, bodyLimit: 64 * 1024 * 1024 });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

const json = (body: unknown) => JSON.stringify(body);
app.get('/v2/health/live', (_req, reply) => reply.code(200).send());
app.get('/v2/health/ready', (_req, reply) => reply.code(200).send());
app.get('/v2', (_req, reply) =>
  reply
    .header('content-type', 'application/json')
    .send(json({ name: 'bare-http', version: '0', extensions: ['binary_tensor_data', 'statistics'] })),
);
app.get(`/v2/models/${MODEL}`, (_req, reply) => reply.header('content-type', 'application/json').send(json(metadata())));
app.get(`/v2/models/${MODEL}/ready`, (_req, reply) => reply.code(200).send());
app.get(`/v2/models/${MODEL}/config`, (_req, reply) => reply.header('content-type', 'application/json').send(json(config())));
app.get(`/v2/models/${MODEL}/stats`, (_req, reply) =>
  reply.header('content-type', 'application/json').send(json({ model_stats: [counters.stats((n) => n)] })),
);

function flatInt32(data: unknown[]): Buffer {
  const flat = (data as unknown[]).flat(Infinity) as number[];
  const b = Buffer.allocUnsafe(flat.length * 4);
  flat.forEach((v, i) => {
    b.writeInt32LE(Number(v) | 0, i * 4);
  });
  return b;
}

function toJsonData(b: Buffer): number[] {
  const out: number[] = [];
  for (let o = 0; o < b.byteLength; o += 4) out.push(b.readInt32LE(o));
  return out;
}

app.post(`/v2/models/${MODEL}/infer`, (req, reply) => {
  const t0 = process.hrtime.bigint();
  const body = req.body as Buffer;
  const hdrLen = req.headers['inference-header-content-length'];
  const headerLength = hdrLen === undefined ? body.byteLength : Number(hdrLen);
  const header = JSON.parse(body.subarray(0, headerLength).toString('utf8')) as InferHeader;
  let offset = headerLength;
  const tensors = new Map<string, { shape: number[]; data: Buffer }>();
  for (const inp of header.inputs ?? []) {
    const size = inp.parameters?.binary_data_size;
    let data: Buffer;
    if (size !== undefined) {
      data = body.subarray(offset, offset + size);
      offset += size;
    } else {
      data = flatInt32(inp.data ?? []);
    }
    tensors.set(inp.name, { shape: inp.shape ?? [], data });
  }
  const a = tensors.get('INPUT0');
  const b = tensors.get('INPUT1');
  if (!a || !b)
    return reply
      .code(400)
      .header('content-type', 'application/json')
      .send(json({ error: 'INPUT0 and INPUT1 are required' }));
  const c0 = process.hrtime.bigint();
  let r: { sum: Buffer; diff: Buffer };
  try {
    r = sumAndDiff(a.data, b.data);
  } catch (e) {
    return reply
      .code(400)
      .header('content-type', 'application/json')
      .send(json({ error: (e as Error).message }));
  }
  const c1 = process.hrtime.bigint();

  const wanted = header.outputs?.length ? header.outputs : [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }];
  const binaryDefault = header.parameters?.binary_data_output ?? false;
  const outputs: Record<string, unknown>[] = [];
  const chunks: Buffer[] = [];
  for (const o of wanted) {
    const data = o.name === 'OUTPUT0' ? r.sum : o.name === 'OUTPUT1' ? r.diff : undefined;
    if (!data)
      return reply
        .code(400)
        .header('content-type', 'application/json')
        .send(json({ error: `unknown output '${o.name}'` }));
    const binary = (o as { parameters?: { binary_data?: boolean } }).parameters?.binary_data ?? binaryDefault;
    if (binary) {
      outputs.push({ name: o.name, datatype: 'INT32', shape: a.shape, parameters: { binary_data_size: data.byteLength } });
      chunks.push(data);
    } else {
      outputs.push({ name: o.name, datatype: 'INT32', shape: a.shape, data: toJsonData(data) });
    }
  }
  const head = Buffer.from(json({ id: header.id, model_name: MODEL, model_version: VERSION, outputs }));
  counters.record(a.shape[0] ?? 1, Number(process.hrtime.bigint() - t0), Number(c1 - c0));
  if (chunks.length === 0) return reply.header('content-type', 'application/json').send(head);
  return reply
    .header('inference-header-content-length', head.byteLength)
    .header('content-type', 'application/octet-stream')
    .send(Buffer.concat([head, ...chunks]));
});

app.setNotFoundHandler((req, reply) => {
  console.error(`bare-http: no route for ${req.method} ${req.url}`);
  reply
    .code(404)
    .header('content-type', 'application/json')
    .send(json({ error: `no route for ${req.method} ${req.url}` }));
});

const address = await app.listen({ host: '0.0.0.0', port: parsePort(process.argv.slice(2)) });
console.log(`Started HTTPService at 0.0.0.0:${new URL(address).port}`);
const stop = () => void app.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
