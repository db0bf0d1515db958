/**
 * The Python backend's stub round trip in-process, with no network and no model work: one
 * instance of test/python_models/py_identity_fp32 (OUTPUT0 = INPUT0), batches submitted one after
 * another straight to the instance (as the scheduler does), at three tensor sizes. Prints the
 * wall time per round trip, what the stub measured inside itself (building the requests, the
 * model's execute, writing the outputs) and the main thread's CPU per round trip; then, for the
 * small tensor, as many executions in flight as the instance takes (its capacity: a second one
 * waits at the stub behind the first), with the CPU of both processes per execution.
 *
 *   npm run build && node dist/tools/bench/python_roundtrip.js [--iterations 2000]
 *
 * Uses the interpreter the server would (the project's .venv when there is one).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pythonBackend } from '../../src/backends/python/backend.js';
import { placePythonModel } from '../../src/backends/python/placement.js';
import { ServalError } from '../../src/kernel/errors.js';
import { createLogger } from '../../src/kernel/log.js';
import { projectRoot } from '../../src/kernel/paths.js';
import { submit } from '../../src/scheduler/scheduler.js';
import { ticksPerSecond } from './procstat.js';

async function main(): Promise<void> {
  const i = process.argv.indexOf('--iterations');
  const iterations = i > 0 ? Number(process.argv[i + 1]) : 2000;
  const placed = placePythonModel({
    name: 'py_identity_fp32',
    backend: 'python',
    max_batch_size: 8,
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
  });
  const dir = path.join(projectRoot(), 'test', 'python_models', 'py_identity_fp32');
  const inst = await pythonBackend({ log: createLogger(0) }).startInstance(
    placed.placements[0]!,
    placed.settings,
    { modelDir: dir, modelPath: path.join(dir, '1', 'model.py') },
    {
      infer: () => Promise.reject(ServalError.unavailable('no BLS here')),
      stream: (_req, sink) => sink.error(ServalError.unavailable('no BLS here'), true),
    },
  );
  console.log('| tensor | round trip µs | inside the stub µs | main-thread CPU µs |');
  console.log('|---|---|---|---|');
  for (const [label, n] of [
    ['16 floats', 16],
    ['64 KiB', 16 * 1024],
    ['4 MiB', 1024 * 1024],
  ] as const) {
    const data = new Uint8Array(n * 4).fill(1);
    const req = { inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, n], data }], outputs: ['OUTPUT0'] };
    const count = n >= 1 << 20 ? Math.max(20, Math.floor(iterations / 40)) : iterations;
    for (let k = 0; k < 20; k++) await submit(inst, [req], 1).result;
    let inside = 0;
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let k = 0; k < count; k++) {
      const r = await submit(inst, [req], 1).result;
      inside += r.computeInputNs + r.computeInferNs + r.computeOutputNs;
    }
    const wall = Number(process.hrtime.bigint() - t0) / count / 1000;
    const cpu = process.cpuUsage(cpu0);
    console.log(
      `| ${label} | ${wall.toFixed(0)} | ${(inside / count / 1000).toFixed(0)} | ${((cpu.user + cpu.system) / count).toFixed(0)} |`,
    );
  }
  // Saturated: `capacity` executions in flight, as the scheduler keeps them without dynamic batching.
  const data = new Uint8Array(64).fill(1);
  const req = { inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, 16], data }], outputs: ['OUTPUT0'] };
  const pid = (inst as unknown as { stubPid?: number }).stubPid;
  const stubCpuUs = (): number => {
    if (!pid) return NaN;
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) / ticksPerSecond()) * 1e6;
  };
  let left = iterations * 2;
  const count = left;
  const worker = async (): Promise<void> => {
    while (left-- > 0) await submit(inst, [req], 1).result;
  };
  const s0 = stubCpuUs();
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: inst.capacity }, worker));
  const wall = Number(process.hrtime.bigint() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  console.log('');
  console.log(
    `16 floats, ${inst.capacity} in flight: ${((count / wall) * 1e6).toFixed(0)} executions/s; CPU per execution: server ${((cpu.user + cpu.system) / count).toFixed(0)} µs, stub ${((stubCpuUs() - s0) / count).toFixed(0)} µs`,
  );
  await inst.close();
}

await main();
