// The built server started with --http-restricted-api / --grpc-restricted-protocol, end to end:
// restricted groups need their header (HTTP) or metadata (gRPC), the others and the metrics port
// do not; bad flags stop it at start-up with tritonserver's messages. Also a raw binary request
// (Inference-Header-Content-Length: 0) through ONNX Runtime.
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { INFERENCE, unary } from '../helpers/grpc_metadata.js';
import { get, request, splitBinaryResponse } from '../helpers/http.js';
import { runServerToExit, type ServerHandle, startServer } from '../helpers/server.js';

const repo = inject('modelRepository');
let server: ServerHandle;
let client: grpc.Client;

const ADMIN = { 'admin-key': 'admin-value' };
const INFER = { 'infer-key': 'infer-value' };
const GRPC_HEALTH = { 'triton-grpc-protocol-health-key': 'h' };
const GRPC_INFER = { 'triton-grpc-protocol-infer-key': 'i' };

beforeAll(async () => {
  server = await startServer(repo, [
    '--http-restricted-api',
    'model-repository:admin-key=admin-value',
    '--http-restricted-api=inference,metadata:infer-key=infer-value',
    '--grpc-restricted-protocol=health:health-key=h',
    '--grpc-restricted-protocol',
    'inference,model-repository:infer-key=i',
  ]);
  client = new grpc.Client(server.grpcAddress, grpc.credentials.createInsecure());
});

afterAll(async () => {
  client?.close();
  await server?.stop();
});

describe('HTTP', () => {
  it('a restricted API answers 403 with Triton’s text without its header, and works with it', async () => {
    const refused = await request(server.url, 'POST', '/v2/repository/index', { headers: INFER });
    expect(refused.status).toBe(403);
    expect(refused.json()).toEqual({ error: "This API is restricted, expecting header 'admin-key'" });
    const index = await request(server.url, 'POST', '/v2/repository/index', { headers: ADMIN });
    expect(index.status).toBe(200);
    expect(index.json().map((r: { name: string }) => r.name)).toContain('simple');

    expect((await get(server.url, '/v2/models/simple')).status).toBe(403);
    const meta = await request(server.url, 'GET', '/v2/models/simple', { headers: INFER });
    expect(meta.status).toBe(200);
    expect(meta.json().name).toBe('simple');
  });

  it('unrestricted groups and the metrics port need no header', async () => {
    expect((await get(server.url, '/v2/health/ready')).status).toBe(200);
    expect((await get(server.url, '/v2/models/simple/config')).status).toBe(200);
    const metrics = await get(`http://127.0.0.1:${server.metricsPort()}`, '/metrics');
    expect(metrics.status).toBe(200);
  });

  it('a raw binary request runs on the model’s only input and answers binary', async () => {
    const data = Buffer.from(new Float32Array([1.5, -2, 3.25]).buffer);
    const body = { 'inference-header-content-length': '0', ...INFER };
    expect(
      (
        await request(server.url, 'POST', '/v2/models/identity_fp32/infer', {
          headers: { 'inference-header-content-length': '0' },
          body: data,
        })
      ).status,
    ).toBe(403);
    const res = await request(server.url, 'POST', '/v2/models/identity_fp32/infer', { headers: body, body: data });
    expect(res.status, res.text().slice(0, 300)).toBe(200);
    const { doc, binary } = splitBinaryResponse(res.body, Number(res.headers['inference-header-content-length']));
    expect(doc.outputs).toEqual([{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } }]);
    expect(binary.get('OUTPUT0')!.equals(data)).toBe(true);
  });
});

describe('gRPC', () => {
  it('a restricted protocol fails UNAVAILABLE with Triton’s text without its metadata, and works with it', async () => {
    const refused = await unary(client, INFERENCE, 'ServerLive', {});
    expect(refused.error?.code).toBe(grpc.status.UNAVAILABLE);
    expect(refused.error?.details).toBe("This protocol is restricted, expecting header 'triton-grpc-protocol-health-key'");
    expect((await unary(client, INFERENCE, 'ServerLive', {}, GRPC_HEALTH)).reply).toEqual({ live: true });

    const index = await unary(client, INFERENCE, 'RepositoryIndex', {}, GRPC_HEALTH);
    expect(index.error?.code).toBe(grpc.status.UNAVAILABLE);
    const ok = await unary(client, INFERENCE, 'RepositoryIndex', {}, GRPC_INFER);
    expect(ok.error).toBeUndefined();
  });

  it('groups restricted only over HTTP are open over gRPC', async () => {
    const meta = await unary(client, INFERENCE, 'ModelMetadata', { name: 'simple' });
    expect(meta.error).toBeUndefined();
    expect(meta.reply?.name).toBe('simple');
  });
});

describe('start-up', () => {
  it('refuses an unknown group and a group named twice, with tritonserver’s messages', async () => {
    const unknown = await runServerToExit(repo, ['--http-restricted-api=model-reposit,health:k1=v1']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("unknown restricted api 'model-reposit'");
    const twice = await runServerToExit(repo, [
      '--grpc-restricted-protocol=model-repository,health:k1=v1',
      '--grpc-restricted-protocol=metadata,health:k2=v2',
    ]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toContain("restricted protocol 'health' can not be specified in multiple config groups");
  });
});
