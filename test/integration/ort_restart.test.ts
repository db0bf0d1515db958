// An ONNX Runtime instance whose worker thread dies (the test hook SERVAL_TEST_KILL_WORKER_FILE
// makes it exit as it takes an execution): the execution it was running fails with a clear error,
// a new worker replaces it, work accepted during the restart runs on the new worker, and the
// restart is reported once.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrtInstance } from '../../src/backends/onnxruntime/instance.js';
import { GraphBuilder } from '../../tools/onnx/builder.js';

function identityModel(): Uint8Array {
  const g = new GraphBuilder('ident');
  g.input('X', 'int32', ['n']);
  g.op('Identity', ['X'], {}, 'Y');
  g.output('Y', 'int32', ['n']);
  return g.encode();
}

describe('OrtInstance crash recovery', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-restart-'));
  const killFile = path.join(dir, 'kill');
  const settings = {
    modelPath: path.join(dir, 'victim', '1', 'model.onnx'),
    intraOpThreads: 1,
    interOpThreads: 1,
    allowSpinning: false,
    cudaDeviceId: -1,
    graphOptimizationLevel: 'all' as const,
  };
  let inst: OrtInstance;
  let restarts = 0;
  beforeAll(async () => {
    mkdirSync(path.dirname(settings.modelPath), { recursive: true });
    writeFileSync(settings.modelPath, identityModel());
    process.env.SERVAL_TEST_KILL_WORKER_FILE = killFile;
    inst = await OrtInstance.start({ name: 'victim_0', kind: 'KIND_CPU', deviceId: -1 }, settings);
    inst.onRestart = () => restarts++;
  });
  afterAll(async () => {
    delete process.env.SERVAL_TEST_KILL_WORKER_FILE;
    await inst?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const submit = (values: number[]) => {
    const x = Int32Array.from(values);
    const r = inst.reserve(x.byteLength);
    r.buffer.set(new Uint8Array(x.buffer));
    return r.execute({ inputs: [{ name: 'X', datatype: 'INT32', dims: [x.length], offset: 0, byteLength: x.byteLength }], outputs: ['Y'] });
  };
  const run = async (values: number[]) => {
    const y = (await submit(values).result).outputs[0]!;
    return Array.from(new Int32Array(y.data.buffer, y.data.byteOffset, values.length));
  };

  it('the killed execution fails clearly; work submitted during the restart runs on the new worker', async () => {
    expect(await run([1, 2, 3])).toEqual([1, 2, 3]);
    writeFileSync(killFile, 'someone_else');
    expect(await run([4])).toEqual([4]); // the hook names another model: nothing happens
    writeFileSync(killFile, 'victim');
    const killed = submit([5, 6]);
    await expect(killed.result).rejects.toMatchObject({
      code: 'INTERNAL',
      message: 'instance victim_0 stopped unexpectedly (exit code 70) while running this request; it is being restarted',
    });
    expect(existsSync(killFile)).toBe(false);
    // Accepted while the new worker starts: it waits for it, and can be withdrawn meanwhile.
    const waiting = submit([7, 8, 9]);
    expect(waiting.held).toBe(true);
    const y = (await waiting.result).outputs[0]!;
    expect(Array.from(new Int32Array(y.data.buffer, y.data.byteOffset, 3))).toEqual([7, 8, 9]);
    expect(restarts).toBe(1);
    expect(await run([10, 11])).toEqual([10, 11]);
  });

  it('an execution withdrawn while the worker restarts never runs', async () => {
    writeFileSync(killFile, 'victim');
    await expect(submit([1]).result).rejects.toThrow('stopped unexpectedly');
    const e = submit([2]);
    expect(e.withdraw()).toBe(true);
    await expect(e.result).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(await run([3])).toEqual([3]);
    expect(restarts).toBe(2);
  });

  it('close during a restart stops the new worker and refuses work', async () => {
    writeFileSync(killFile, 'victim');
    await expect(submit([1]).result).rejects.toThrow('stopped unexpectedly');
    await inst.close();
    expect(() => inst.reserve(4)).toThrow('instance victim_0 is closed');
  });
});
