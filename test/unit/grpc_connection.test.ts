// src/frontends/grpc/connection.ts through startGrpcServer: TLS and mutual TLS (certificates made
// with the openssl CLI), gRPC core's ping abuse policy (GOAWAY ENHANCE_YOUR_CALM "too_many_pings"
// after --grpc-http2-max-ping-strikes early pings) and --grpc-max-connection-age (GOAWAY), seen
// from a raw HTTP/2 client. test/conformance/test_grpc_connection.py drives TLS with tritonclient.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { GrpcKeepalive } from '../../src/frontends/grpc/connection.js';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';
import { packageDefinition } from '../helpers/grpc.js';

const KEEPALIVE: GrpcKeepalive = {
  timeMs: 7200000,
  timeoutMs: 20000,
  permitWithoutCalls: false,
  minRecvPingIntervalMs: 300000,
  maxPingStrikes: 2,
};

let server: GrpcServer | undefined;
afterEach(async () => {
  await server?.shutdown();
  server = undefined;
});

interface GoAway {
  code: number;
  data: string;
}

/** Connects a raw HTTP/2 client; `goaway` resolves with the server's GOAWAY (or undefined at close without one). */
async function connect(port: number): Promise<{ session: http2.ClientHttp2Session; goaway: Promise<GoAway | undefined> }> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  await new Promise((resolve) => session.once('connect', resolve));
  const goaway = new Promise<GoAway | undefined>((resolve) => {
    session.once('goaway', (code: number, _last: number, data?: Buffer) => resolve({ code, data: data?.toString() ?? '' }));
    session.once('close', () => resolve(undefined));
  });
  return { session, goaway };
}

const ping = (session: http2.ClientHttp2Session): Promise<boolean> =>
  new Promise((resolve) => {
    if (!session.ping((err) => resolve(!err))) resolve(false);
  });

describe('ping abuse policy', () => {
  it('answers the third early ping past 2 strikes with GOAWAY ENHANCE_YOUR_CALM "too_many_pings"', async () => {
    server = await startGrpcServer(fakeCore(), capturedLogger().log, '127.0.0.1', 0, { keepalive: KEEPALIVE });
    const { session, goaway } = await connect(server.port);
    // The first ping is never early; the next two are strikes 1 and 2, still tolerated.
    for (let i = 0; i < 3; i++) expect(await ping(session), `ping ${i}`).toBe(true);
    expect(session.closed || session.destroyed).toBe(false);
    void ping(session);
    expect(await goaway).toEqual({ code: http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, data: 'too_many_pings' });
    session.destroy();
  });

  it('tolerates any number of pings with --grpc-http2-max-ping-strikes 0', async () => {
    server = await startGrpcServer(fakeCore(), capturedLogger().log, '127.0.0.1', 0, { keepalive: { ...KEEPALIVE, maxPingStrikes: 0 } });
    const { session } = await connect(server.port);
    for (let i = 0; i < 8; i++) expect(await ping(session), `ping ${i}`).toBe(true);
    expect(session.closed || session.destroyed).toBe(false);
    session.destroy();
  });

  it('tolerates pings as far apart as --grpc-http2-min-recv-ping-interval-without-data asks (keepalive permitted without calls)', async () => {
    server = await startGrpcServer(fakeCore(), capturedLogger().log, '127.0.0.1', 0, {
      keepalive: { ...KEEPALIVE, permitWithoutCalls: true, minRecvPingIntervalMs: 20 },
    });
    const { session } = await connect(server.port);
    for (let i = 0; i < 5; i++) {
      expect(await ping(session), `ping ${i}`).toBe(true);
      await new Promise((r) => setTimeout(r, 40));
    }
    expect(session.closed || session.destroyed).toBe(false);
    session.destroy();
  });
});

describe('--grpc-max-connection-age', () => {
  it('ends an old connection with GOAWAY', async () => {
    server = await startGrpcServer(fakeCore(), capturedLogger().log, '127.0.0.1', 0, {
      keepalive: { ...KEEPALIVE, maxConnectionAgeMs: 200, maxConnectionAgeGraceMs: 100 },
    });
    const { session, goaway } = await connect(server.port);
    const got = await goaway;
    expect(got?.code).toBe(http2.constants.NGHTTP2_NO_ERROR);
    session.destroy();
  });

  it('leaves connections open without it (Triton: no limit by default)', async () => {
    server = await startGrpcServer(fakeCore(), capturedLogger().log, '127.0.0.1', 0, { keepalive: KEEPALIVE });
    const { session, goaway } = await connect(server.port);
    const early = await Promise.race([goaway, new Promise((r) => setTimeout(() => r('open'), 500))]);
    expect(early).toBe('open');
    session.destroy();
  });
});

describe('TLS', () => {
  let dir: string;
  const file = (name: string): string => join(dir, name);
  const openssl = (...args: string[]): void => {
    execFileSync('openssl', args, { stdio: 'ignore' });
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'serval-tls-'));
    // A CA, a server certificate for localhost/127.0.0.1 and a client certificate, both signed by it.
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=serval-test-ca',
      '-keyout',
      file('ca.key'),
      '-out',
      file('ca.crt'),
    );
    writeFileSync(file('server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
    for (const who of ['server', 'client']) {
      openssl(
        'req',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-subj',
        `/CN=${who === 'server' ? 'localhost' : 'serval-client'}`,
        '-keyout',
        file(`${who}.key`),
        '-out',
        file(`${who}.csr`),
      );
      const ext = who === 'server' ? ['-extfile', file('server.ext')] : [];
      openssl(
        'x509',
        '-req',
        '-in',
        file(`${who}.csr`),
        '-CA',
        file('ca.crt'),
        '-CAkey',
        file('ca.key'),
        '-CAcreateserial',
        '-days',
        '2',
        '-out',
        file(`${who}.crt`),
        ...ext,
      );
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  type Live = { live: boolean };
  const serverLive = (port: number, creds: grpc.ChannelCredentials): Promise<Live> => {
    const pkg = grpc.loadPackageDefinition(packageDefinition()) as unknown as {
      inference: { GRPCInferenceService: new (a: string, c: grpc.ChannelCredentials) => grpc.Client };
    };
    const client = new pkg.inference.GRPCInferenceService(`localhost:${port}`, creds) as grpc.Client & {
      ServerLive(req: object, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: Live) => void): void;
    };
    return new Promise<Live>((resolve, reject) =>
      client.ServerLive({}, { deadline: Date.now() + 5000 }, (e, r) => {
        client.close();
        if (e) reject(e);
        else resolve(r);
      }),
    ).finally(() => client.close());
  };
  const ca = (): Buffer => readFileSync(file('ca.crt'));

  it('serves over TLS with --grpc-use-ssl; a plaintext client gets nothing', async () => {
    const tls = { serverCert: file('server.crt'), serverKey: file('server.key'), rootCert: '', mutual: false };
    server = await startGrpcServer(fakeCore(), capturedLogger().log, '127.0.0.1', 0, { tls });
    expect(await serverLive(server.port, grpc.credentials.createSsl(ca()))).toEqual({ live: true });
    await expect(serverLive(server.port, grpc.credentials.createInsecure())).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
  });

  it('with --grpc-use-ssl-mutual, serves clients whose certificate the root certificate signed and refuses others', async () => {
    const tls = { serverCert: file('server.crt'), serverKey: file('server.key'), rootCert: file('ca.crt'), mutual: true };
    server = await startGrpcServer(fakeCore(), capturedLogger().log, '127.0.0.1', 0, { tls });
    const withCert = grpc.credentials.createSsl(ca(), readFileSync(file('client.key')), readFileSync(file('client.crt')));
    expect(await serverLive(server.port, withCert)).toEqual({ live: true });
    await expect(serverLive(server.port, grpc.credentials.createSsl(ca()))).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
  });

  it('refuses to start without the certificate files, naming the flag', async () => {
    const log = capturedLogger().log;
    await expect(
      startGrpcServer(fakeCore(), log, '127.0.0.1', 0, {
        tls: { serverCert: file('nope.crt'), serverKey: file('server.key'), rootCert: '', mutual: false },
      }),
    ).rejects.toThrow(`--grpc-server-cert: cannot read '${file('nope.crt')}': ENOENT`);
    await expect(
      startGrpcServer(fakeCore(), log, '127.0.0.1', 0, {
        tls: { serverCert: file('server.crt'), serverKey: file('server.key'), rootCert: '', mutual: true },
      }),
    ).rejects.toThrow('--grpc-root-cert must name a PEM file when --grpc-use-ssl is true');
  });
});

describe('flow control', () => {
  it('lets a client send megabytes before waiting for a WINDOW_UPDATE (not HTTP/2’s 64 KiB), in frames of up to 1 MiB', async () => {
    server = await startGrpcServer(fakeCore(), capturedLogger().log, '127.0.0.1', 0, {});
    const { session } = await connect(server.port);
    // The server's SETTINGS follow its preface; remoteSettings change when they arrive.
    await expect.poll(() => session.remoteSettings.initialWindowSize).toBe(8 << 20);
    expect(session.remoteSettings.maxFrameSize).toBe(1 << 20);
    // The connection-level window: what the client may send on all its streams together.
    await expect.poll(() => session.state.remoteWindowSize).toBe(16 << 20);
    session.close();
  });
});
