// ModelStreamInfer end to end on the built server: stream requests share the dynamic batcher with
// unary ones, a cancelled stream drops its queued request, and shutdown neither waits for an idle
// open stream nor cuts off a stream's in-flight request. Progress is read from the statistics and
// the pending-request metric, never from timing.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImageClassifier } from '../../tools/onnx/models.js';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { openInferStream, type StreamReply } from '../helpers/grpc_stream.js';
import { get, inferBinary } from '../helpers/http.js';
import { waitPending } from '../helpers/metrics.js';
import { ROOT } from '../helpers/paths.js';
import { makeRepo, type Repo, slowClassifier } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { range, rng } from '../helpers/tensors.js';

/**
 * The bundled ranker_mlp (dynamic batching), its batching policy made deterministic: a batch goes
 * when 4 requests are queued, and a lone request would wait 30 s. So one execution of batch 4
 * happens only if the 2 stream and 2 unary requests below meet in the same queue.
 */
const RANKER_CONFIG = `name: "ranker4"
platform: "onnxruntime_onnx"
max_batch_size: 64
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 512 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 30000000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
`;

const image = (n: number): Buffer => Buffer.from(new Float32Array(n * 3 * 224 * 224).fill(0.5).buffer);
const features = (seed: number): Buffer => {
  const r = rng(seed);
  return Buffer.from(new Float32Array(range(512, () => r() * 2 - 1)).buffer);
};
interface BatchStat {
  batch_size: number;
  compute_infer: { count: number };
}

const f32 = (b: Buffer): number[] => Array.from(new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)));

function repo(): Repo {
  return makeRepo([
    { name: 'ranker4', config: RANKER_CONFIG, versions: { 1: readFileSync(path.join(ROOT, 'model_repository/ranker_mlp/1/model.onnx')) } },
    slowClassifier('slow', buildImageClassifier().onnx),
  ]);
}

const rankerRequest = (id: string, seed: number): Record<string, unknown> => ({
  model_name: 'ranker4',
  id,
  inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 512] }],
  raw_input_contents: [features(seed)],
});
const slowRequest = (id: string, n: number): Record<string, unknown> => ({
  model_name: 'slow',
  id,
  inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [n, 3, 224, 224] }],
  raw_input_contents: [image(n)],
});
const longHttp = (server: ServerHandle) =>
  inferBinary(server.url, 'slow', [{ name: 'INPUT', datatype: 'FP32', shape: [16, 3, 224, 224], raw: image(16) }], {
    binaryOutput: true,
  });

function expectOk(r: StreamReply, id: string): void {
  expect(r.error_message).toBe('');
  expect(r.infer_response?.id).toBe(id);
  expect(r.infer_response?.parameters.triton_final_response?.bool_param).toBe(true);
}

describe('ModelStreamInfer on the real server', () => {
  let fixture: Repo;
  let server: ServerHandle;
  let client: GrpcClient;
  const stats = async (model: string) => (await get(server.url, `/v2/models/${model}/stats`)).json().model_stats[0];

  beforeAll(async () => {
    fixture = repo();
    server = await startServer(fixture.dir);
    client = grpcClient(server.grpcAddress);
  });
  afterAll(async () => {
    client?.close();
    await server?.stop();
    fixture?.cleanup();
  });

  it('stream requests are batched by the dynamic batcher together with unary ones', async () => {
    const before = await stats('ranker4');
    const stream = openInferStream(server.grpcAddress);
    try {
      // The same two inputs over the stream and over unary ModelInfer.
      stream.send(rankerRequest('s1', 1));
      stream.send(rankerRequest('s2', 2));
      const unary = await Promise.all([1, 2].map((seed) => client.call('ModelInfer', rankerRequest(`u${seed}`, seed))));
      const replies = await stream.waitFor(2);
      expectOk(replies[0]!, 's1');
      expectOk(replies[1]!, 's2');
      expect(unary.map((u) => u.id)).toEqual(['u1', 'u2']);
      const score = (raw: Buffer[]): number[] => f32(raw[0]!);
      const streamed = replies.map((r) => score(r.infer_response!.raw_output_contents));
      expect(streamed).toEqual(unary.map((u) => score(u.raw_output_contents)));
      expect(streamed[0]).not.toEqual(streamed[1]);

      // One execution of batch 4: the stream's requests and the unary ones met in one queue.
      const after = await stats('ranker4');
      expect(after.inference_count - before.inference_count).toBe(4);
      expect(after.execution_count - before.execution_count).toBe(1);
      const count = (s: { batch_stats: BatchStat[] }, size: number): number =>
        s.batch_stats.find((b) => b.batch_size === size)?.compute_infer.count ?? 0;
      expect(count(after, 4) - count(before, 4)).toBe(1);
      expect(after.batch_stats.map((b: BatchStat) => b.batch_size)).toEqual([4]);
    } finally {
      stream.end();
      expect((await stream.status).code).toBe(status.OK);
      stream.close();
    }
  });

  it('a request queued on a stream is dropped, never executed, when the stream is cancelled', async () => {
    const before = await stats('slow');
    const running = longHttp(server);
    await waitPending(server, 'slow', 1, 'the long request executing');
    const stream = openInferStream(server.grpcAddress);
    try {
      stream.send(slowRequest('queued', 1));
      await waitPending(server, 'slow', 2, 'the stream request queued behind the long one');
      stream.cancel();
      expect((await stream.status).code).toBe(status.CANCELLED);
      await waitPending(server, 'slow', 1, 'the cancelled request dropped while the long one still runs');
      expect((await running).status).toBe(200);
      await waitPending(server, 'slow', 0, 'all done');
      const after = await stats('slow');
      expect(after.execution_count - before.execution_count).toBe(1);
      expect(after.inference_count - before.inference_count).toBe(16);
      expect(after.inference_stats.fail.count - before.inference_stats.fail.count).toBe(1);
      expect(stream.replies).toEqual([]);
    } finally {
      stream.close();
    }
  });
});

describe('shutdown with open streams', () => {
  let fixture: Repo;
  let server: ServerHandle;

  beforeAll(async () => {
    fixture = repo();
    // A stream that held shutdown would run into this timeout and exit 1.
    server = await startServer(fixture.dir, ['--exit-timeout-secs', '60']);
  });
  afterAll(async () => {
    await server?.stop(1000);
    fixture?.cleanup();
  });

  it('SIGTERM: an idle open stream ends at once, a busy one after its response; exit 0', async () => {
    const idle = openInferStream(server.grpcAddress);
    const busy = openInferStream(server.grpcAddress);
    try {
      idle.send(slowRequest('warm', 1));
      expectOk((await idle.waitFor(1))[0]!, 'warm');
      // The idle client neither half-closes nor cancels.
      busy.send(slowRequest('long', 16));
      await waitPending(server, 'slow', 1, 'the stream request executing');
      const stopped = server.stop(15_000);
      const [r] = await busy.waitFor(1);
      expectOk(r!, 'long');
      expect(r!.infer_response?.outputs[0]?.shape).toEqual(['16', '11']);
      expect((await busy.status).code).toBe(status.OK);
      expect((await idle.status).code).toBe(status.OK);
      // null: still running 15 s later (killed); 1: the exit timeout ran out.
      expect(await stopped).toBe(0);
      expect(server.stdout()).toContain('Received SIGTERM');
    } finally {
      idle.close();
      busy.close();
    }
  });
});
