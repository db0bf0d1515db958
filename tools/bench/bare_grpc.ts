/**
 * The gRPC protocol ceiling for small requests: a bare @grpc/grpc-js server for
 * inference.GRPCInferenceService (proto/grpc_service.proto, loaded with the same
 * proto-loader options as Serval's front-end) whose ModelInfer handler computes `simple`'s
 * sum and difference from raw_input_contents inside the handler and answers with
 * raw_output_contents. ModelMetadata, ModelConfig and ModelStatistics are served so
 * perf_analyzer drives it exactly as it drives Serval.
 *
 *   node dist/tools/bench/bare_grpc.js [--port 0]   # prints "Started GRPCInferenceService at 0.0.0.0:PORT"
 */

import * as grpc from '@grpc/grpc-js';
import { loadProtos } from '../../src/frontends/grpc/proto.js';
import { Counters, config, MODEL, metadata, parsePort, sumAndDiff, VERSION } from './simple_model.js';

interface InferRequest {
  model_name: string;
  id?: string;
  inputs?: { name: string; datatype: string; shape: (string | number)[] }[];
  outputs?: { name: string }[];
  raw_input_contents?: Buffer[];
}

const def = loadProtos(['grpc_service.proto']);
const pkg = grpc.loadPackageDefinition(def) as unknown as { inference: { GRPCInferenceService: grpc.ServiceClientConstructor } };

const counters = new Counters();
// BARE_GRPC_COUNT_CANCELLED=1: count grpc-js 'cancelled' events (printed at exit), e.g. to see
// whether they also fire for calls that were already answered. Off by default (a listener per
// call is not free).
const countCancelled = process.env.BARE_GRPC_COUNT_CANCELLED === '1';
let cancelledBefore = 0;
let cancelledAfterAnswer = 0;
const MAX = 2 ** 31 - 1;
const server = new grpc.Server({ 'grpc.max_receive_message_length': MAX, 'grpc.max_send_message_length': MAX });

type Cb = grpc.sendUnaryData<unknown>;
type Call = grpc.ServerUnaryCall<unknown, unknown>;
const fail = (cb: Cb, code: grpc.status, message: string) =>
  cb({ code, details: message, message, name: 'Error', metadata: new grpc.Metadata() });
const checkName = (call: Call, cb: Cb): boolean => {
  const name = (call.request as { name?: string }).name ?? '';
  if (name !== MODEL && name !== '') {
    fail(cb, grpc.status.NOT_FOUND, `Request for unknown model: '${name}' is not found`);
    return false;
  }
  return true;
};

server.addService(pkg.inference.GRPCInferenceService.service, {
  ServerLive: (_call: Call, cb: Cb) => cb(null, { live: true }),
  ServerReady: (_call: Call, cb: Cb) => cb(null, { ready: true }),
  ModelReady: (call: Call, cb: Cb) => cb(null, { ready: (call.request as { name?: string }).name === MODEL }),
  ServerMetadata: (_call: Call, cb: Cb) => cb(null, { name: 'bare-grpc', version: '0', extensions: ['statistics'] }),
  ModelMetadata: (call: Call, cb: Cb) => checkName(call, cb) && cb(null, metadata()),
  ModelConfig: (call: Call, cb: Cb) => checkName(call, cb) && cb(null, { config: config() }),
  ModelStatistics: (call: Call, cb: Cb) => checkName(call, cb) && cb(null, { model_stats: [counters.stats((n) => String(n))] }),
  ModelInfer: (call: grpc.ServerUnaryCall<InferRequest, unknown>, cb: Cb) => {
    const t0 = process.hrtime.bigint();
    const r = call.request;
    if (countCancelled) {
      let answered = false;
      call.once('cancelled', () => (answered ? cancelledAfterAnswer++ : cancelledBefore++));
      const inner = cb;
      cb = (err, value) => {
        answered = true;
        inner(err, value);
      };
    }
    const raws = r.raw_input_contents ?? [];
    const inputs = r.inputs ?? [];
    const i0 = inputs.findIndex((x) => x.name === 'INPUT0');
    const i1 = inputs.findIndex((x) => x.name === 'INPUT1');
    if (r.model_name !== MODEL) return fail(cb, grpc.status.NOT_FOUND, `Request for unknown model: '${r.model_name}' is not found`);
    if (i0 < 0 || i1 < 0 || !raws[i0] || !raws[i1]) {
      return fail(cb, grpc.status.INVALID_ARGUMENT, 'INPUT0 and INPUT1 are required in raw_input_contents');
    }
    const c0 = process.hrtime.bigint();
    let out: { sum: Buffer; diff: Buffer };
    try {
      out = sumAndDiff(raws[i0]!, raws[i1]!);
    } catch (e) {
      return fail(cb, grpc.status.INVALID_ARGUMENT, (e as Error).message);
    }
    const c1 = process.hrtime.bigint();
    const shape = inputs[i0]!.shape.map(Number);
    const wanted = r.outputs?.length ? r.outputs.map((o) => o.name) : ['OUTPUT0', 'OUTPUT1'];
    const res = {
      model_name: MODEL,
      model_version: VERSION,
      id: r.id ?? '',
      outputs: wanted.map((name) => ({ name, datatype: 'INT32', shape })),
      raw_output_contents: wanted.map((name) => (name === 'OUTPUT1' ? out.diff : out.sum)),
    };
    counters.record(shape[0] ?? 1, Number(process.hrtime.bigint() - t0), Number(c1 - c0));
    cb(null, res);
  },
});

const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync(`0.0.0.0:${parsePort(process.argv.slice(2))}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
    err ? reject(err) : resolve(p),
  ),
);
console.log(`Started GRPCInferenceService at 0.0.0.0:${port}`);
const stop = () => {
  console.log(`bare-grpc: ${counters.count} calls answered`);
  if (countCancelled) {
    console.log(
      `bare-grpc: ${counters.count} calls answered; 'cancelled' events: ${cancelledAfterAnswer} after the answer, ${cancelledBefore} before it`,
    );
  }
  server.tryShutdown(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
