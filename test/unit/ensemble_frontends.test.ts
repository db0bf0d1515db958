// The repository unload call's parameters reach the core as the client sent them, on both
// front-ends (unload_dependents: HTTP JSON boolean, gRPC bool_param); the core checks them.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';
import { type GrpcClient, grpcClient } from '../helpers/grpc.js';

function recordingCore() {
  const unloads: [string, Record<string, unknown> | undefined][] = [];
  const core = {
    ...fakeCore(),
    unloadModel: async (name: string, parameters?: Record<string, unknown>) => void unloads.push([name, parameters]),
  };
  return { core, unloads };
}

describe('unload parameters', () => {
  const { core, unloads } = recordingCore();
  let app: FastifyInstance;
  let server: GrpcServer;
  let grpc: GrpcClient;
  beforeAll(async () => {
    app = buildHttpServer(core, capturedLogger().log, { maxInputSize: 1024 });
    server = await startGrpcServer(core, capturedLogger().log, '127.0.0.1', 0);
    grpc = grpcClient(`127.0.0.1:${server.port}`);
  });
  afterAll(async () => {
    grpc?.close();
    await server?.shutdown();
    await app?.close();
  });

  it('HTTP passes the body parameters, none for an empty body', async () => {
    unloads.length = 0;
    const with_ = await app.inject({
      method: 'POST',
      url: '/v2/repository/models/pipeline/unload',
      payload: { parameters: { unload_dependents: true } },
    });
    expect(with_.statusCode).toBe(200);
    const without = await app.inject({ method: 'POST', url: '/v2/repository/models/pipeline/unload' });
    expect(without.statusCode).toBe(200);
    expect(unloads).toStrictEqual([
      ['pipeline', { unload_dependents: true }],
      ['pipeline', {}],
    ]);
  });

  it('gRPC passes bool_param as a boolean', async () => {
    unloads.length = 0;
    await grpc.call('RepositoryModelUnload', { model_name: 'pipeline', parameters: { unload_dependents: { bool_param: true } } });
    await grpc.call('RepositoryModelUnload', { model_name: 'pipeline' });
    expect(unloads).toStrictEqual([
      ['pipeline', { unload_dependents: true }],
      ['pipeline', {}],
    ]);
  });
});
