/**
 * The gRPC ModelInfer codec in isolation, on one thread, with no network: main-thread µs and
 * heap bytes per request for `simple`'s request and response (2 × INT32 [1,16] in, 2 out), read
 * and written by proto-loader's generic codec (what grpc-js did before issue 16) against
 * src/frontends/grpc/infer_wire.ts. Both sides run the same infer_codec.ts in between, so the
 * difference is the wire layer alone. Rounds alternate the two, so a busy machine slows both alike.
 * Time is the main thread's own CPU time (/proc/self/task/PID/schedstat, ns, young-generation
 * collections included), not wall time.
 *
 *   npm run build && node dist/tools/bench/grpc_codec.js [--rounds 8] [--n 50000] [--stream]
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { decodeGrpcInfer, encodeGrpcInfer, type GrpcInferRequest } from '../../src/frontends/grpc/infer_codec.js';
import { readInferRequest, writeInferResponse, writeStreamResponse } from '../../src/frontends/grpc/infer_wire.js';
import { inferenceMethods, type Method } from '../../src/frontends/grpc/proto.js';
import type { InferResponse } from '../../src/kernel/types.js';

function methods(): { infer: Method; stream: Method } {
  const svc = inferenceMethods();
  return { infer: svc.ModelInfer!, stream: svc.ModelStreamInfer! };
}

/** simple's answer: the sum and difference as INT32 [1,16]. */
function answer(modelName: string): InferResponse {
  const data = (): Uint8Array => new Uint8Array(64);
  return {
    modelName,
    modelVersion: '1',
    id: '',
    outputs: [
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: data() },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data: data() },
    ],
  };
}

export interface CodecResult {
  way: 'proto-loader' | 'infer_wire';
  /** Main-thread CPU µs per request. */
  usPerRequest: number;
}

/** This thread's CPU time in ns (Linux). */
function threadCpuNs(): number {
  return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
}

function once(way: CodecResult['way'], m: { infer: Method; stream: Method }, bytes: Buffer, n: number, stream: boolean): CodecResult {
  const res = answer('simple');
  let sink = 0;
  const t0 = threadCpuNs();
  for (let i = 0; i < n; i++) {
    let out: Buffer;
    if (way === 'proto-loader') {
      const req = decodeGrpcInfer(m.infer.requestDeserialize(bytes) as GrpcInferRequest);
      sink += req.inputs.length;
      const enc = encodeGrpcInfer(res);
      if (stream) {
        enc.parameters = { ...enc.parameters, triton_final_response: { bool_param: true } };
        out = m.stream.responseSerialize({ error_message: '', infer_response: enc });
      } else out = m.infer.responseSerialize(enc);
    } else {
      const req = decodeGrpcInfer(readInferRequest(bytes));
      sink += req.inputs.length;
      const enc = encodeGrpcInfer(res);
      if (stream) {
        enc.parameters = { ...enc.parameters, triton_final_response: { bool_param: true } };
        out = writeStreamResponse({ error_message: '', infer_response: enc });
      } else out = writeInferResponse(enc);
    }
    sink += out.byteLength;
  }
  const t1 = threadCpuNs();
  if (sink < 0) console.log(sink);
  return { way, usPerRequest: (t1 - t0) / 1e3 / n };
}

export function run(rounds: number, n: number, stream: boolean): CodecResult[] {
  const m = methods();
  // The request perf_analyzer sends for simple (its outputs listed, as perf_analyzer does).
  const bytes = m.infer.requestSerialize({
    model_name: 'simple',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
    ],
    outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }],
    raw_input_contents: [Buffer.alloc(64, 1), Buffer.alloc(64, 2)],
  });
  const out: CodecResult[] = [];
  once('proto-loader', m, bytes, n / 10, stream);
  once('infer_wire', m, bytes, n / 10, stream);
  for (let r = 0; r < rounds; r++) {
    const order: CodecResult['way'][] = r % 2 ? ['infer_wire', 'proto-loader'] : ['proto-loader', 'infer_wire'];
    for (const way of order) out.push(once(way, m, bytes, n, stream));
  }
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const opt = (name: string, dflt: number): number => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : dflt;
  };
  const stream = args.includes('--stream');
  const results = run(opt('--rounds', 8), opt('--n', 50_000), stream);
  const median = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)] ?? Number.NaN;
  };
  for (const way of ['proto-loader', 'infer_wire'] as const) {
    const rs = results.filter((r) => r.way === way);
    const us = rs.map((r) => r.usPerRequest);
    console.log(
      `${stream ? 'ModelStreamInfer' : 'ModelInfer'} ${way.padEnd(12)} median ${median(us).toFixed(2)} µs/request (rounds: ${us.map((u) => u.toFixed(2)).join(' ')})`,
    );
  }
}
