// The real tritonserver 2.51 (tools/ci/setup-triton.sh's venv) on free ports, for the sections
// that compare Serval with it (decoupled, triton).
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { alive, killAll, type Server, sleep, stopServer } from './harness.js';
import { ROOT, rel } from './paths.js';

export const SETUP_TRITON = path.join(ROOT, 'tools', 'ci', 'setup-triton.sh');
export const TRITON_SH = path.join(ROOT, 'tools', 'reference', 'tritonserver.sh');
export const TRITON_VENV = process.env.SERVAL_TRITON_VENV ?? path.join(ROOT, '.venv-triton');

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

const tritons = new Set<Server>();

/** Starts tools/reference/tritonserver.sh on free ports and waits until every model is ready. */
export async function startTriton(repo: string, logFile: string, extra: string[] = []): Promise<Server> {
  const ports = [await freePort(), await freePort(), await freePort()];
  const args = [TRITON_SH, repo, ...ports.map(String), ...extra];
  const out = createWriteStream(logFile);
  const child = spawn('bash', args, { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const server: Server = {
    name: 'triton',
    pid: child.pid!,
    child,
    log: logFile,
    command: `bash ${args.map(rel).join(' ')}`,
    http: `127.0.0.1:${ports[0]}`,
    grpc: `127.0.0.1:${ports[1]}`,
  };
  tritons.add(server);
  child.on('exit', () => tritons.delete(server));
  let text = '';
  const onData = (d: Buffer) => {
    out.write(d);
    text += d.toString();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const deadline = Date.now() + 180_000;
  while (Date.now() < deadline) {
    if (!alive(server)) throw new Error(`tritonserver exited during start-up; see ${logFile}:\n${text.slice(-2000)}`);
    if (/Started HTTPService/.test(text) && /Started GRPCInferenceService/.test(text)) {
      try {
        if ((await fetch(`http://${server.http}/v2/health/ready`)).status === 200) return server;
      } catch {
        /* not listening yet */
      }
    }
    await sleep(250);
  }
  await stopServer(server);
  throw new Error(`tritonserver not ready after 180 s; see ${logFile}`);
}

/** Kills every server this process started, Serval's and tritonserver's (their process groups). */
export function killEverything(): void {
  killAll();
  for (const s of tritons) {
    try {
      process.kill(-s.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}
