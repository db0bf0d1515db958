// One Python backend instance in-process, with a real stub (the interpreter the server would use
// by default: the project's .venv, which `npm test` sets up): tensors through the shared-memory
// files (growing past their first size), BYTES byte for byte, BLS into a host, errors, a stub
// that dies and is replaced, and what a missing interpreter or package is reported as.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ExecResult, Execution, InstanceHost, ModelInstance } from '../../src/backends/backend.js';
import { pythonBackend, type StubMalloc } from '../../src/backends/python/backend.js';
import type { PythonInstance } from '../../src/backends/python/instance.js';
import { defaultInterpreter } from '../../src/backends/python/interpreter.js';
import { placePythonModel } from '../../src/backends/python/placement.js';
import type { ModelConfig } from '../../src/config/types.js';
import { joinBytes } from '../../src/kernel/datatypes.js';
import { ServalError } from '../../src/kernel/errors.js';
import type { Logger } from '../../src/kernel/log.js';
import { freeSent } from '../../src/kernel/memory.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';
import { submit } from '../../src/scheduler/scheduler.js';
import { expectServalErrorAsync } from '../helpers/errors.js';
import { capturedLogger } from '../helpers/frontends.js';
import { ROOT } from '../helpers/paths.js';
import { fromI32, i32 } from '../helpers/tensors.js';

const MODELS = path.join(ROOT, 'test', 'python_models');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'serval-pyinst-'));
const started: ModelInstance[] = [];
afterAll(async () => {
  await Promise.allSettled(started.map((i) => i.close()));
  rmSync(tmp, { recursive: true, force: true });
});

const noHost: InstanceHost = {
  infer: () => Promise.reject(ServalError.unavailable('no host in this test')),
  stream: (_req, sink) => sink.error(ServalError.unavailable('no host in this test'), true),
};

async function start(
  name: string,
  config: ModelConfig,
  opts: { host?: InstanceHost; interpreter?: string; log?: Logger; malloc?: StubMalloc } = {},
): Promise<PythonInstance> {
  const backend = pythonBackend({ interpreter: opts.interpreter, malloc: opts.malloc, log: opts.log ?? capturedLogger().log });
  const placed = placePythonModel({ name, backend: 'python', ...config });
  const modelDir = path.join(MODELS, name);
  const inst = await backend.startInstance(
    placed.placements[0]!,
    placed.settings,
    { modelDir, modelPath: path.join(modelDir, '1', 'model.py') },
    opts.host ?? noHost,
  );
  started.push(inst);
  return inst as PythonInstance;
}

const BYTES_IO: ModelConfig = {
  max_batch_size: 8,
  input: [{ name: 'INPUT0', data_type: 'TYPE_STRING', dims: [-1] }],
  output: [
    { name: 'OUTPUT0', data_type: 'TYPE_STRING', dims: [-1] },
    { name: 'INFO', data_type: 'TYPE_STRING', dims: [1] },
  ],
};

/** What the BLS target `simple` answers: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (INT32, the inputs' shape). */
function addSub(req: InferRequest): InferResponse {
  const a = fromI32(req.inputs[0]!.data);
  const b = fromI32(req.inputs[1]!.data);
  const shape = req.inputs[0]!.shape;
  return {
    modelName: req.modelName,
    modelVersion: '1',
    id: req.id,
    outputs: [
      { name: 'OUTPUT0', datatype: 'INT32', shape, data: i32(a.map((v, i) => v + b[i]!)) },
      { name: 'OUTPUT1', datatype: 'INT32', shape, data: i32(a.map((v, i) => v - b[i]!)) },
    ],
  };
}

describe('a Python instance', () => {
  it('starts with the interpreter the server finds by default, which has numpy (npm test installs it)', () => {
    // Not a skip: without it every Python test below fails; `npm run setup:python` or tools/python/setup-runtime.sh.
    expect(defaultInterpreter(undefined)).toMatch(/\.venv\/bin\/python3$/);
  });

  it('passes BYTES through byte for byte, each request of a batch apart, with its id, parameters and outputs', async () => {
    const inst = await start('py_identity', BYTES_IO);
    const odd = [Buffer.from([0xff, 0x00, 0xfe]), Buffer.alloc(0), Buffer.from('é', 'latin1'), Buffer.from([0xc3])];
    const a = {
      batchSize: 1,
      inputs: [{ name: 'INPUT0', datatype: 'BYTES' as const, shape: [1, 2], data: joinBytes(odd.slice(0, 2)) }],
      outputs: ['OUTPUT0', 'INFO'],
      id: 'A',
      parameters: { p: 'x', n: 3 },
    };
    const b = {
      batchSize: 1,
      inputs: [{ name: 'INPUT0', datatype: 'BYTES' as const, shape: [1, 2], data: joinBytes(odd.slice(2)) }],
      outputs: ['OUTPUT0'],
      id: 'B',
      parameters: {},
    };
    const r = await submit(inst, [a, b], 2).result;
    expect(r.responses).toHaveLength(2);
    const [ra, rb] = r.responses as { name: string; dims: number[]; data: Uint8Array }[][];
    expect(Buffer.from(ra!.find((o) => o.name === 'OUTPUT0')!.data)).toEqual(a.inputs[0]!.data);
    expect(Buffer.from(rb!.find((o) => o.name === 'OUTPUT0')!.data)).toEqual(b.inputs[0]!.data);
    // Only what each request asked for: B did not ask for INFO.
    expect(rb!.map((o) => o.name)).toEqual(['OUTPUT0']);
    const info = JSON.parse(
      Buffer.from(ra!.find((o) => o.name === 'INFO')!.data)
        .subarray(4)
        .toString(),
    ) as Record<string, unknown>;
    expect(info).toMatchObject({
      request_id: 'A',
      parameters: { p: 'x', n: 3 },
      requested: ['INFO', 'OUTPUT0'],
      batch_requests: 2,
      shape: [1, 2],
      dtype: 'object',
      element_types: ['bytes'],
    });
    expect(info.args).toMatchObject({
      model_name: 'py_identity',
      model_version: '1',
      model_instance_kind: 'CPU',
      model_instance_device_id: '0',
      model_instance_name: 'py_identity_0_0',
    });
    expect(r.computeInferNs).toBeGreaterThan(0);
  });

  it('moves tensors larger than the shared-memory files it started with (both grow), and empty ones', async () => {
    const inst = await start('py_identity_fp32', {
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    for (const n of [3 << 18, 5 << 18, 16, 0]) {
      const x = new Float32Array(n).map((_, i) => i * 0.5);
      const data = new Uint8Array(x.buffer);
      const r = await submit(inst, [{ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n], data }], outputs: ['OUTPUT0'] }], 1)
        .result;
      const out = (r.responses![0] as { data: Uint8Array; dims: number[] }[])[0]!;
      expect(out.dims).toEqual([1, n]);
      expect(Buffer.from(out.data).equals(Buffer.from(data))).toBe(true);
    }
  });

  it('runs a large request from its own memory, which it frees once written; marks outputs read for one request as its response’s', async () => {
    const inst = await start('py_identity_fp32', {
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    const n = 64 * 1024;
    const x = Float32Array.from({ length: n }, (_, i) => i * 0.25);
    // The tensor 40 bytes into memory of its own, as in a received message.
    const memory = new ArrayBuffer(40 + x.byteLength + 12);
    const data = new Uint8Array(memory, 40, x.byteLength);
    data.set(new Uint8Array(x.buffer));
    const input = { name: 'INPUT0', datatype: 'FP32' as const, shape: [1, n], data };
    const r = await submit(inst, [{ inputs: [input], outputs: ['OUTPUT0'], ownMemory: memory }], 1).result;
    expect(memory.byteLength).toBe(0); // taken over and freed, not copied
    const out = (r.responses![0] as { data: Uint8Array }[])[0]!.data;
    expect(Buffer.from(out).equals(Buffer.from(x.buffer))).toBe(true);
    freeSent([out]);
    expect(out.buffer.byteLength).toBe(0); // one request's outputs: its sender may free them

    // Two requests share the outputs' memory: nobody may free it on its own.
    const copy = () => ({ inputs: [{ ...input, data: new Uint8Array(x.buffer.slice(0)) }], outputs: ['OUTPUT0'] });
    const two = await submit(inst, [copy(), copy()], 2).result;
    const first = (two.responses![0] as { data: Uint8Array }[])[0]!.data;
    freeSent([first]);
    expect(Buffer.from(first).equals(Buffer.from(x.buffer))).toBe(true);
  });

  it('an execution marked lone (its model’s only request) is answered as any other; the stub then polls only a moment before it sleeps', async () => {
    const inst = await start('py_identity_fp32', {
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    const cpuTicks = (): number => {
      const fields = readFileSync(`/proc/${inst.stubPid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return Number(fields[11]) + Number(fields[12]); // utime + stime
    };
    for (let i = 0; i < 20; i++) {
      const data = new Uint8Array(Float32Array.of(i, -i).buffer);
      const r = await submit(
        inst,
        [{ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data }], outputs: ['OUTPUT0'] }],
        1,
        undefined,
        true,
      ).result;
      expect(Buffer.from((r.responses![0] as { data: Uint8Array }[])[0]!.data).equals(Buffer.from(data))).toBe(true);
    }
    // Idle after its last lone execution: asleep, not polling (a clock tick is 10 ms of CPU).
    await new Promise((r) => setTimeout(r, 50));
    const before = cpuTicks();
    await new Promise((r) => setTimeout(r, 500));
    expect(cpuTicks() - before).toBeLessThanOrEqual(2);
  });

  it('small batches travel with the messages, larger ones through the shared memory, in any order', async () => {
    const inst = await start('py_identity_fp32', {
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    // [elements, requests in the batch] around the 16 KiB a message carries itself: one request
    // at and past it, and batches of two whose sum is at and past it, alternating.
    const cases = [
      [4096, 1],
      [4097, 1],
      [16, 1],
      [2048, 2],
      [2049, 2],
      [4095, 1],
      [1 << 16, 2],
      [3, 2],
    ] as const;
    for (const [n, count] of cases) {
      const reqs = Array.from({ length: count }, (_, k) => {
        const x = new Float32Array(n).map((_, i) => i * 0.25 + k * 1000);
        return {
          inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, n], data: new Uint8Array(x.buffer) }],
          outputs: ['OUTPUT0'],
        };
      });
      const r = await submit(inst, reqs, count).result;
      reqs.forEach((req, k) => {
        const out = (r.responses![k] as { data: Uint8Array; dims: number[] }[])[0]!;
        expect(out.dims).toEqual([1, n]);
        expect(Buffer.from(out.data).equals(Buffer.from(req.inputs[0]!.data))).toBe(true);
      });
    }
  });

  it('BLS: the model calls the host; outputs come back into the model, errors keep their code', async () => {
    const calls: InferRequest[] = [];
    const host: InstanceHost = {
      infer: async (req): Promise<InferResponse> => {
        calls.push(req);
        if (req.parameters.target === 'missing' || req.modelName === 'missing')
          throw ServalError.notFound("Request for unknown model: 'missing' is not found");
        return addSub(req);
      },
      stream: noHost.stream,
    };
    const inst = await start('py_bls', {}, { host });
    const x = Array.from({ length: 16 }, (_, i) => i);
    const y = Array.from({ length: 16 }, () => 2);
    const req = (params: Record<string, string>) => ({
      inputs: [
        { name: 'INPUT0', datatype: 'INT32' as const, shape: [1, 16], data: i32(x) },
        { name: 'INPUT1', datatype: 'INT32' as const, shape: [1, 16], data: i32(y) },
      ],
      outputs: ['OUTPUT0', 'OUTPUT1'],
      id: 'q',
      parameters: params,
    });
    // Two executions at once: the second runs behind the first (its BLS traffic attached).
    const [ok, again] = await Promise.all([
      submit(inst, [req({}), req({ target: 'missing' })], 2).result,
      submit(inst, [req({})], 1).result,
    ]);
    expect(fromI32((again.responses![0] as { data: Uint8Array }[])[1]!.data)).toEqual(x.map((v) => v - 2));
    calls.pop();
    expect(calls.map((c) => [c.modelName, c.id, c.modelVersion])).toEqual([
      ['simple', 'bls-q', ''],
      ['missing', 'bls-q', ''],
    ]);
    expect(calls[0]!.outputs?.map((o) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    const [first, second] = ok.responses!;
    expect(fromI32((first as { data: Uint8Array }[])[0]!.data)).toEqual(x.map((v) => v + 2));
    expect(second).toBeInstanceOf(ServalError);
    expect((second as ServalError).code).toBe('NOT_FOUND');
    expect((second as ServalError).message).toBe("Request for unknown model: 'missing' is not found");
  });

  it('BLS from large executions that overlap: answers that do not fit beside the one behind come attached, and all arrive whole', async () => {
    const n = 16384; // 64 KiB per tensor: inputs, BLS inputs and answers through the shared memory
    const host: InstanceHost = {
      infer: async (req): Promise<InferResponse> => {
        await new Promise((r) => setTimeout(r, 5));
        return addSub(req);
      },
      stream: noHost.stream,
    };
    const inst = await start('py_bls', {}, { host });
    const req = (k: number) => ({
      inputs: [
        { name: 'INPUT0', datatype: 'INT32' as const, shape: [1, n], data: i32(Array.from({ length: n }, (_, i) => i * k)) },
        { name: 'INPUT1', datatype: 'INT32' as const, shape: [1, n], data: i32(new Array(n).fill(k)) },
      ],
      outputs: ['OUTPUT0', 'OUTPUT1'],
      id: String(k),
      parameters: {},
    });
    // Twice: the first time no BLS answer has been seen (no room is left for one beside the
    // running execution, so it comes attached); the second time room is left for it.
    for (const ks of [
      [1, 2, 3],
      [4, 5, 6],
    ]) {
      const runs = ks.map((k) => submit(inst, [req(k)], 1));
      expect(runs.map((r) => r.held)).toEqual([false, false, true]);
      const results = await Promise.all(runs.map((r) => r.result));
      results.forEach((r, j) => {
        const k = ks[j]!;
        const [sum, diff] = r.responses![0] as { data: Uint8Array }[];
        expect(fromI32(sum!.data)).toEqual(Array.from({ length: n }, (_, i) => i * k + k));
        expect(fromI32(diff!.data)).toEqual(Array.from({ length: n }, (_, i) => i * k - k));
      });
    }
  });

  it('a stub that dies fails its execution clearly, is replaced, and the instance keeps serving', async () => {
    const { log, lines } = capturedLogger();
    const inst = await start(
      'py_errors',
      {
        max_batch_size: 8,
        input: [{ name: 'MODE', data_type: 'TYPE_STRING', dims: [1] }],
        output: [{ name: 'OUT', data_type: 'TYPE_STRING', dims: [1] }],
      },
      { log },
    );
    const mode = (m: string) => ({
      batchSize: 1,
      inputs: [{ name: 'MODE', datatype: 'BYTES' as const, shape: [1, 1], data: joinBytes([m]) }],
      outputs: ['OUT'],
    });
    const pidOf = async (): Promise<string> => {
      const r = await submit(inst, [mode('ok')], 1).result;
      return Buffer.from((r.responses![0] as { data: Uint8Array }[])[0]!.data)
        .subarray(4)
        .toString();
    };
    let restarts = 0; // what nv_inference_instance_restarts counts
    inst.onRestart = () => restarts++;
    const before = await pidOf();
    expect(before).toBe(String(inst.stubPid));
    const running = submit(inst, [mode('sleep'), mode('ok')], 2).result;
    await new Promise((r) => setTimeout(r, 150));
    process.kill(Number(before), 'SIGKILL');
    const err = await expectServalErrorAsync(running, 'INTERNAL');
    expect(err.message).toBe("Stub process 'py_errors_0_0' is not healthy.");
    const after = await pidOf();
    expect(after).not.toBe(before);
    expect(lines.some((l) => /Stub process is unhealthy and it will be restarted/.test(l) && /killed by SIGKILL/.test(l))).toBe(true);
    // A stub that kills itself inside execute: the same, and the next request is served again.
    await expectServalErrorAsync(submit(inst, [mode('crash')], 1).result, 'INTERNAL');
    expect(await pidOf()).not.toBe(after);
    expect(restarts).toBe(2);
  });

  it('small executions go to the stub behind the running one, several at once; if the stub dies they run on the next, in order', async () => {
    const inst = await start('py_errors', {
      max_batch_size: 8,
      input: [{ name: 'MODE', data_type: 'TYPE_STRING', dims: [1] }],
      output: [{ name: 'OUT', data_type: 'TYPE_STRING', dims: [1] }],
    });
    expect(inst.capacity).toBe(4);
    const mode = (m: string) => ({
      batchSize: 1,
      inputs: [{ name: 'MODE', datatype: 'BYTES' as const, shape: [1, 1], data: joinBytes([m]) }],
      outputs: ['OUT'],
    });
    const pidIn = (r: ExecResult): string =>
      Buffer.from((r.responses![0] as { data: Uint8Array }[])[0]!.data)
        .subarray(4)
        .toString();
    const order: number[] = [];
    const inOrder = (runs: Execution[]) =>
      runs.map((x, i) =>
        x.result.then((r) => {
          order.push(i);
          return r;
        }),
      );
    // All answered, in order, by the same stub; none waited here.
    const t0 = process.hrtime.bigint();
    const runs = [
      submit(inst, [mode('sleep')], 1),
      submit(inst, [mode('ok')], 1),
      submit(inst, [mode('ok')], 1),
      submit(inst, [mode('ok')], 1),
    ];
    expect(runs.map((x) => x.held)).toEqual([false, false, false, false]);
    const answers = await Promise.all(inOrder(runs));
    expect(order).toEqual([0, 1, 2, 3]);
    const first = pidIn(answers[0]!);
    for (const a of answers) expect(pidIn(a)).toBe(first);
    // Those behind started when the one before ended (after its 0.5 s): their wait is queue time.
    expect(answers[0]!.computeStartNs).toBeUndefined();
    for (const a of answers.slice(1)) expect(a.computeStartNs! - t0).toBeGreaterThan(400_000_000n);
    // The stub dies while the first runs: it fails; the ones behind it had not started and are
    // answered by the new stub, in order.
    order.length = 0;
    const running = submit(inst, [mode('sleep')], 1).result;
    const behind = inOrder([submit(inst, [mode('ok')], 1), submit(inst, [mode('ok')], 1), submit(inst, [mode('ok')], 1)]);
    await new Promise((r) => setTimeout(r, 150));
    process.kill(Number(first), 'SIGKILL');
    await expectServalErrorAsync(running, 'INTERNAL');
    for (const b of behind) {
      const after = pidIn(await b);
      expect(after).not.toBe(first);
      expect(after).toBe(String(inst.stubPid));
    }
    expect(order).toEqual([0, 1, 2]);
  });

  it('closing while executions wait behind the running one: if the stub dies then, each of them fails, none hangs', async () => {
    const inst = await start('py_errors', {
      max_batch_size: 8,
      input: [{ name: 'MODE', data_type: 'TYPE_STRING', dims: [1] }],
      output: [{ name: 'OUT', data_type: 'TYPE_STRING', dims: [1] }],
    });
    const mode = (m: string) => ({
      batchSize: 1,
      inputs: [{ name: 'MODE', datatype: 'BYTES' as const, shape: [1, 1], data: joinBytes([m]) }],
      outputs: ['OUT'],
    });
    const pid = inst.stubPid!;
    const runs = [mode('sleep'), mode('ok'), mode('ok')].map((m) => submit(inst, [m], 1).result);
    await new Promise((r) => setTimeout(r, 100));
    const closed = inst.close();
    process.kill(pid, 'SIGKILL');
    const settled = await Promise.race([Promise.allSettled(runs), new Promise<'hung'>((r) => setTimeout(() => r('hung'), 3000))]);
    expect(settled).not.toBe('hung');
    expect((settled as PromiseSettledResult<unknown>[]).map((x) => x.status)).toEqual(['rejected', 'rejected', 'rejected']);
    await closed;
  });

  it('a large execution goes behind the running one in memory of its own; a second waits, and so do the small ones after it; a waiting one can be withdrawn', async () => {
    const inst = await start('py_identity_fp32', {
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    const req = (n: number, k: number) => {
      const data = new Uint8Array(new Float32Array(n).fill(k).buffer);
      return { inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, n], data }], outputs: ['OUTPUT0'] };
    };
    const large = 8192; // 32 KiB: through the shared-memory file
    const runs = [
      submit(inst, [req(4, 1)], 1),
      submit(inst, [req(large, 2)], 1),
      submit(inst, [req(large, 5)], 1),
      submit(inst, [req(4, 3)], 1),
    ];
    expect(runs.map((x) => x.held)).toEqual([false, false, true, true]);
    expect(runs[3]!.withdraw()).toBe(true);
    expect(runs[3]!.withdraw()).toBe(false);
    await expectServalErrorAsync(runs[3]!.result, 'CANCELLED');
    const order: number[] = [];
    const answers = await Promise.all(
      [0, 1, 2].map((i) =>
        runs[i]!.result.then((r) => {
          order.push(i);
          return [...new Float32Array(Uint8Array.from((r.responses![0] as { data: Uint8Array }[])[0]!.data).buffer)];
        }),
      ),
    );
    expect(order).toEqual([0, 1, 2]);
    expect(answers).toEqual([[1, 1, 1, 1], new Array(large).fill(2), new Array(large).fill(5)]);
    // Room for its executions again: four more at once.
    const again = await Promise.all([1, 2, 3, 4].map((k) => submit(inst, [req(4, k)], 1).result));
    expect(again.length).toBe(4);
  });

  it('large executions back to back: the inputs and outputs of neither are overwritten by the other before they are read', async () => {
    const inst = await start('py_identity_fp32', {
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    const n = 1 << 18; // 1 MiB each way
    const req = (k: number) => ({
      inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, n], data: new Uint8Array(new Float32Array(n).fill(k).buffer) }],
      outputs: ['OUTPUT0'],
    });
    const values = async (run: Execution): Promise<Set<number>> =>
      new Set(new Float32Array(Uint8Array.from(((await run.result).responses![0] as { data: Uint8Array }[])[0]!.data).buffer));
    for (let round = 0; round < 3; round++) {
      const a = submit(inst, [req(1)], 1);
      const b = submit(inst, [req(2)], 1);
      expect([a.held, b.held]).toEqual([false, false]);
      // Both are at the stub; with this thread busy the stub runs both before either answer is read.
      await new Promise((r) => setImmediate(r));
      const until = Date.now() + 150;
      let turns = 0;
      while (Date.now() < until) turns++;
      expect(turns).toBeGreaterThan(0);
      expect(await values(a)).toEqual(new Set([1]));
      expect(await values(b)).toEqual(new Set([2]));
    }
  });

  it('close() runs finalize and ends the stub', async () => {
    const inst = await start('py_identity_fp32', {
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    });
    const pid = inst.stubPid!;
    await inst.close();
    expect(() => process.kill(pid, 0)).toThrow();
    expect(() => inst.reserve(4)).toThrow('is closed');
  });
});

describe('memory a Python model frees (stub-malloc)', () => {
  const CHURN: ModelConfig = {
    max_batch_size: 0,
    input: [{ name: 'BLOCKS', data_type: 'TYPE_INT32', dims: [1] }],
    output: [
      { name: 'FAULTS', data_type: 'TYPE_INT64', dims: [1] },
      { name: 'PID', data_type: 'TYPE_INT64', dims: [1] },
    ],
  };
  /** Has the model allocate and free `blocks` MiB; its page faults meanwhile, and the stub's pid. */
  async function churn(inst: PythonInstance, blocks: number): Promise<{ faults: number; pid: number }> {
    const r = await submit(
      inst,
      [{ inputs: [{ name: 'BLOCKS', datatype: 'INT32', shape: [1], data: i32([blocks]) }], outputs: ['FAULTS', 'PID'] }],
      1,
    ).result;
    const [faults, pid] = (r.responses![0] as { data: Uint8Array }[]).map((o) => Number(Buffer.from(o.data).readBigInt64LE(0)));
    return { faults: faults!, pid: pid! };
  }
  /** The stub's resident memory, in MiB. */
  function rssMiB(pid: number): number {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return Number(kb) / 1024;
  }
  const PAGES_PER_MIB = 256;

  it('keep (the default): a model that frees 16 MiB per execution does not fault them in again on the next', async () => {
    const inst = await start('py_malloc_churn', CHURN);
    await churn(inst, 16);
    for (let i = 0; i < 3; i++) expect((await churn(inst, 16)).faults).toBeLessThan(PAGES_PER_MIB);
  });

  it('system: glibc gives the freed top of the heap back, and every execution faults all 16 MiB in again', async () => {
    const inst = await start('py_malloc_churn', CHURN, { malloc: 'system' });
    await churn(inst, 16);
    for (let i = 0; i < 3; i++) expect((await churn(inst, 16)).faults).toBeGreaterThanOrEqual(15 * PAGES_PER_MIB);
  });

  it('keep: what the model freed stays resident only until the stub has been idle a second, then goes back', async () => {
    const inst = await start('py_malloc_churn', CHURN);
    const { pid } = await churn(inst, 1);
    await new Promise((r) => setTimeout(r, 1500));
    const before = rssMiB(pid);
    await churn(inst, 48);
    const after = rssMiB(pid);
    expect(after - before).toBeGreaterThan(40);
    const deadline = Date.now() + 5000;
    while (rssMiB(pid) > after - 32 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(rssMiB(pid)).toBeLessThan(after - 32);
  });

  it('system: the 48 MiB are given back as the model frees them', async () => {
    const inst = await start('py_malloc_churn', CHURN, { malloc: 'system' });
    const { pid } = await churn(inst, 1);
    const before = rssMiB(pid);
    await churn(inst, 48);
    expect(rssMiB(pid) - before).toBeLessThan(16);
  });

  it("keep gives way to malloc settings of the server's environment (here MALLOC_TRIM_THRESHOLD_)", async () => {
    process.env.MALLOC_TRIM_THRESHOLD_ = String(1 << 20);
    try {
      const inst = await start('py_malloc_churn', CHURN);
      await churn(inst, 16);
      expect((await churn(inst, 16)).faults).toBeGreaterThanOrEqual(15 * PAGES_PER_MIB);
    } finally {
      delete process.env.MALLOC_TRIM_THRESHOLD_;
    }
  });
});

describe('a Python instance that cannot start', () => {
  const cfg: ModelConfig = {
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [1] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [1] }],
  };

  it('no such interpreter: says what to install and how to point Serval at another Python', async () => {
    const e = await expectServalErrorAsync(start('py_identity_fp32', cfg, { interpreter: path.join(tmp, 'no-python3') }));
    expect(e.message).toContain(`the Python backend cannot run '${path.join(tmp, 'no-python3')}' (ENOENT)`);
    expect(e.message).toContain('install Python 3');
    expect(e.message).toContain('--backend-config=python,interpreter=');
  });

  it('a Python without numpy: names the package and the pip command', async () => {
    // The same interpreter without its site-packages (-S) has no numpy.
    const wrapper = path.join(tmp, 'python-without-numpy');
    writeFileSync(wrapper, `#!/bin/sh\nexec ${defaultInterpreter(undefined)} -S "$@"\n`);
    chmodSync(wrapper, 0o755);
    const e = await expectServalErrorAsync(start('py_identity_fp32', cfg, { interpreter: wrapper }));
    expect(e.message).toContain('numpy cannot be imported');
    expect(e.message).toContain(`the Python package 'numpy' is missing in '${wrapper}': install it with '${wrapper} -m pip install numpy'`);
  });

  it('a model whose import fails for a missing package: names the pip package (PIL is Pillow)', async () => {
    const e = await expectServalErrorAsync(start('py_missing_pil', cfg));
    // The model's error as Triton's Python backend gives it: INTERNAL, no prefix of Serval's.
    expect(e.code).toBe('INTERNAL');
    expect(e.message).toMatch(/^ModuleNotFoundError: No module named 'PIL'/);
    expect(e.message).toContain('py_missing_pil/1/model.py(2): <module>');
    expect(e.message).toContain('-m pip install Pillow');
  });
});
