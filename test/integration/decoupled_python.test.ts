// Decoupled Python models through the core (real stubs, no front-end): a request answered zero,
// one or many times through Triton's response sender, from execute() or from threads after it
// returned; errors sent or raised; response parameters; misuse of the sender; cancellation
// reaching the model's is_cancelled(); coroutine executes that overlap; BLS streams
// (exec(decoupled=True), async_exec(decoupled=True)) into a decoupled model; a stub that dies.
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinBackends } from '../../src/builtin_backends.js';
import { InferenceCore } from '../../src/core/server_core.js';
import { Cancellation } from '../../src/kernel/cancel.js';
import { bytesToStrings } from '../../src/kernel/datatypes.js';
import type { ServalError } from '../../src/kernel/errors.js';
import { createLogger } from '../../src/kernel/log.js';
import type { InferInputTensor, InferRequest, InferResponse } from '../../src/kernel/types.js';
import { ModelRepository } from '../../src/repository/repository.js';
import { ROOT } from '../helpers/paths.js';
import { bytesRaw, fromI32 } from '../helpers/tensors.js';

/** What a request's sink received, in order. */
type Event = { kind: 'response'; res: InferResponse | undefined; final: boolean } | { kind: 'error'; err: ServalError; final: boolean };

let dir: string;
let repo: ModelRepository;
let core: InferenceCore;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'serval-decoupled-'));
  for (const m of ['py_decoupled', 'py_decoupled_async', 'py_bls_stream', 'py_sender', 'py_errors']) {
    cpSync(path.join(ROOT, 'test', 'python_models', m), path.join(dir, m), { recursive: true });
  }
  cpSync(path.join(ROOT, 'model_repository', 'repeat_int32'), path.join(dir, 'repeat_int32'), { recursive: true });
  // An ensemble whose first step is decoupled: repeat_int32, then add_one_int32 per response.
  for (const m of ['add_one_int32', 'ensemble_repeat']) {
    cpSync(path.join(ROOT, 'test', 'reference', 'models', m), path.join(dir, m), { recursive: true });
  }
  const log = createLogger(0, () => undefined);
  repo = new ModelRepository([dir], log, {
    mode: 'none',
    startupModels: [],
    autoComplete: true,
    backends: builtinBackends({ log, backendConfig: [] }),
  });
  await repo.loadAll();
  core = new InferenceCore(repo, { id: 'serval', version: 'test', strictReadiness: false, extensions: [] });
}, 60_000);

afterAll(async () => {
  await repo.unloadAll();
  rmSync(dir, { recursive: true, force: true });
});

const i32 = (values: number[]): Uint8Array => new Uint8Array(Int32Array.from(values).buffer);
const text = (name: string, s: string): InferInputTensor => ({ name, datatype: 'BYTES', shape: [1], data: bytesRaw([s]) });

function request(model: string, inputs: InferInputTensor[], cancellation?: Cancellation): InferRequest {
  return { modelName: model, modelVersion: '', id: `${model}-req`, inputs, parameters: {}, ...(cancellation && { cancellation }) };
}

/** Runs one request through core.inferStream; resolves with every call its sink got, once one is final. */
function stream(req: InferRequest, onEvent?: (e: Event, all: Event[]) => void): Promise<Event[]> {
  return new Promise((resolve) => {
    const events: Event[] = [];
    const push = (e: Event): void => {
      expect(events.at(-1)?.final ?? false, 'nothing may follow a final call').toBe(false);
      events.push(e);
      onEvent?.(e, events);
      if (e.final) resolve(events);
    };
    core.inferStream(req, {
      response: (res, final) => push({ kind: 'response', res, final }),
      error: (err, final) => push({ kind: 'error', err, final }),
    });
  });
}

const mode = (m: string, n?: number): InferRequest =>
  request('py_decoupled', [text('MODE', m), ...(n === undefined ? [] : [{ name: 'N', datatype: 'INT32', shape: [1], data: i32([n]) }])]);

/** OUT of a response of py_decoupled. */
function out(e: Event): string {
  if (e.kind !== 'response' || !e.res) throw new Error(`expected a response with outputs, got ${JSON.stringify(e)}`);
  const t = e.res.outputs.find((o) => o.name === 'OUT')!;
  return bytesToStrings(t.data, 'OUT')[0]!;
}

describe('a decoupled Python model answers through its response sender', () => {
  it('sends N responses from a thread after execute returned, then the final flag alone', async () => {
    const before = core.statistics('py_decoupled', '')[0]!;
    const events = await stream(mode('count', 4));
    expect(events.map((e) => e.kind)).toEqual(['response', 'response', 'response', 'response', 'response']);
    expect(events.slice(0, 4).map(out)).toEqual(['r0', 'r1', 'r2', 'r3']);
    expect(events.slice(0, 4).every((e) => !e.final)).toBe(true);
    expect(events[4]).toEqual({ kind: 'response', res: undefined, final: true });
    const first = events[0] as { res: InferResponse };
    expect(first.res.id).toBe('py_decoupled-req');
    expect(first.res.modelName).toBe('py_decoupled');
    expect(fromI32(first.res.outputs.find((o) => o.name === 'IDX')!.data)).toEqual([0]);
    // One inference, one execution, however many responses; response_stats count each by index.
    const after = core.statistics('py_decoupled', '')[0]!;
    expect(after.inference_count - before.inference_count).toBe(1);
    expect(after.execution_count - before.execution_count).toBe(1);
    const rs = after.response_stats;
    const was = (k: string, f: 'success' | 'empty_response'): number => before.response_stats[k]?.[f].count ?? 0;
    for (const k of ['0', '1', '2', '3']) expect(rs[k]!.success.count - was(k, 'success')).toBe(1);
    expect(rs['4']!.empty_response.count - was('4', 'empty_response')).toBe(1);
  });

  it('sends from inside execute, the final flag on the last response', async () => {
    const events = await stream(mode('inline', 2));
    expect(events.map(out)).toEqual(['r0', 'r1']);
    expect(events.map((e) => e.final)).toEqual([false, true]);
  });

  it('may answer with nothing but the final flag', async () => {
    expect(await stream(mode('zero'))).toEqual([{ kind: 'response', res: undefined, final: true }]);
  });

  it('sends errors as responses: a non-final one lets the request go on, with the code the model chose', async () => {
    const events = await stream(mode('error_mid'));
    expect(events.map((e) => e.kind)).toEqual(['response', 'error', 'response', 'response']);
    const err = events[1] as { err: ServalError; final: boolean };
    expect(err.err.message).toBe('a bad step');
    expect(err.err.code).toBe('INVALID_ARG');
    expect(err.final).toBe(false);
    expect(out(events[2]!)).toBe('after');
    expect(events[3]).toEqual({ kind: 'response', res: undefined, final: true });
    const last = await stream(mode('error_final'));
    expect(last).toHaveLength(1);
    expect(last[0]).toMatchObject({ kind: 'error', final: true });
    expect((last[0] as { err: ServalError }).err.message).toBe('the end is an error');
  });

  it('passes response parameters on', async () => {
    const events = await stream(mode('params'));
    expect((events[0] as { res: InferResponse }).res.parameters).toEqual({ answer: 42, kind: 'text', ok: true });
  });

  it('fails the request when execute raises or returns responses', async () => {
    const raised = await stream(mode('raise'));
    expect(raised).toHaveLength(1);
    expect(raised[0]).toMatchObject({ kind: 'error', final: true });
    // Triton's wording for a decoupled model's requests: "for model '<instance>'".
    expect((raised[0] as { err: ServalError }).err.message).toMatch(
      /^Failed to process the request\(s\) for model 'py_decoupled_0_0', message: TritonModelException: raised inside execute/,
    );
    const returned = await stream(mode('return_list'));
    expect(returned[0]).toMatchObject({ kind: 'error', final: true });
    expect((returned[0] as { err: ServalError }).err.message).toContain(
      'is using the decoupled mode and the execute function must return None',
    );
  });

  it("refuses a send after the final flag, and a None response without it, with Triton's texts", async () => {
    const only = await stream(mode('after_final'));
    expect(only.map(out)).toEqual(['only']);
    expect(out((await stream(mode('report')))[0]!)).toBe('TritonModelException: Unable to send response. Response sender has been closed.');
    const bad = await stream(mode('bad_flags'));
    expect(bad).toEqual([{ kind: 'response', res: undefined, final: true }]);
    expect(out((await stream(mode('report')))[0]!)).toMatch(/^TritonModelException: Inference Response object is needed/);
  });

  it("a client's cancel reaches the running model: is_cancelled() turns true on the request and its sender", async () => {
    const cancellation = new Cancellation();
    const events = await stream(request('py_decoupled', [text('MODE', 'until_cancel')], cancellation), (_e, all) => {
      if (all.length === 2) cancellation.cancel();
    });
    expect(events.at(-1)).toEqual({ kind: 'response', res: undefined, final: true });
    const report = out((await stream(mode('report')))[0]!);
    expect(report).toMatch(/^cancelled=True sender=True after=\d+$/);
    // Nothing is left behind: the instance holds no open request, the cancellation no listener.
    const version = repo.get('py_decoupled', '') as unknown as { instances: { open: Map<number, unknown> }[] };
    expect(version.instances[0]!.open.size).toBe(0);
    expect((cancellation as unknown as { listener: unknown }).listener).toBeUndefined();
    // It stopped soon after the cancel, not at its 10 s deadline.
    expect(Number(/after=(\d+)/.exec(report)![1])).toBeLessThan(20);
  });

  it('one-response infer() is refused for a decoupled model', async () => {
    await expect(core.infer(mode('count'))).rejects.toMatchObject({ code: 'UNSUPPORTED' });
  });
});

describe('async def execute in a decoupled model', () => {
  it('runs the coroutines of several requests at once', async () => {
    const ms = (n: number) => request('py_decoupled_async', [{ name: 'MS', datatype: 'INT32', shape: [1], data: i32([n]) }]);
    const t0 = Date.now();
    const all = await Promise.all([stream(ms(400)), stream(ms(400)), stream(ms(400))]);
    const took = Date.now() - t0;
    for (const events of all) {
      expect(events).toHaveLength(1);
      expect(events[0]!.final).toBe(true);
      expect(fromI32((events[0] as { res: InferResponse }).res.outputs[0]!.data)).toEqual([400]);
    }
    // One after another they would take 1.2 s.
    expect(took).toBeLessThan(1100);
  });

  it('a coroutine that raises ends its request with the error, worded as Triton words it', async () => {
    const events = await stream(request('py_decoupled_async', [{ name: 'MS', datatype: 'INT32', shape: [1], data: i32([-5]) }]));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ kind: 'error', final: true });
    expect((events[0] as { err: ServalError }).err.message).toMatch(
      /^Failed to process the request\(s\) for model 'py_decoupled_async_0_0', message: ValueError: cannot sleep -5 ms/,
    );
  });
});

describe('BLS into a decoupled model', () => {
  for (const m of ['sum', 'async_sum']) {
    it(`${m === 'sum' ? 'exec' : 'async_exec'}(decoupled=True) yields every response, the last one the empty final`, async () => {
      const values = [5, 7, 11, 13];
      const events = await stream(
        request('py_bls_stream', [text('MODE', m), { name: 'IN', datatype: 'INT32', shape: [4], data: i32(values) }]),
      );
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ kind: 'response', final: true });
      const res = (events[0] as { res: InferResponse }).res;
      const get = (name: string) => fromI32(res.outputs.find((o) => o.name === name)!.data)[0];
      expect(get('SUM')).toBe(36);
      expect(get('COUNT')).toBe(values.length + 1);
      expect(get('EMPTY')).toBe(1);
    });
  }
});

describe('BLS without decoupled=True into a decoupled model', () => {
  it("gets Triton's error response", async () => {
    const events = await stream(
      request('py_bls_stream', [text('MODE', 'plain'), { name: 'IN', datatype: 'INT32', shape: [1], data: i32([1]) }]),
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ kind: 'error', final: true });
    expect((events[0] as { err: ServalError }).err.message).toBe(
      "Model repeat_int32 - Error when running inference: Model repeat_int32 is using the decoupled. The current BLS request call doesn't support models using the decoupled transaction policy. Please use 'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled models.'",
    );
  });
});

describe('a model that is not decoupled, answering through its response sender', () => {
  const sender = (m: string) => request('py_sender', [text('MODE', m)]);
  it('answers with the one response it sent', async () => {
    const res = await core.infer(sender('send_final'));
    expect(bytesToStrings(res.outputs[0]!.data, 'OUT')).toEqual(['sent']);
  });

  it("refuses a second response with Triton's text; the first is the answer", async () => {
    const res = await core.infer(sender('send_twice'));
    expect(bytesToStrings(res.outputs[0]!.data, 'OUT')).toEqual(['first']);
    const report = await core.infer(sender('report'));
    expect(bytesToStrings(report.outputs[0]!.data, 'OUT')).toEqual([
      'TritonModelException: Unable to send response. Non-decoupled model cannot send more than one response.',
    ]);
  });
});

describe("statistics of a Python model's failures, as Triton's Python backend reports them", () => {
  const delta = async (model: string, run: () => Promise<unknown>) => {
    const before = core.statistics(model, '')[0]!;
    await run();
    const after = core.statistics(model, '')[0]!;
    return {
      inference: after.inference_count - before.inference_count,
      execution: after.execution_count - before.execution_count,
      success: after.inference_stats.success.count - before.inference_stats.success.count,
      fail: after.inference_stats.fail.count - before.inference_stats.fail.count,
    };
  };
  const errors = (m: string) => request('py_errors', [{ name: 'MODE', datatype: 'BYTES', shape: [1, 1], data: bytesRaw([m]) }]);

  it('an error response the model returns is a success of the request (the client still gets the error)', async () => {
    const d = await delta('py_errors', () => expect(core.infer(errors('error'))).rejects.toMatchObject({ code: 'INVALID_ARG' }));
    expect(d).toEqual({ inference: 1, execution: 1, success: 1, fail: 0 });
  });

  it('an execute that raised is a failed request, and an execution all the same', async () => {
    const d = await delta('py_errors', () => expect(core.infer(errors('raise'))).rejects.toMatchObject({ code: 'INTERNAL' }));
    expect(d).toEqual({ inference: 0, execution: 1, success: 0, fail: 1 });
    const decoupled = await delta('py_decoupled', () => stream(mode('raise')));
    expect(decoupled).toMatchObject({ execution: 1, fail: 1 });
  });
});

describe('an ensemble with a decoupled step', () => {
  it('is decoupled itself, and runs the next step once per response of the decoupled one', async () => {
    expect(core.isDecoupled('ensemble_repeat', '')).toBe(true);
    expect(core.modelConfig('ensemble_repeat', '')).toMatchObject({ model_transaction_policy: { decoupled: true } });
    const u32 = (values: number[]): Uint8Array => new Uint8Array(Uint32Array.from(values).buffer);
    const events = await stream(
      request('ensemble_repeat', [
        { name: 'IN', datatype: 'INT32', shape: [3], data: i32([10, 20, 30]) },
        { name: 'DELAY', datatype: 'UINT32', shape: [3], data: u32([5, 5, 5]) },
        { name: 'WAIT', datatype: 'UINT32', shape: [1], data: u32([0]) },
      ]),
    );
    const data = events.filter((e): e is { kind: 'response'; res: InferResponse; final: boolean } => e.kind === 'response' && !!e.res);
    expect(data.map((e) => fromI32(e.res.outputs.find((o) => o.name === 'OUT')!.data)[0])).toEqual([11, 21, 31]);
    expect(data.map((e) => fromI32(e.res.outputs.find((o) => o.name === 'IDX')!.data)[0])).toEqual([0, 1, 2]);
    // Each carries the request's sequence fields, as Triton's ensemble responses do.
    for (const e of data) expect(e.res.parameters).toEqual({ sequence_id: 0n, sequence_start: false, sequence_end: false });
    expect(events.at(-1)!.final).toBe(true);
    expect(events.filter((e) => e.kind === 'error')).toEqual([]);
  });
});

describe('a decoupled model whose stub dies', () => {
  it('ends its open requests with an error, then serves again', async () => {
    const cancellation = new Cancellation();
    let pid = 0;
    const events = await stream(request('py_decoupled', [text('MODE', 'until_cancel')], cancellation), (_e, all) => {
      if (all.length !== 1) return;
      // The model version's one instance (a PythonInstance) knows its stub's pid.
      const version = repo.get('py_decoupled', '') as unknown as { instances: { stubPid?: number }[] };
      pid = version.instances[0]!.stubPid ?? 0;
      process.kill(pid, 'SIGKILL');
    });
    expect(pid).toBeGreaterThan(0);
    const last = events.at(-1)!;
    expect(last).toMatchObject({ kind: 'error', final: true });
    expect((last as { err: ServalError }).err.message).toContain('is not healthy');
    const again = await stream(mode('inline', 1));
    expect(again.map(out)).toEqual(['r0']);
  }, 30_000);
});
