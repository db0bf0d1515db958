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
      expect(err).toContain(`failed to open model repository '${missing}'`);
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
    expect(r.stderr).toContain('failed to open model repository');
  });
});
