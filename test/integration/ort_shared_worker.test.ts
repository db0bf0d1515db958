// Small ONNX Runtime instances sharing worker threads (host.ts), driven directly: which instance
// goes where, sessions on one worker answering interleaved requests each with its own model,
// closing one leaving the other serving, and a shared worker's death restoring every instance
// it hosted.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WorkerPool } from '../../src/backends/onnxruntime/host.js';
import { OrtInstance } from '../../src/backends/onnxruntime/instance.js';
import type { SessionSettings } from '../../src/backends/onnxruntime/protocol.js';
import { GraphBuilder } from '../../tools/onnx/builder.js';

/** Y = X * k (INT32 [n]): each model answers with its own k. */
function scale(k: number): Uint8Array {
  const g = new GraphBuilder(`scale_${k}`);
  g.input('X', 'int32', ['n']);
  const c = g.initializer('k', 'int32', [1], Int32Array.of(k));
  g.op('Mul', ['X', c], {}, 'Y');
  g.output('Y', 'int32', ['n']);
  return g.encode();
}

const cpu = (name: string) => ({ name, kind: 'KIND_CPU' as const, deviceId: -1 });

describe('ONNX Runtime instances on shared workers', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-shared-'));
  const killFile = path.join(dir, 'kill');
  /** Model directories m<k>/1/model.onnx computing X * k; `big` gets 4 KiB more beside its model file. */
  const model = (k: number, big = false): SessionSettings => {
    const file = path.join(dir, `m${k}${big ? 'big' : ''}`, '1', 'model.onnx');
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, scale(k));
    if (big) writeFileSync(path.join(path.dirname(file), 'weights.bin'), new Uint8Array(4096));
    return { modelPath: file, intraOpThreads: 2, interOpThreads: 1, allowSpinning: false, cudaDeviceId: -1, graphOptimizationLevel: 'all' };
  };
  let open: OrtInstance[] = [];
  const start = async (name: string, settings: SessionSettings, pool: WorkerPool) => {
    const inst = await OrtInstance.start(cpu(name), settings, pool);
    open.push(inst);
    return inst;
  };
  beforeAll(() => {
    process.env.SERVAL_TEST_KILL_WORKER_FILE = killFile;
  });
  afterEach(async () => {
    await Promise.all(open.map((i) => i.close()));
    open = [];
  });
  afterAll(() => {
    delete process.env.SERVAL_TEST_KILL_WORKER_FILE;
    rmSync(dir, { recursive: true, force: true });
  });

  const submit = (inst: OrtInstance, values: number[]) => {
    const x = Int32Array.from(values);
    const r = inst.reserve(x.byteLength);
    r.buffer.set(new Uint8Array(x.buffer));
    return r.execute({ inputs: [{ name: 'X', datatype: 'INT32', dims: [x.length], offset: 0, byteLength: x.byteLength }], outputs: ['Y'] });
  };
  const run = async (inst: OrtInstance, values: number[]) => {
    const y = (await submit(inst, values).result).outputs[0]!;
    return Array.from(new Int32Array(y.data.buffer, y.data.byteOffset, values.length));
  };

  it('places small models on the shared workers, least loaded first; large ones and second instances of a model elsewhere', async () => {
    const pool = new WorkerPool({ sharedWorkers: 2, sharedModelMaxBytes: 1024 });
    const a = await start('a_0', model(2), pool);
    const b = await start('b_0', model(3), pool);
    const c = await start('c_0', model(5), pool);
    expect(pool.sharedHosts()).toHaveLength(2);
    expect(a.host).not.toBe(b.host);
    expect([a.host, b.host]).toContain(c.host);
    // A second instance of `a` may not join a's worker: it takes the other one.
    const a1 = await start('a_1', model(2), pool);
    expect(a1.host).not.toBe(a.host);
    expect(pool.sharedHosts()).toContain(a1.host);
    // A third has no shared worker left without `a` on it: a worker of its own.
    const a2 = await start('a_2', model(2), pool);
    expect(pool.sharedHosts()).not.toContain(a2.host);
    // Too large to share.
    const big = await start('big_0', model(7, true), pool);
    expect(pool.sharedHosts()).not.toContain(big.host);
    expect(await run(a2, [1, 2])).toEqual([2, 4]);
    expect(await run(big, [1, 2])).toEqual([7, 14]);
  });

  it('sessions on one worker answer interleaved requests, each with its own model', async () => {
    const pool = new WorkerPool({ sharedWorkers: 1, sharedModelMaxBytes: 1 << 20 });
    const ks = [2, 3, 5, 7];
    const insts = await Promise.all(ks.map((k) => start(`m${k}_0`, model(k), pool)));
    expect(new Set(insts.map((i) => i.host)).size).toBe(1);
    // Every instance holds several executions at once, submitted round-robin across the models.
    const pending: { k: number; x: number[]; result: Promise<number[]> }[] = [];
    for (let round = 0; round < 6; round++) {
      insts.forEach((inst, j) => {
        const x = [round, j, round * 10 + j];
        const e = submit(inst, x);
        pending.push({
          k: ks[j]!,
          x,
          result: e.result.then((r) => Array.from(new Int32Array(r.outputs[0]!.data.buffer, r.outputs[0]!.data.byteOffset, 3))),
        });
      });
    }
    for (const p of pending) expect(await p.result).toEqual(p.x.map((v) => v * p.k));
  });

  it('closing one model leaves the other serving; the worker exits with its last session', async () => {
    const pool = new WorkerPool({ sharedWorkers: 1, sharedModelMaxBytes: 1 << 20 });
    const a = await start('a_0', model(2), pool);
    const b = await start('b_0', model(3), pool);
    const host = a.host;
    expect(b.host).toBe(host);
    expect(host.sessionCount).toBe(2);
    await a.close();
    expect(host.sessionCount).toBe(1);
    expect(await run(b, [4, 5])).toEqual([12, 15]);
    expect(a.reserve.bind(a, 4)).toThrow('closed');
    await b.close();
    expect(host.threadId).toBe(-1);
    expect(pool.sharedHosts()).toHaveLength(0);
    // The next small instance starts a new shared worker.
    const c = await start('c_0', model(5), pool);
    expect(c.host).not.toBe(host);
    expect(await run(c, [1])).toEqual([5]);
  });

  it('a killed shared worker fails what it was running; every instance it hosted comes back, once', async () => {
    const pool = new WorkerPool({ sharedWorkers: 2, sharedModelMaxBytes: 1 << 20 });
    const insts = [await start('m11_0', model(11), pool)];
    for (const k of [13, 17, 19]) insts.push(await start(`m${k}_0`, model(k), pool));
    const victim = insts[0]!;
    const onDead = insts.filter((i) => i.host === victim.host);
    const spared = insts.filter((i) => i.host !== victim.host);
    expect(onDead).toHaveLength(2);
    expect(spared).toHaveLength(2);
    const restarts = new Map<string, number>();
    for (const i of insts) i.onRestart = () => restarts.set(i.placement.name, (restarts.get(i.placement.name) ?? 0) + 1);
    const deadHost = victim.host;
    writeFileSync(killFile, 'm11');
    await expect(submit(victim, [1]).result).rejects.toThrow(
      'instance m11_0 stopped unexpectedly (exit code 70) while running this request; it is being restarted',
    );
    // The other instance on the dead worker: its next request waits for its restart.
    const neighbour = onDead[1]!;
    const k = Number(neighbour.placement.name.slice(1, 3));
    expect(await run(neighbour, [1, 2])).toEqual([k, 2 * k]);
    expect(await run(victim, [3])).toEqual([33]);
    for (const i of spared) expect(await run(i, [1])).toEqual([Number(i.placement.name.slice(1, 3))]);
    expect(deadHost.threadId).toBe(-1);
    expect(victim.host).not.toBe(deadHost);
    expect(Object.fromEntries(restarts)).toEqual(Object.fromEntries(onDead.map((i) => [i.placement.name, 1])));
  });
});
