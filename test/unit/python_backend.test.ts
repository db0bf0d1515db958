// The Python backend's pieces that need no Python: the control channel's framing, instance
// placement, which interpreter a model gets and what a missing one is reported as,
// --backend-config, the registry's list, and the seam features it added: per-request responses
// and errors in the scheduler, the batch's requests in the layout, UTF-8-only BYTES as a backend
// property.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ExecResult, Execution } from '../../src/backends/backend.js';
import { onnxRuntimeBackend } from '../../src/backends/onnxruntime/backend.js';
import { parseStubMalloc, pythonBackend } from '../../src/backends/python/backend.js';
import { encodeFrame, encodeFrameBuffer, FrameReader, type StubMessage } from '../../src/backends/python/channel.js';
import { oneLine } from '../../src/backends/python/instance.js';
import { defaultInterpreter, interpreterProblem, modelInterpreter } from '../../src/backends/python/interpreter.js';
import { placePythonModel } from '../../src/backends/python/placement.js';
import { StubProcess } from '../../src/backends/python/stub_process.js';
import { BackendRegistry } from '../../src/backends/registry.js';
import { builtinBackends, parseBackendConfig } from '../../src/builtin_backends.js';
import { UNBOUNDED } from '../../src/config/resolve.js';
import type { BatchingPolicy } from '../../src/config/resolved.js';
import type { ModelConfig } from '../../src/config/types.js';
import { createLogger } from '../../src/kernel/log.js';
import { validateRequest } from '../../src/model/validate.js';
import { parseArgs, USAGE } from '../../src/options.js';
import { assemble, Scheduler, type SchedulerRequest } from '../../src/scheduler/scheduler.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { expectServalError, expectServalErrorAsync } from '../helpers/errors.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { ROOT } from '../helpers/paths.js';
import { resolveForTest } from '../helpers/resolve.js';
import { fromI32, i32 } from '../helpers/tensors.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'serval-pyunit-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the control channel framing', () => {
  it('reads messages split anywhere and several in one chunk, in order', () => {
    const frames = Buffer.concat([
      ...encodeFrame({ t: 'a', n: 1 }),
      ...encodeFrame({ t: 'b', text: 'é✓' }, [Buffer.from([1, 2]), Buffer.from([3])]),
      ...encodeFrame({ t: 'c', big: 2n ** 60n }),
    ]);
    for (const cut of [1, 3, 4, 5, 17, frames.byteLength - 1]) {
      const r = new FrameReader();
      const got = [...r.push(frames.subarray(0, cut)), ...r.push(frames.subarray(cut))];
      expect(got.map((m) => m.t)).toEqual(['a', 'b', 'c']);
      expect(got[1]!.text).toBe('é✓');
      // Attached bytes come with their message, and only with it.
      expect([...got[1]!.bin!]).toEqual([1, 2, 3]);
      expect(got[0]!.bin).toBeUndefined();
    }
    // 64-bit integers are written exactly (a request parameter may be one).
    expect(Buffer.from(encodeFrame({ t: 'x', v: 2n ** 60n })[1]!).toString('utf8')).toContain('1152921504606846976');
  });

  it('writes the same frame as one buffer, JSON fast path or not', () => {
    const att = [Buffer.from([9, 8]), Buffer.from([7])];
    for (const msg of [
      { t: 'exec', seq: 3, reqs: [{ id: 'é', params: { a: 1.5, b: true, c: 'x' }, ins: [['IN', 'FP32', [1, 4], 0, 16]] }] },
      { t: 'exec', params: { big: 2n ** 60n } },
      { t: 'exec', params: { neg: -0 } },
    ]) {
      const one = encodeFrameBuffer(msg);
      expect(one.equals(Buffer.concat(encodeFrame(msg)))).toBe(true);
      expect(encodeFrameBuffer(msg, att).equals(Buffer.concat(encodeFrame(msg, att)))).toBe(true);
    }
    // The careful path keeps what plain JSON.stringify would lose.
    const text = (m: Record<string, unknown>) =>
      encodeFrameBuffer({ t: 'x', ...m })
        .subarray(8)
        .toString('utf8');
    expect(text({ v: 2n ** 60n })).toContain('1152921504606846976');
    expect(text({ v: -0 })).toContain('-0.0');
    expect(text({ v: [1, { w: -0 }] })).toContain('-0.0');
  });

  it('frames sent `later` (to a busy stub) go in one write at the end of the turn, after nothing sent sooner and before anything sent after', async () => {
    // A stand-in stub that reads nothing: only the writes on its channel are looked at.
    const fake = path.join(tmp, 'silent-stub');
    writeFileSync(fake, '#!/bin/sh\nexec sleep 30\n');
    chmodSync(fake, 0o755);
    const stub = StubProcess.spawn(fake, 'instance');
    const control = (stub as unknown as { control: { write: (b: Buffer) => boolean } }).control;
    const writes: StubMessage[][] = [];
    const real = control.write.bind(control);
    control.write = (b: Buffer) => {
      writes.push(new FrameReader().push(b));
      return real(b);
    };
    try {
      stub.send({ t: 'exec', seq: 1 }, [Buffer.from('ab')], true);
      stub.send({ t: 'exec', seq: 2 }, undefined, true);
      expect(writes).toEqual([]);
      await new Promise((r) => setImmediate(r));
      expect(writes.map((w) => w.map((m) => m.seq))).toEqual([[1, 2]]);
      expect(writes[0]![0]!.bin?.toString()).toBe('ab');
      // Something sent at once takes what waits with it, in order.
      stub.send({ t: 'exec', seq: 3 }, undefined, true);
      stub.send({ t: 'cancel', seq: 4 });
      expect(writes.slice(1).map((w) => w.map((m) => m.seq))).toEqual([[3], [4]]);
      await new Promise((r) => setImmediate(r));
      expect(writes.length).toBe(3);
    } finally {
      stub.kill();
      await stub.exited;
    }
  });

  it('refuses a message without a type', () => {
    const body = Buffer.from('{"x":1}');
    const frame = Buffer.concat([Buffer.from([body.byteLength, 0, 0, 0, 0, 0, 0, 0]), body]);
    expect(() => new FrameReader().push(frame)).toThrow('without a type');
  });
});

describe('placing a Python model', () => {
  it("follows Triton's names: one CPU instance by default, `<model>_<group>_<index>`", () => {
    const p = placePythonModel({ name: 'm', backend: 'python' });
    expect(p.placements).toEqual([{ name: 'm_0_0', kind: 'KIND_CPU', deviceId: -1 }]);
    expect(p.groups).toEqual([{ name: 'm_0', kind: 'KIND_CPU', count: 1 }]);
    // args["model_config"] is the config the endpoints report, instance groups filled in.
    expect(JSON.parse(p.settings.modelConfigJson)).toMatchObject({
      name: 'm',
      backend: 'python',
      instance_group: [{ name: 'm_0', count: 1 }],
    });
  });

  it('counts, named groups, GPU device ids and the execution environment parameter', () => {
    const p = placePythonModel({
      name: 'm',
      instance_group: [
        { name: 'cpus', count: 2, kind: 'KIND_CPU' },
        { count: 1, kind: 'KIND_GPU', gpus: [1, 3] },
      ],
      parameters: { EXECUTION_ENV_PATH: { string_value: '$$TRITON_MODEL_DIRECTORY/env' } },
    });
    expect(p.placements.map((x) => [x.name, x.kind, x.deviceId])).toEqual([
      ['cpus_0', 'KIND_CPU', -1],
      ['cpus_1', 'KIND_CPU', -1],
      ['m_1_0_gpu1', 'KIND_GPU', 1],
      ['m_1_0_gpu3', 'KIND_GPU', 3],
    ]);
    expect(p.settings.executionEnvPath).toBe('$$TRITON_MODEL_DIRECTORY/env');
  });

  it('tells the instances a decoupled model is decoupled', () => {
    expect(placePythonModel({ name: 'm', model_transaction_policy: { decoupled: true } }).settings.decoupled).toBe(true);
    expect(placePythonModel({ name: 'm' }).settings.decoupled).toBe(false);
  });

  it('refuses what it cannot run', () => {
    expectServalError(() => placePythonModel({ name: 'm', instance_group: [{ kind: 'KIND_MODEL' }] }), 'UNSUPPORTED');
    expectServalError(() => placePythonModel({ name: 'm', instance_group: [{ count: 0 }] }), 'INVALID_ARG');
    expectServalError(() => placePythonModel({ name: 'm', instance_group: [{ kind: 'KIND_CPU', gpus: [0] }] }), 'INVALID_ARG');
  });
});

describe('the interpreter of a model', () => {
  const env = path.join(tmp, 'model', 'env');
  mkdirSync(path.join(env, 'bin'), { recursive: true });
  writeFileSync(path.join(env, 'bin', 'python3'), '#!/bin/sh\n');
  chmodSync(path.join(env, 'bin', 'python3'), 0o755);

  it('the server flag, else the project .venv when it has one, else python3', () => {
    expect(defaultInterpreter('/opt/py/bin/python3')).toBe('/opt/py/bin/python3');
    expect(defaultInterpreter(undefined)).toMatch(/^(python3|.*\/\.venv\/bin\/python3)$/);
    expect(modelInterpreter(undefined, tmp, 'm', '/x/python3')).toBe('/x/python3');
  });

  it('EXECUTION_ENV_PATH: an environment folder (with $$TRITON_MODEL_DIRECTORY), or a .tar.gz of one', () => {
    const modelDir = path.join(tmp, 'model');
    expect(modelInterpreter('$$TRITON_MODEL_DIRECTORY/env', modelDir, 'm', '/ignored')).toBe(path.join(env, 'bin', 'python3'));
    expect(modelInterpreter('env', modelDir, 'm', undefined)).toBe(path.join(env, 'bin', 'python3'));
    const archive = path.join(modelDir, 'env.tar.gz');
    execFileSync('tar', ['-czf', archive, '-C', env, '.']);
    const unpacked = modelInterpreter('$$TRITON_MODEL_DIRECTORY/env.tar.gz', modelDir, 'm', undefined);
    expect(unpacked).toMatch(/serval-python-envs\/[0-9a-f]{16}\/bin\/python3$/);
    expect(modelInterpreter('env.tar.gz', modelDir, 'm', undefined)).toBe(unpacked);
  });

  it('a path that is not an environment is refused, naming it as written', () => {
    const modelDir = path.join(tmp, 'model');
    expect(expectServalError(() => modelInterpreter('no_such_env', modelDir, 'm', undefined)).message).toBe(
      "model 'm': EXECUTION_ENV_PATH 'no_such_env' does not exist",
    );
    mkdirSync(path.join(modelDir, 'empty_env'), { recursive: true });
    expect(expectServalError(() => modelInterpreter('empty_env', modelDir, 'm', undefined)).message).toContain('has no bin/python3');
  });

  it('an environment outside the model folder is refused (a config can come from a client)', () => {
    const modelDir = path.join(tmp, 'model');
    for (const outside of [
      env.replace(`${path.sep}model${path.sep}`, path.sep),
      '/usr',
      '../model2/env',
      '$$TRITON_MODEL_DIRECTORY/../x',
    ]) {
      expect(expectServalError(() => modelInterpreter(outside, modelDir, 'm', undefined), 'INVALID_ARG').message).toMatch(
        /^model 'm': parameter EXECUTION_ENV_PATH '.*' must name a file inside the model's folder$/,
      );
    }
  });

  it('a missing interpreter or package is reported with what to install and how to choose another Python', () => {
    const none = interpreterProblem('python3', { spawnError: 'ENOENT' });
    expect(none).toContain("cannot run 'python3' (ENOENT)");
    expect(none).toContain('install Python 3');
    expect(none).toContain('--backend-config=python,interpreter=');
    const pil = interpreterProblem('/v/bin/python3', {
      message: "ModuleNotFoundError: No module named 'PIL'",
      missing: 'Pillow',
    });
    expect(pil).toContain("No module named 'PIL'");
    expect(pil).toContain("install it with '/v/bin/python3 -m pip install Pillow'");
    expect(pil).toContain('EXECUTION_ENV_PATH');
    expect(interpreterProblem('p', { message: 'plain' })).toBe('plain');
  });

  it('a traceback becomes one line for the model status table', () => {
    const text = 'ValueError: bad\n\nAt:\n  /m/model.py(3): helper\n  /m/model.py(9): initialize\n';
    expect(oneLine(text)).toBe('ValueError: bad (at /m/model.py(3): helper < /m/model.py(9): initialize)');
    expect(oneLine('just a message\n')).toBe('just a message');
    // No frames of the model's (a SyntaxError on import): no dangling "At:", as Triton's text.
    expect(oneLine('SyntaxError: bad (model.py, line 1)\n\nAt:\n')).toBe('SyntaxError: bad (model.py, line 1)');
  });
});

describe('--backend-config and the registry', () => {
  it('reads BACKEND,SETTING=VALUE entries and refuses malformed ones and unknown python settings', () => {
    const c = parseBackendConfig(['python,interpreter=/a/b=c', 'onnxruntime,enable-global-threadpool=1']);
    expect(c.get('python')?.get('interpreter')).toBe('/a/b=c');
    expect(c.get('onnxruntime')?.get('enable-global-threadpool')).toBe('1');
    expect(() => parseBackendConfig(['interpreter=/x'])).toThrow('expects BACKEND,SETTING=VALUE');
    expect(() => parseBackendConfig(['python,nope=1'])).toThrow("the python backend has no setting 'nope'");
  });

  it('python,stub-malloc is keep (the default) or system; builtinBackends refuses anything else, naming it', () => {
    expect(parseStubMalloc(undefined)).toBe('keep');
    expect(parseStubMalloc('keep')).toBe('keep');
    expect(parseStubMalloc('system')).toBe('system');
    expect(() => parseStubMalloc('tcmalloc')).toThrow("stub-malloc is keep or system, got 'tcmalloc'");
    expect(() => builtinBackends({ backendConfig: ['python,stub-malloc=Keep'] })).toThrow("got 'Keep'");
    expect(builtinBackends({ backendConfig: ['python,stub-malloc=system'] }).forConfig({ backend: 'python' }, 'm').name).toBe('python');
  });

  it("--backend-config is repeatable, on the command line and in the settings file (tritonserver's flag)", () => {
    const o = parseArgs([
      '--model-repository',
      'm',
      '--backend-config',
      'python,interpreter=/p/python3',
      '--backend-config=onnxruntime,x=1',
    ]);
    expect(o.backendConfig).toEqual(['python,interpreter=/p/python3', 'onnxruntime,x=1']);
    const file = path.join(tmp, 'serval.yaml');
    writeFileSync(file, 'model-repository: m\nbackend-config: ["python,interpreter=/from/file"]\n');
    expect(parseArgs(['--config-file', file]).backendConfig).toEqual(['python,interpreter=/from/file']);
    expect(parseArgs(['--config-file', file, '--backend-config', 'python,interpreter=/cli']).backendConfig).toEqual([
      'python,interpreter=/cli',
    ]);
    expect(USAGE).toContain('--backend-config python,interpreter=PATH');
  });

  it('runs ONNX and Python models and says so when a config names something else', () => {
    const reg = builtinBackends({ log: createLogger(0) });
    expect(reg.forConfig({ backend: 'python' }, 'm').name).toBe('python');
    expect(() => reg.forConfig({ backend: 'pytorch' }, 'm')).toThrow(
      `model 'm': unsupported backend 'pytorch'; Serval runs ONNX and Python models only (platform "onnxruntime_onnx" or backend "onnxruntime"; backend "python")`,
    );
    const three = new BackendRegistry([
      onnxRuntimeBackend,
      pythonBackend({ log: createLogger(0) }),
      { ...onnxRuntimeBackend, name: 'x', platforms: [], displayName: 'X' },
    ]);
    expect(() => three.forConfig({ backend: 'y' }, 'm')).toThrow('Serval runs ONNX, Python and X models only');
  });

  it('a Python model without its model.py is refused at load, naming the file', async () => {
    const backend = pythonBackend({ log: createLogger(0) });
    const files = { modelDir: path.join(tmp, 'nomodel'), modelPath: path.join(tmp, 'nomodel', '1', 'model.py') };
    const e = await expectServalErrorAsync(backend.readSignature(files), 'INVALID_ARG');
    expect(e.message).toContain(`the Python model file ${path.basename(files.modelDir)}/1/model.py does not exist`);
  });
});

// ---------------------------------------------------------------------------------------------
// The seam: a backend answering each request of a batch on its own.

const policy: BatchingPolicy = {
  maxBatchSize: 8,
  dynamic: true,
  preferredBatchSizes: [],
  maxQueueDelayNs: 50_000_000,
  preserveOrdering: false,
  queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
};

/** Answers each request with Y = X + 1, or an error for a request whose first element is negative. */
class PerRequestInstance extends FakeInstanceBase {
  readonly placement = { name: 'per_request_0', kind: 'KIND_CPU' as const, deviceId: -1 };
  readonly capacity = 1;
  readonly batches: Batch[] = [];

  protected run(batch: Batch): Execution {
    this.batches.push(batch);
    const slot = batch.inputs[0]!;
    let at = slot.offset;
    const responses = batch.requests!.map((r) => {
      const x = fromI32(batch.data.subarray(at, at + r.inputBytes[0]!));
      at += r.inputBytes[0]!;
      if (x[0]! < 0) return new Error(`request ${r.id} is negative`);
      return [{ name: 'Y', datatype: 'INT32' as const, dims: [r.batchSize, x.length / r.batchSize], data: i32(x.map((v) => v + 1)) }];
    });
    const result: ExecResult = { outputs: [], responses, computeInputNs: 1, computeInferNs: 1, computeOutputNs: 1 };
    return { result: Promise.resolve(result), held: false, withdraw: () => false };
  }
}

const req = (id: string, x: number[], batch = 1): SchedulerRequest => ({
  batchSize: batch,
  inputs: [{ name: 'X', datatype: 'INT32', shape: [batch, x.length / batch], data: i32(x) }],
  outputs: ['Y'],
  requestStartNs: process.hrtime.bigint(),
  id,
  parameters: { tag: id },
});

describe('per-request responses (the Python backend answers each request of a batch)', () => {
  it('the layout lists each request: id, parameters, batch size and its bytes of every input', () => {
    const e = assemble([req('a', [1, 2]), req('b', [3, 4, 5, 6], 2)], 3);
    expect(e.requests).toEqual([
      { id: 'a', parameters: { tag: 'a' }, batchSize: 1, inputBytes: [8], outputs: ['Y'] },
      { id: 'b', parameters: { tag: 'b' }, batchSize: 2, inputBytes: [16], outputs: ['Y'] },
    ]);
    expect(assemble([req('only', [1, 2, 3, 4], 2)], 2).requests![0]!.batchSize).toBe(2);
  });

  it('each request gets its own outputs or its own error; the others of the batch still succeed', async () => {
    const inst = new PerRequestInstance();
    const stats = new ModelStats();
    const s = new Scheduler([inst], policy, stats);
    const [a, b, c] = await Promise.allSettled([
      s.enqueue(req('a', [1, 2])),
      s.enqueue(req('b', [-1, 0])),
      s.enqueue(req('c', [5, 6, 7, 8], 2)),
    ]);
    expect(inst.batches).toHaveLength(1); // one batch of 4 items
    expect(a.status === 'fulfilled' && fromI32(a.value[0]!.data)).toEqual([2, 3]);
    expect(c.status === 'fulfilled' && c.value[0]!.shape).toEqual([2, 2]);
    expect(b.status === 'rejected' && (b.reason as Error).message).toBe('request b is negative');
    expect(stats.executionCount).toBe(1);
    // Every item counts, b's too: the model answered it (with an error), which Triton's Python
    // backend reports as a request executed successfully (docs/reference/decoupled.md, statistics).
    expect(stats.inferenceCount).toBe(4);
    expect(stats.success.count).toBe(3);
    expect(stats.batches.get(4)?.compute_infer.count).toBe(1); // batch_stats: one execution of 4 items
    expect(stats.failuresByReason.get('BACKEND')).toBeUndefined();
    expect(stats.pending).toBe(0);
  });
});

describe('BYTES that are not UTF-8: refused only by a backend that passes them as text', () => {
  const config: ModelConfig = {
    name: 'strings',
    max_batch_size: 0,
    input: [{ name: 'S', data_type: 'TYPE_STRING', dims: [1] }],
    output: [{ name: 'O', data_type: 'TYPE_STRING', dims: [1] }],
  };
  const request = {
    modelName: 'strings',
    modelVersion: '',
    id: '',
    parameters: {},
    inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: Buffer.from([2, 0, 0, 0, 0xff, 0xfe]) }],
  };

  it('the onnxruntime backend is UTF-8 only; the Python backend is not', () => {
    expect(onnxRuntimeBackend.utf8BytesOnly).toBe(true);
    expect(pythonBackend({ log: createLogger(0) }).utf8BytesOnly).toBeUndefined();
  });

  it('a config resolved for a UTF-8-only backend refuses them, naming the backend; otherwise they pass as they are', () => {
    const strict = { ...resolveForTest(config), utf8BytesOnly: true };
    expect(expectServalError(() => validateRequest(request, strict)).message).toContain(
      'BYTES element 0 is not valid UTF-8; the onnxruntime backend of this server can only pass UTF-8 text',
    );
    const lenient = resolveForTest(config);
    expect(lenient.utf8BytesOnly).toBe(false);
    expect(Buffer.from(validateRequest(request, lenient).inputs[0]!.data)).toEqual(request.inputs[0]!.data);
  });
});

it('the stub folder holds the stub and the module models import', () => {
  for (const f of ['serval_python_stub.py', 'triton_python_backend_utils.py']) {
    expect(() => execFileSync('test', ['-f', path.join(ROOT, 'src', 'backends', 'python', 'stub', f)])).not.toThrow();
  }
});
