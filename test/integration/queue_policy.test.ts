// The dynamic batcher's queue policy seen through both front-ends: a full queue answers
// UNAVAILABLE at once (HTTP 503 / gRPC UNAVAILABLE), a request whose own `timeout` expires in
// the queue fails the same way, and the statistics and metrics count them as failures.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImageClassifier } from '../../tools/onnx/models.js';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { binaryBody, get, inferBinary, request } from '../helpers/http.js';
import { waitPending as waitPendingOn } from '../helpers/metrics.js';
import { makeRepo, type Repo, slowClassifier } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';

const image = (n: number): Buffer => Buffer.from(new Float32Array(n * 3 * 224 * 224).fill(0.25).buffer);

describe('queue policy over HTTP and gRPC', () => {
  let repo: Repo;
  let server: ServerHandle;
  let client: GrpcClient;

  const stats = async () => (await get(server.url, '/v2/models/slowq/stats')).json().model_stats[0];
  const waitPending = (n: number): Promise<void> => waitPendingOn(server, 'slowq', n);
  /** A long execution (batch 16 on one thread) that keeps the single instance busy. */
  const long = () =>
    inferBinary(server.url, 'slowq', [{ name: 'INPUT', datatype: 'FP32', shape: [16, 3, 224, 224], raw: image(16) }], {
      binaryOutput: true,
    });
  const one = (parameters: Record<string, unknown> = {}) => {
    const { body, headerLength } = binaryBody([{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], raw: image(1) }], {
      parameters: { binary_data_output: true, ...parameters },
    });
    return request(server.url, 'POST', '/v2/models/slowq/infer', {
      headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': headerLength },
      body,
    });
  };

  beforeAll(async () => {
    repo = makeRepo([
      slowClassifier(
        'slowq',
        buildImageClassifier().onnx,
        `dynamic_batching {
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy { max_queue_size: 1 }
  priority_queue_policy {
    key: 1
    value: { allow_timeout_override: true timeout_action: REJECT max_queue_size: 8 }
  }
}
`,
      ),
    ]);
    server = await startServer(repo.dir);
    client = grpcClient(server.grpcAddress);
  });
  afterAll(async () => {
    client?.close();
    await server?.stop();
    repo?.cleanup();
  });

  it('a full queue answers 503 / UNAVAILABLE "Exceeds maximum queue size" at once; the queued request still runs', async () => {
    const before = await stats();
    const running = long();
    await waitPending(1);
    const queued = one();
    await waitPending(2);
    const t0 = Date.now();
    const rejected = await one();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(rejected.status).toBe(503);
    expect(rejected.json().error).toBe('Exceeds maximum queue size');
    const err = await client.error('ModelInfer', {
      model_name: 'slowq',
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224] }],
      raw_input_contents: [image(1)],
    });
    expect(err.code).toBe(status.UNAVAILABLE);
    expect(err.details).toBe('Exceeds maximum queue size');
    expect((await running).status).toBe(200);
    expect((await queued).status).toBe(200);
    const after = await stats();
    expect(after.inference_stats.fail.count - before.inference_stats.fail.count).toBe(2);
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(2);
    const metrics = (await get(`http://127.0.0.1:${server.metricsPort()}`, '/metrics')).text();
    expect(metrics).toMatch(/^nv_inference_request_failure\{model="slowq",version="1",reason="REJECTED"\} 2$/m);
  });

  it('a request timeout expiring in the queue answers 503 "Request timeout expired" and never executes', async () => {
    const before = await stats();
    const running = long();
    await waitPending(1);
    const timedOut = await one({ priority: 1, timeout: 2000 });
    expect(timedOut.status).toBe(503);
    expect(timedOut.json().error).toBe('Request timeout expired');
    expect((await running).status).toBe(200);
    const after = await stats();
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_stats.fail.count - before.inference_stats.fail.count).toBe(1);
  });

  it('a priority that is not a non-negative integer is refused', async () => {
    const res = await one({ priority: -1 });
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(/priority/);
  });
});
