// Restricted APIs (src/frontends/restricted.ts): the flag syntax and its errors, the two
// classification tables (complete for every route and method the front-ends serve), and the
// HTTP and gRPC front-ends in-process, with and without the header or metadata, over a fake core.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import {
  API_GROUPS,
  grpcApiGroup,
  httpApiGroup,
  parseRestrictions,
  type Restrictions,
  restrictedAddService,
  restrictHttp,
} from '../../src/frontends/restricted.js';
import { parseArgs, UsageError } from '../../src/options.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';
import { type CallError, HEALTH, INFERENCE, streamed, unary } from '../helpers/grpc_metadata.js';
import { PROTO_DIR } from '../helpers/paths.js';

const FORMAT = (flag: string, arg: string): string => `--${flag} option format is '<config name>:<setting>=<value>'. Got ${arg}`;

describe('--http-restricted-api / --grpc-restricted-protocol syntax', () => {
  it('parses groups of APIs, each with its key and value; the value may hold ":" and "="', () => {
    const m = parseRestrictions(['model-repository,statistics:Admin-Key=a:b=c', 'inference:infer-key=v'], 'http-restricted-api');
    expect(Object.fromEntries(m)).toEqual({
      'model-repository': { key: 'admin-key', value: 'a:b=c' },
      statistics: { key: 'admin-key', value: 'a:b=c' },
      inference: { key: 'infer-key', value: 'v' },
    });
  });

  it('prefixes gRPC keys with triton-grpc-protocol-', () => {
    const m = parseRestrictions(['health:k=v'], 'grpc-restricted-protocol');
    expect(m.get('health')).toEqual({ key: 'triton-grpc-protocol-k', value: 'v' });
  });

  it('knows exactly Triton’s nine groups', () => {
    const all = parseRestrictions([`${API_GROUPS.join(',')}:k=v`], 'http-restricted-api');
    expect([...all.keys()].sort()).toEqual(
      ['health', 'metadata', 'inference', 'shared-memory', 'model-config', 'model-repository', 'statistics', 'trace', 'logging'].sort(),
    );
  });

  it('refuses a malformed value with Triton’s format text', () => {
    for (const arg of ['health', 'health:k', ':k=v', 'health:=v', 'health:k=', 'health=k:v']) {
      expect(() => parseRestrictions([arg], 'http-restricted-api'), arg).toThrow(FORMAT('http-restricted-api', arg));
    }
    expect(() => parseRestrictions(['health:k'], 'grpc-restricted-protocol')).toThrow(FORMAT('grpc-restricted-protocol', 'health:k'));
  });

  it('refuses an unknown group and a group named twice, in one value or across values (Triton’s texts)', () => {
    expect(() => parseRestrictions(['model-reposit,health:k1=v1'], 'http-restricted-api')).toThrow(
      "unknown restricted api 'model-reposit'",
    );
    expect(() => parseRestrictions(['model-reposit:k1=v1'], 'grpc-restricted-protocol')).toThrow(
      "unknown restricted protocol 'model-reposit'",
    );
    expect(() => parseRestrictions(['model-repository,health:k1=v1', 'metadata,health:k2=v2'], 'http-restricted-api')).toThrow(
      "restricted api 'health' can not be specified in multiple config groups",
    );
    expect(() => parseRestrictions(['inference,inference:k=v'], 'grpc-restricted-protocol')).toThrow(
      "restricted protocol 'inference' can not be specified in multiple config groups",
    );
  });

  it('the flags repeat on the command line, and bad ones are usage errors with Triton’s text', () => {
    const opts = parseArgs([
      '--model-repository=/m',
      '--http-restricted-api=model-repository:admin-key=admin-value',
      '--http-restricted-api',
      'inference,metadata:infer-key=infer-value',
      '--grpc-restricted-protocol=health:k=v',
    ]);
    expect(opts.httpRestrictedApi).toEqual(['model-repository:admin-key=admin-value', 'inference,metadata:infer-key=infer-value']);
    expect(opts.grpcRestrictedProtocol).toEqual(['health:k=v']);
    expect(parseArgs(['--model-repository=/m']).httpRestrictedApi).toEqual([]);
    const bad = () =>
      parseArgs(['--model-repository=/m', '--grpc-restricted-protocol=health:a=b', '--grpc-restricted-protocol=health:c=d']);
    expect(bad).toThrow(UsageError);
    expect(bad).toThrow("restricted protocol 'health' can not be specified in multiple config groups");
  });

  it('a YAML settings file gives them as lists (secrets off the command line); the command line replaces them', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-restricted-'));
    const file = path.join(dir, 'serval.yaml');
    writeFileSync(file, 'model-repository: [/m]\nhttp-restricted-api: ["model-repository:admin-key=s3cret", "inference:k=v"]\n');
    try {
      expect(parseArgs(['--config-file', file]).httpRestrictedApi).toEqual(['model-repository:admin-key=s3cret', 'inference:k=v']);
      expect(parseArgs(['--config-file', file, '--http-restricted-api=health:k=v']).httpRestrictedApi).toEqual(['health:k=v']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Every route of a fastify instance, from printRoutes' tree (one path segment per line). */
function routes(app: FastifyInstance): string[] {
  const out: string[] = [];
  const prefixes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    // A segment may continue its parent's without a slash: /generate, then _stream.
    const m = /^([│├└─\s]*)(\S+)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    prefixes.length = depth;
    const full = (prefixes[depth - 1] ?? '') + m[2];
    prefixes[depth] = full;
    if (m[3]) out.push(full);
  }
  return out;
}

describe('the classification tables', () => {
  it('puts every HTTP route the front-end registers in a group', async () => {
    const app = buildHttpServer(fakeCore(), capturedLogger().log, { maxInputSize: 1024 });
    await app.ready();
    const all = routes(app);
    // The parse found the whole tree: one route per line with methods, full paths rebuilt.
    const lines = app.printRoutes({ commonPrefix: false }).split('\n');
    expect(all.length).toBe(lines.filter((l) => / \([A-Z, ]+\)$/.test(l)).length);
    expect(all).toEqual(expect.arrayContaining(['/v2', '/v2/health/live', '/v2/models/:model/versions/:version/infer']));
    for (const r of all) expect(httpApiGroup(r), r).toBeDefined();
    await app.close();
  });

  it('classifies Triton’s URLs like Triton (http_server.cc), including routes other extensions add', () => {
    const cases: Record<string, string> = {
      '/v2/health/live': 'health',
      '/v2/health/ready': 'health',
      '/v2/models/m/ready': 'health',
      '/v2/models/m/versions/2/ready': 'health',
      '/v2': 'metadata',
      '/v2/models/m': 'metadata',
      '/v2/models/m/versions/2': 'metadata',
      '/v2/models/m/infer': 'inference',
      '/v2/models/m/versions/2/infer': 'inference',
      '/v2/models/m/generate_stream': 'inference',
      '/v2/models/m/config': 'model-config',
      '/v2/models/stats': 'statistics',
      '/v2/models/m/stats': 'statistics',
      '/v2/models/m/versions/2/stats': 'statistics',
      '/v2/trace/setting': 'trace',
      '/v2/models/m/trace/setting': 'trace',
      '/v2/logging': 'logging',
      '/v2/systemsharedmemory/status': 'shared-memory',
      '/v2/systemsharedmemory/region/r/register': 'shared-memory',
      '/v2/cudasharedmemory/region/r/unregister': 'shared-memory',
      '/v2/repository/index': 'model-repository',
      '/v2/repository/models/m/load': 'model-repository',
      '/v2/repository/models/m/unload': 'model-repository',
    };
    for (const [url, group] of Object.entries(cases)) expect(httpApiGroup(url), url).toBe(group);
    for (const url of ['/', '/v2/', '/v2/models', '/v2/models/m/versions/2/trace/setting', '/metrics', '/v2/repository/models/m/delete']) {
      expect(httpApiGroup(url), url).toBeUndefined();
    }
  });

  it('puts every method of GRPCInferenceService and grpc.health.v1.Health (from the proto files) in a group', () => {
    const def = protoLoader.loadSync(['grpc_service.proto', 'health.proto'], { includeDirs: [PROTO_DIR], keepCase: true });
    const methods = [
      ...Object.keys(def['inference.GRPCInferenceService'] as protoLoader.ServiceDefinition),
      ...Object.keys(def['grpc.health.v1.Health'] as protoLoader.ServiceDefinition),
    ];
    expect(methods).toEqual(expect.arrayContaining(['ModelInfer', 'ModelStreamInfer', 'LogSettings', 'Check']));
    for (const m of methods) expect(grpcApiGroup(m), m).toBeDefined();
    expect(grpcApiGroup('ModelInfer')).toBe('inference');
    expect(grpcApiGroup('ModelStreamInfer')).toBe('inference');
    expect(grpcApiGroup('RepositoryModelLoad')).toBe('model-repository');
    expect(grpcApiGroup('Check')).toBe('health');
    expect(grpcApiGroup('NoSuchMethod')).toBeUndefined();
    expect(grpcApiGroup('toString')).toBeUndefined();
  });
});

const HTTP_RESTRICTIONS: Restrictions = parseRestrictions(
  ['model-repository:admin-key=admin-value', 'inference,metadata:infer-key=infer-value'],
  'http-restricted-api',
);
const ADMIN = { 'admin-key': 'admin-value' };
const INFER = { 'infer-key': 'infer-value' };

describe('restricted HTTP APIs (in-process)', () => {
  const core = fakeCore();
  let app: FastifyInstance;
  beforeAll(() => {
    app = buildHttpServer(core, capturedLogger().log, { maxInputSize: 1024, restrictions: HTTP_RESTRICTIONS });
  });
  afterAll(async () => {
    await app.close();
  });

  const refused = (key: string) => ({ error: `This API is restricted, expecting header '${key}'` });

  it('refuses a restricted API without its header, or with a wrong value: 403 and Triton’s text', async () => {
    for (const headers of [{}, { 'infer-key': 'wrong' }, ADMIN]) {
      const res = await app.inject({ method: 'GET', url: '/v2', headers });
      expect(res.statusCode).toBe(403);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json()).toEqual(refused('infer-key'));
    }
    const repo = await app.inject({ method: 'POST', url: '/v2/repository/index', headers: INFER });
    expect(repo.statusCode).toBe(403);
    expect(repo.json()).toEqual(refused('admin-key'));
  });

  it('serves it with the header (the name in any case); other groups need none', async () => {
    const meta = await app.inject({ method: 'GET', url: '/v2', headers: { 'Infer-Key': 'infer-value' } });
    expect(meta.statusCode).toBe(200);
    expect(meta.json()).toMatchObject({ name: 'fake' });
    const index = await app.inject({ method: 'POST', url: '/v2/repository/index', headers: ADMIN });
    expect(index.statusCode).toBe(200);
    expect(index.json()).toEqual([]);
    expect((await app.inject({ method: 'GET', url: '/v2/health/live' })).statusCode).toBe(200);
  });

  it('refuses an inference request before reading it: the core never sees it', async () => {
    const body = JSON.stringify({ inputs: [] });
    const before = core.requests.length;
    const res = await app.inject({ method: 'POST', url: '/v2/models/m/infer', headers: { 'content-type': 'application/json' }, body });
    expect(res.statusCode).toBe(403);
    expect(core.requests.length).toBe(before);
    // With the header it reaches the core, which does not know the model.
    const ok = await app.inject({
      method: 'POST',
      url: '/v2/models/m/infer',
      headers: { 'content-type': 'application/json', ...INFER },
      body,
    });
    expect(ok.statusCode).toBe(404);
    expect(core.requests.length).toBe(before + 1);
  });

  it('classifies the route fastify matched, so a percent-encoded path is restricted too', async () => {
    // fastify decodes %69 and routes this to the repository index: a check of the raw URL would
    // let it through.
    const res = await app.inject({ method: 'POST', url: '/v2/repos%69tory/index' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual(refused('admin-key'));
    const ok = await app.inject({ method: 'POST', url: '/v2/repos%69tory/index', headers: ADMIN });
    expect(ok.statusCode).toBe(200);
  });

  it('answers unknown routes with 404, header or not', async () => {
    expect((await app.inject({ method: 'GET', url: '/v2/nothing' })).statusCode).toBe(404);
  });

  it('refuses a route no group claims (fail closed) but leaves servers without restrictions alone', async () => {
    const build = (restrictions?: Restrictions) => {
      const a = Fastify();
      restrictHttp(a, restrictions);
      a.get('/v2/brand/new', () => 'served');
      return a;
    };
    const guarded = build(HTTP_RESTRICTIONS);
    const res = await guarded.inject({ method: 'GET', url: '/v2/brand/new', headers: { ...ADMIN, ...INFER } });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe("This API is restricted: route '/v2/brand/new' belongs to no API group");
    const open = build(undefined);
    expect((await open.inject({ method: 'GET', url: '/v2/brand/new' })).body).toBe('served');
    await guarded.close();
    await open.close();
  });
});

// ---------------------------------------------------------------------------------------------
// gRPC

const GRPC_RESTRICTIONS = parseRestrictions(['health:health-key=h', 'inference,model-repository:infer-key=i'], 'grpc-restricted-protocol');
const HEALTH_MD = { 'triton-grpc-protocol-health-key': 'h' };
const INFER_MD = { 'triton-grpc-protocol-infer-key': 'i' };
const refusedDetails = (key: string) => `This protocol is restricted, expecting header 'triton-grpc-protocol-${key}'`;

describe('restricted gRPC protocols (in-process, GRPCInferenceService over a fake core)', () => {
  const core = fakeCore();
  let server: GrpcServer;
  let client: grpc.Client;
  beforeAll(async () => {
    server = await startGrpcServer(core, capturedLogger().log, '127.0.0.1', 0, { restrictions: GRPC_RESTRICTIONS });
    client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
  });
  afterAll(() => {
    client?.close();
    server?.server.forceShutdown();
  });

  it('refuses a restricted method without its metadata, or with a wrong value: UNAVAILABLE and Triton’s text', async () => {
    const wrong: Record<string, string>[] = [{}, { 'triton-grpc-protocol-health-key': 'wrong' }, { 'health-key': 'h' }, INFER_MD];
    for (const meta of wrong) {
      const { error } = await unary(client, INFERENCE, 'ServerLive', {}, meta);
      expect(error?.code, JSON.stringify(meta)).toBe(grpc.status.UNAVAILABLE);
      expect(error?.details).toBe(refusedDetails('health-key'));
    }
    // The standard health check belongs to the health group too.
    const check = await unary(client, HEALTH, 'Check', { service: '' });
    expect(check.error?.code).toBe(grpc.status.UNAVAILABLE);
    expect(check.error?.details).toBe(refusedDetails('health-key'));
  });

  it('serves it with the metadata; other groups need none', async () => {
    expect((await unary(client, INFERENCE, 'ServerLive', {}, HEALTH_MD)).reply).toEqual({ live: true });
    expect((await unary(client, HEALTH, 'Check', { service: '' }, HEALTH_MD)).reply).toEqual({ status: 'SERVING' });
    expect((await unary(client, INFERENCE, 'ServerMetadata', {})).reply).toMatchObject({ name: 'fake' });
  });

  it('refuses ModelInfer before the core sees it; with the metadata it reaches the core', async () => {
    const before = core.requests.length;
    const req = { model_name: 'm', inputs: [] };
    const refused = await unary(client, INFERENCE, 'ModelInfer', req, HEALTH_MD);
    expect(refused.error?.code).toBe(grpc.status.UNAVAILABLE);
    expect(refused.error?.details).toBe(refusedDetails('infer-key'));
    expect(core.requests.length).toBe(before);
    const reached = await unary(client, INFERENCE, 'ModelInfer', req, INFER_MD);
    expect(reached.error?.code).toBe(grpc.status.NOT_FOUND);
    expect(core.requests.length).toBe(before + 1);
  });
});

describe('restrictedAddService guards streaming handlers and fails closed', () => {
  let server: grpc.Server;
  let client: grpc.Client;
  let reached: string[];
  beforeAll(async () => {
    reached = [];
    server = new grpc.Server();
    const add = restrictedAddService(server, GRPC_RESTRICTIONS);
    // A server-streaming handler (Health/Watch) and a bidi one (ModelStreamInfer), written here so
    // the wrapper is tested whatever the front-end implements.
    add(HEALTH as unknown as grpc.ServiceDefinition, {
      Watch: (call: grpc.ServerWritableStream<unknown, unknown>) => {
        reached.push('Watch');
        call.write({ status: 'SERVING' });
        call.end();
      },
    });
    add(INFERENCE as unknown as grpc.ServiceDefinition, {
      ModelStreamInfer: (call: grpc.ServerDuplexStream<{ id: string }, unknown>) => {
        reached.push('ModelStreamInfer');
        call.on('data', (r: { id: string }) => call.write({ error_message: '', infer_response: { id: r.id } }));
        call.on('end', () => call.end());
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  });
  afterAll(() => {
    client?.close();
    server?.forceShutdown();
  });

  it('ends a server-streaming call with UNAVAILABLE without its metadata, and streams with it', async () => {
    const refused = await streamed(client, HEALTH, 'Watch', { service: '' });
    expect(refused.error?.code).toBe(grpc.status.UNAVAILABLE);
    expect(refused.error?.details).toBe(refusedDetails('health-key'));
    expect(refused.replies).toEqual([]);
    expect(reached).toEqual([]);
    const ok = await streamed(client, HEALTH, 'Watch', { service: '' }, HEALTH_MD);
    expect(ok.error).toBeUndefined();
    expect(ok.replies).toEqual([{ status: 'SERVING' }]);
  });

  it('ends a bidi-streaming call with UNAVAILABLE without its metadata, and streams with it', async () => {
    reached.length = 0;
    const refused = await streamed(client, INFERENCE, 'ModelStreamInfer', { id: 'a' });
    expect(refused.error?.code).toBe(grpc.status.UNAVAILABLE);
    expect(refused.error?.details).toBe(refusedDetails('infer-key'));
    expect(reached).toEqual([]);
    const ok = await streamed(client, INFERENCE, 'ModelStreamInfer', { id: 'a' }, INFER_MD);
    expect(ok.error).toBeUndefined();
    expect(ok.replies).toMatchObject([{ infer_response: { id: 'a' } }]);
  });

  it('refuses a method no group claims', async () => {
    const s = new grpc.Server();
    const svc = { Odd: { ...INFERENCE.ServerLive!, path: '/x.Y/Odd', originalName: 'odd' } } as unknown as grpc.ServiceDefinition;
    restrictedAddService(s, GRPC_RESTRICTIONS)(svc, { Odd: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, { live: true }) });
    const port = await new Promise<number>((resolve, reject) =>
      s.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    const c = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const odd = svc.Odd!;
    const err = await new Promise<CallError | null>((resolve) =>
      c.makeUnaryRequest(odd.path, odd.requestSerialize, odd.responseDeserialize, {}, (e) => resolve(e)),
    );
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(err?.details).toBe("This protocol is restricted: method 'Odd' belongs to no API group");
    c.close();
    s.forceShutdown();
  });
});
