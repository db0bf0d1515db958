// The built server's command line as tritonserver's users write it: ignored options reported at
// start-up, getopt abbreviations, --exit-on-error=false with a repository that cannot be read.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { IGNORED_OPTIONS } from '../../src/options_triton.js';
import { CLI, ROOT } from '../helpers/paths.js';
import { runCli, type ServerHandle, startServer } from '../helpers/server.js';

const empty = mkdtempSync(path.join(os.tmpdir(), 'serval-cmdline-'));
afterAll(() => rmSync(empty, { recursive: true, force: true }));

describe('a tritonserver command line', () => {
  let server: ServerHandle | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it('starts, reporting each ignored option once with why; abbreviations work', async () => {
    server = await startServer(empty, [
      '--backend-directory',
      '/opt/tritonserver/backends',
      '--cuda-memory-pool-byte-size=0:67108864',
      '--pinned-memory=268435456', // --pinned-memory-pool-byte-size, abbreviated
      '--log-warn=true', // --log-warning
      '--model-load-thread-count',
      '2',
      '--allow-client-shm=true',
    ]);
    const err = server.stderr();
    for (const name of ['backend-directory', 'cuda-memory-pool-byte-size', 'pinned-memory-pool-byte-size']) {
      const lines = err.split('\n').filter((l) => l.includes(`option --${name}=`) && l.includes(`is ignored: ${IGNORED_OPTIONS[name]}`));
      expect(lines, err).toHaveLength(1);
    }
    expect(err).not.toContain('option --model-load-thread-count is ignored');
    expect(err).not.toContain('option --allow-client-shm is ignored');
  });

  it("an ambiguous abbreviation stops it with getopt's text and the usage", async () => {
    const r = await runCli(['--model-repository', empty, '--grpc-use', 'true']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("option '--grpc-use' is ambiguous; possibilities: '--grpc-use-ssl' '--grpc-use-ssl-mutual'");
    expect(r.stderr).toContain('Usage: serval');
  });
});

describe('--exit-on-error=false with a repository folder that does not exist', () => {
  it('keeps the server running and answering, not live and not ready, as tritonserver', async () => {
    const missing = path.join(empty, 'no-such-repository');
    const child = spawn(
      process.execPath,
      [
        CLI,
        '--model-repository',
        missing,
        '--exit-on-error=false',
        '--http-port',
        '0',
        '--http-address',
        '127.0.0.1',
        '--allow-grpc=false',
        '--allow-metrics=false',
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    let exited: number | null | undefined;
    child.once('exit', (c) => (exited = c));
    try {
      const deadline = Date.now() + 30_000;
      let port: number | undefined;
      while (port === undefined && exited === undefined && Date.now() < deadline) {
        const m = /Started HTTPService at [^\s:]+:(\d+)/.exec(out);
        if (m) port = Number(m[1]);
        else await new Promise((r) => setTimeout(r, 25));
      }
      expect(exited, `${out}\n${err}`).toBeUndefined();
      const url = `http://127.0.0.1:${port}`;
      expect((await fetch(`${url}/v2/health/live`)).status).toBe(400);
      expect((await fetch(`${url}/v2/health/ready`)).status).toBe(400);
      // The model and repository APIs refuse, as tritonserver's; server metadata still answers.
      for (const [method, route] of [
        ['POST', '/v2/repository/index'],
        ['GET', '/v2/models/m'],
        ['GET', '/v2/models/m/ready'],
        ['POST', '/v2/models/m/infer'],
        ['GET', '/v2/models/stats'],
        ['POST', '/v2/repository/models/m/load'],
      ] as const) {
        const r = await fetch(`${url}${route}`, { method, body: method === 'POST' ? '{}' : undefined });
        expect([route, r.status, await r.json()]).toEqual([route, 503, { error: 'Server not ready' }]);
      }
      expect((await fetch(`${url}/v2`)).status).toBe(200);
      expect(err).toContain(`failed to stat file ${missing}`);
      expect(exited).toBeUndefined();
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('with --exit-on-error=true (the default) it exits instead', async () => {
    const r = await runCli([
      '--model-repository',
      path.join(empty, 'nope'),
      '--http-port',
      '0',
      '--allow-grpc=false',
      '--allow-metrics=false',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`error: creating server: Internal - failed to stat file ${path.join(empty, 'nope')}\n`);
  });
});

describe("tritonserver's start-up texts", () => {
  it('a bad int or bool value: the usage, then the option and why, exit code 1', async () => {
    for (const [arg, why] of [
      ['--http-port=abc', 'Bad option: "--http-port".\nInvalid option value. Got abc\n'],
      ['--strict-readiness=maybe', 'Bad option: "--strict-readiness".\ninvalid value for bool option: maybe\n'],
    ]) {
      const r = await runCli([arg!, '--model-repository', empty]);
      expect(r.code).toBe(1);
      expect(r.stderr.startsWith('Usage: serval'), r.stderr).toBe(true);
      expect(r.stderr).toContain(`\n\n${why}`);
      expect(r.stderr).not.toContain('error:');
    }
  });

  it('no repository: creating server with the status name', async () => {
    const r = await runCli(['--log-warn=false']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('error: creating server: Invalid argument - --model-repository must be specified\n');
  });
});
