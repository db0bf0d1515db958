/**
 * What grpc-js itself costs per call: the same `simple` service as tools/bench/bare_grpc.ts, with
 * the same messages (proto-loader's codec; ModelInfer via src/frontends/grpc/infer_wire.ts), but
 * spoken over node:http2 directly — gRPC's length-prefixed frames, `grpc-status` trailers — with
 * no grpc-js server underneath. Side by side with bare_grpc.js (tools/bench/ab.sh-style), the
 * difference is grpc-js' per-call machinery (interceptors, metadata, call objects). A measuring
 * tool only: no compression, deadlines, cancellation or message limits.
 *
 *   node dist/tools/bench/bare_http2.js [--port 0]   # prints "Started GRPCInferenceService at 0.0.0.0:PORT"
 */
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { readInferRequest, writeInferResponse } from '../../src/frontends/grpc/infer_wire.js';
import { inferenceMethods, type Method } from '../../src/frontends/grpc/proto.js';
import { Counters, config, MODEL, metadata, parsePort, sumAndDiff, VERSION } from './simple_model.js';

const service = inferenceMethods();
const byPath = new Map(Object.entries(service).map(([name, m]) => [m.path, { name, m }]));
const counters = new Counters();

class Status extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** One unary answer: the message in a 5-byte-prefixed frame, then the status in trailers. */
function answer(stream: http2.ServerHttp2Stream, body: Buffer | undefined, err?: Status): void {
  const trailers = { 'grpc-status': String(err ? err.code : 0), ...(err && { 'grpc-message': encodeURIComponent(err.message) }) };
  if (!body) {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...trailers }, { endStream: true });
    return;
  }
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(trailers));
  const frame = Buffer.allocUnsafe(5 + body.byteLength);
  frame[0] = 0;
  frame.writeUInt32BE(body.byteLength, 1);
  frame.set(body, 5);
  stream.end(frame);
}

function infer(bytes: Buffer): Buffer {
  const t0 = process.hrtime.bigint();
  const r = readInferRequest(bytes);
  if (r.wireError) throw new Status(grpc.status.INVALID_ARGUMENT, r.wireError.message);
  if (r.model_name !== MODEL) throw new Status(grpc.status.NOT_FOUND, `Request for unknown model: '${r.model_name}' is not found`);
  const i0 = r.inputs.findIndex((x) => x.name === 'INPUT0');
  const i1 = r.inputs.findIndex((x) => x.name === 'INPUT1');
  const a = r.raw_input_contents[i0];
  const b = r.raw_input_contents[i1];
  if (!a || !b) throw new Status(grpc.status.INVALID_ARGUMENT, 'INPUT0 and INPUT1 are required in raw_input_contents');
  const c0 = process.hrtime.bigint();
  const out = sumAndDiff(a, b);
  const c1 = process.hrtime.bigint();
  const shape = r.inputs[i0]!.shape.map(Number);
  const wanted = r.outputs.length ? r.outputs.map((o) => o.name) : ['OUTPUT0', 'OUTPUT1'];
  const res = writeInferResponse({
    model_name: MODEL,
    model_version: VERSION,
    id: r.id,
    outputs: wanted.map((name) => ({ name, datatype: 'INT32', shape })),
    raw_output_contents: wanted.map((name) => (name === 'OUTPUT1' ? out.diff : out.sum)),
  });
  counters.record(shape[0] ?? 1, Number(process.hrtime.bigint() - t0), Number(c1 - c0));
  return res;
}

function handle(name: string, m: Method, bytes: Buffer): Buffer {
  if (name === 'ModelInfer') return infer(bytes);
  const req = m.requestDeserialize(bytes) as { name?: string };
  const known = (): void => {
    if (req.name !== MODEL && req.name !== '')
      throw new Status(grpc.status.NOT_FOUND, `Request for unknown model: '${req.name}' is not found`);
  };
  switch (name) {
    case 'ServerLive':
      return m.responseSerialize({ live: true });
    case 'ServerReady':
      return m.responseSerialize({ ready: true });
    case 'ModelReady':
      return m.responseSerialize({ ready: req.name === MODEL });
    case 'ServerMetadata':
      return m.responseSerialize({ name: 'bare-http2', version: '0', extensions: ['statistics'] });
    case 'ModelMetadata':
      known();
      return m.responseSerialize(metadata());
    case 'ModelConfig':
      known();
      return m.responseSerialize({ config: config() });
    case 'ModelStatistics':
      known();
      return m.responseSerialize({ model_stats: [counters.stats((n) => String(n))] });
    default:
      throw new Status(grpc.status.UNIMPLEMENTED, `method ${name} is not served`);
  }
}

const server = http2.createServer();
server.on('stream', (stream, headers) => {
  stream.on('error', () => undefined);
  const method = byPath.get(String(headers[':path']));
  if (!method) {
    answer(stream, undefined, new Status(grpc.status.UNIMPLEMENTED, `unknown method ${headers[':path']}`));
    return;
  }
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  stream.on('end', () => {
    const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    if (all.byteLength < 5 || all[0] !== 0 || all.readUInt32BE(1) !== all.byteLength - 5) {
      answer(stream, undefined, new Status(grpc.status.INTERNAL, 'expected one uncompressed message'));
      return;
    }
    try {
      answer(stream, handle(method.name, method.m, all.subarray(5)));
    } catch (e) {
      answer(stream, undefined, e instanceof Status ? e : new Status(grpc.status.INTERNAL, String(e)));
    }
  });
});
const port = await new Promise<number>((resolve) => {
  server.listen(parsePort(process.argv.slice(2)), '0.0.0.0', () => resolve((server.address() as { port: number }).port));
});
console.log(`Started GRPCInferenceService at 0.0.0.0:${port}`);
const stop = () => {
  console.log(`bare-http2: ${counters.count} calls answered`);
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
