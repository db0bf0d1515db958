// One ONNX Runtime instance (worker thread + shared-memory channel) driven directly: results
// come back right when either side has to grow the shared arena, a failed run does not break
// the next one, and a closed instance refuses work.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INITIAL_ARENA, LARGE_ARENA, SLOTS } from '../../src/backends/onnxruntime/channel.js';
import { OrtInstance } from '../../src/backends/onnxruntime/instance.js';
import { GraphBuilder } from '../../tools/onnx/builder.js';

/** UINT8 [n] → FP64 [n]: the output is 8× the input, so the worker must grow the arena. */
function castModel(): Uint8Array {
  const g = new GraphBuilder('widen');
  g.input('X', 'uint8', ['n']);
  g.op('Cast', ['X'], { to: 11 }, 'Y');
  g.output('Y', 'float64', ['n']);
  return g.encode();
}

const input = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 255);

describe('OrtInstance', () => {
  let dir: string;
  let inst: OrtInstance;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'serval-inst-'));
    writeFileSync(path.join(dir, 'model.onnx'), castModel());
    inst = await OrtInstance.start(
      { name: 'widen_0', kind: 'KIND_CPU', deviceId: -1 },
      {
        modelPath: path.join(dir, 'model.onnx'),
        intraOpThreads: 1,
        interOpThreads: 1,
        allowSpinning: false,
        cudaDeviceId: -1,
        graphOptimizationLevel: 'all',
      },
    );
  });
  afterAll(async () => {
    await inst?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Reserves room for `x`, writes it, and starts the execution. */
  const submit = (x: Uint8Array, dims = [x.length], name = 'X') => {
    const r = inst.reserve(x.byteLength);
    r.buffer.set(x);
    return r.execute({ inputs: [{ name, datatype: 'UINT8', dims, offset: 0, byteLength: x.byteLength }], outputs: ['Y'] });
  };

  const run = async (x: Uint8Array) => {
    const r = await submit(x).result;
    expect(r.outputs).toHaveLength(1);
    const y = r.outputs[0]!;
    expect(y).toMatchObject({ name: 'Y', datatype: 'FP64', dims: [x.length] });
    expect(Array.from(new Float64Array(y.data.buffer, y.data.byteOffset, x.length))).toEqual(Array.from(x));
    expect(r.computeInferNs).toBeGreaterThan(0);
    return y;
  };

  it('small, output-growing (worker side) and input-growing (main side) executions all return their own values', async () => {
    await run(input(100, 1));
    await run(input(INITIAL_ARENA, 2)); // output 8 × the arena: the worker replaces it
    await run(input(3 * INITIAL_ARENA, 3)); // the input alone outgrows it: the main thread replaces it
    await run(input(10, 4));
  });

  it('outputs stay valid after the next execution reuses the arena', async () => {
    const a = await run(input(1000, 5));
    const copy = Array.from(new Float64Array(a.data.buffer, a.data.byteOffset, 1000));
    await run(input(1000, 6));
    expect(Array.from(new Float64Array(a.data.buffer, a.data.byteOffset, 1000))).toEqual(copy);
  });

  it('one reservation at a time: a second is refused until the first executes or is released, and none is used twice', async () => {
    const r = inst.reserve(10);
    expect(() => inst.reserve(10)).toThrow('instance widen_0 already has a reservation');
    r.release();
    r.release(); // releasing again changes nothing
    const x = input(10, 7);
    const again = inst.reserve(10);
    again.buffer.set(x);
    const layout = { inputs: [{ name: 'X', datatype: 'UINT8' as const, dims: [10], offset: 0, byteLength: 10 }], outputs: ['Y'] };
    const e = again.execute(layout);
    expect(() => again.execute(layout)).toThrow('was used twice');
    const out = (await e.result).outputs[0]!;
    expect(Array.from(new Float64Array(out.data.buffer, out.data.byteOffset, 10))).toEqual(Array.from(x));
  });

  it('a run that fails inside ONNX Runtime rejects with its message, and the next run works', async () => {
    await expect(submit(new Uint8Array(8), [2, 4]).result).rejects.toThrow(/onnxruntime execution failed: .*(rank|dimension|Invalid)/i);
    await run(input(64, 8));
  });

  it('an unknown tensor name is refused before anything is sent', async () => {
    await expect(submit(new Uint8Array(1), [1], 'NOPE').result).rejects.toThrow("model has no input 'NOPE'");
    await run(input(3, 9));
  });

  it('holds later executions behind the running one up to its slots; a withdrawn one never runs, and the instance carries on', async () => {
    const a = input(4 << 20, 10); // 4 MiB in, 32 MiB out: milliseconds of work
    const b = input(1000, 11);
    const c = input(2000, 12);
    // A preempted main thread can find the first run already finished when it submits the
    // second, which then is not held; such an attempt is settled and tried again.
    for (let attempt = 1; ; attempt++) {
      const ea = submit(a);
      expect(ea.held).toBe(false);
      expect(ea.withdraw()).toBe(false); // a running (or unheld) execution cannot be withdrawn
      const eb = submit(b);
      if (!eb.held) {
        await Promise.all([ea.result, eb.result]);
        expect(attempt).toBeLessThan(5);
        continue;
      }
      // The other slots fill up with held executions of `c`; one more is refused.
      const rest = Array.from({ length: SLOTS - 2 }, () => submit(c));
      expect(() => inst.reserve(c.byteLength)).toThrow(`instance widen_0 already has ${SLOTS} executions`);
      const withdrawn = eb.withdraw();
      const ra = await ea.result;
      expect(Array.from(new Float64Array(ra.outputs[0]!.data.buffer, 0, 5))).toEqual(Array.from(a.subarray(0, 5)));
      if (withdrawn) await expect(eb.result).rejects.toMatchObject({ code: 'CANCELLED' });
      else expect((await eb.result).outputs[0]!.dims).toEqual([1000]);
      expect(eb.withdraw()).toBe(false); // settled: nothing left to withdraw
      // Those behind the withdrawn one still run, in order, with their own data.
      for (const r of await Promise.all(rest.map((e) => e.result))) {
        expect(Array.from(new Float64Array(r.outputs[0]!.data.buffer, r.outputs[0]!.data.byteOffset, 2000))).toEqual(Array.from(c));
      }
      break;
    }
    await run(input(77, 13));
  });

  it('adopts a large request’s own memory: the worker reads the input where it lies, and the memory leaves this thread', async () => {
    expect(inst.adopt(new ArrayBuffer(LARGE_ARENA))).toBeUndefined(); // small: copied as usual
    const n = LARGE_ARENA + 3;
    const memory = new ArrayBuffer(n + 1000);
    const x = new Uint8Array(memory, 1000, n);
    for (let i = 0; i < n; i++) x[i] = (i * 13 + 5) & 255;
    const want = x.slice();
    const r = inst.adopt(memory)!;
    expect(r.buffer.buffer).toBe(memory);
    const e = r.execute({ inputs: [{ name: 'X', datatype: 'UINT8', dims: [n], offset: 1000, byteLength: n }], outputs: ['Y'] });
    expect(memory.byteLength).toBe(0); // transferred to the worker, not copied
    const y = (await e.result).outputs[0]!;
    expect(y.dims).toEqual([n]);
    const got = new Float64Array(y.data.buffer, y.data.byteOffset, n);
    let wrong = 0;
    for (let i = 0; i < n; i++) if (got[i] !== want[i]) wrong++;
    expect(wrong).toBe(0);
    await run(input(50, 14));
  });

  it('after close, the worker has exited and executions are refused', async () => {
    await inst.close();
    expect(() => inst.reserve(1)).toThrow('instance widen_0 is closed');
  });
});

describe('OrtInstance output memory of a large execution', () => {
  let dir: string;
  const start = async (name: string, model: Uint8Array): Promise<OrtInstance> => {
    writeFileSync(path.join(dir, `${name}.onnx`), model);
    return OrtInstance.start(
      { name: `${name}_0`, kind: 'KIND_CPU', deviceId: -1 },
      {
        modelPath: path.join(dir, `${name}.onnx`),
        intraOpThreads: 1,
        interOpThreads: 1,
        allowSpinning: false,
        cudaDeviceId: -1,
        graphOptimizationLevel: 'all',
      },
    );
  };
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'serval-outmem-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Runs `x` (UINT8 [n], in memory of its own) on `inst` and returns output Y. */
  const adopted = async (inst: OrtInstance, x: Uint8Array) => {
    const memory = new ArrayBuffer(x.byteLength);
    new Uint8Array(memory).set(x);
    const e = inst.adopt(memory)!.execute({
      inputs: [{ name: 'X', datatype: 'UINT8', dims: [x.byteLength], offset: 0, byteLength: x.byteLength }],
      outputs: ['Y'],
    });
    return (await e.result).outputs[0]!;
  };

  it('a model whose declared output shape does not hold still answers right (the run is repeated without preallocated outputs)', async () => {
    // Declares Y as [n] but makes [2n]: output memory sized from the declaration is refused by ONNX Runtime.
    const g = new GraphBuilder('twice');
    g.input('X', 'uint8', ['n']);
    g.op('Concat', ['X', 'X'], { axis: 0 }, 'Y');
    g.output('Y', 'uint8', ['n']);
    const inst = await start('twice', g.encode());
    try {
      const n = LARGE_ARENA + 8;
      const x = input(n, 21);
      const y = await adopted(inst, x);
      expect(y.dims).toEqual([2 * n]);
      expect(Buffer.from(y.data.subarray(0, n)).equals(Buffer.from(x))).toBe(true);
      expect(Buffer.from(y.data.subarray(n)).equals(Buffer.from(x))).toBe(true);
    } finally {
      await inst.close();
    }
  });

  it('an output shape known from the inputs comes back right, also for two outputs of one run', async () => {
    const g = new GraphBuilder('pair');
    g.input('X', 'uint8', ['n']);
    g.op('Identity', ['X'], {}, 'Y');
    g.op('Cast', ['X'], { to: 10 }, 'Z'); // FP16
    g.output('Y', 'uint8', ['n']);
    g.output('Z', 'float16', ['n']);
    const inst = await start('pair', g.encode());
    try {
      const n = LARGE_ARENA + 2;
      const x = input(n, 22);
      const memory = new ArrayBuffer(n);
      new Uint8Array(memory).set(x);
      const r = await inst.adopt(memory)!.execute({
        inputs: [{ name: 'X', datatype: 'UINT8', dims: [n], offset: 0, byteLength: n }],
        outputs: ['Y', 'Z'],
      }).result;
      const [y, z] = r.outputs;
      expect(y!.dims).toEqual([n]);
      expect(Buffer.from(y!.data).equals(Buffer.from(x))).toBe(true);
      expect(z).toMatchObject({ name: 'Z', datatype: 'FP16', dims: [n] });
      const half = new Uint16Array(z!.data.buffer, z!.data.byteOffset, n);
      // FP16 of small integers: exact; spot-check across the tensor.
      for (const i of [0, 1, 255, n >> 1, n - 1]) {
        const v = x[i]!;
        const bits = half[i]!;
        const exp = (bits >> 10) & 31;
        const value = exp === 0 ? (bits & 1023) / 1024 / 16384 : (1 + (bits & 1023) / 1024) * 2 ** (exp - 15);
        expect(value).toBe(v);
      }
    } finally {
      await inst.close();
    }
  });
});
