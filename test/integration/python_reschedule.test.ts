// Request rescheduling in Python models through the core (real stubs): what Serval does where
// Triton 2.51 hangs or aborts, so the side-by-side suite (test/reference/test_python_reference.py)
// cannot compare it. RESCHEDULE in a model that is not an iterative sequence answers Triton core's
// refusal; a request whose START|END ended its sequence gets the batcher's refusal;
// set_release_flags with a flag other than ALL or RESCHEDULE raises; a rescheduled request
// keeps its response channel and cancellation. The model is test/reference/models/pyref_iterative.
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinBackends } from '../../src/builtin_backends.js';
import { InferenceCore } from '../../src/core/server_core.js';
import { Cancellation } from '../../src/kernel/cancel.js';
import { bytesToStrings } from '../../src/kernel/datatypes.js';
import type { ServalError } from '../../src/kernel/errors.js';
import { createLogger } from '../../src/kernel/log.js';
import type { InferInputTensor, InferRequest, InferResponse, Params } from '../../src/kernel/types.js';
import { ModelRepository } from '../../src/repository/repository.js';
import { expectServalErrorAsync } from '../helpers/errors.js';
import { ROOT } from '../helpers/paths.js';
import { bytesRaw, fromI32, i32 } from '../helpers/tensors.js';

const MODEL_PY = path.join(ROOT, 'test', 'reference', 'models', 'pyref_iterative', '1', 'model.py');
const IO = `input [
  { name: "N", data_type: TYPE_INT32, dims: [ 1 ] },
  { name: "MODE", data_type: TYPE_STRING, dims: [ 1 ], optional: true }
]
output [
  { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] },
  { name: "LOG", data_type: TYPE_STRING, dims: [ 1 ] }
]
instance_group [ { kind: KIND_CPU, count: 1 } ]`;
const DECOUPLED = 'model_transaction_policy { decoupled: true }';
const ITERATIVE = 'sequence_batching { iterative_sequence: true }';
/** The same model.py under configs that do and do not let it reschedule. */
const MODELS: Record<string, string> = {
  it_plain: '',
  it_plain_stream: DECOUPLED,
  it_sequence: 'sequence_batching { }',
  it_iterative: ITERATIVE,
  it_iterative_stream: `${DECOUPLED}\n${ITERATIVE}`,
};
const NOT_CONFIGURED =
  'Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to handle such a flag.';

type Event = { kind: 'response'; res: InferResponse | undefined; final: boolean } | { kind: 'error'; err: ServalError; final: boolean };

let dir: string;
let repo: ModelRepository;
let core: InferenceCore;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'serval-reschedule-'));
  for (const [name, extra] of Object.entries(MODELS)) {
    mkdirSync(path.join(dir, name, '1'), { recursive: true });
    cpSync(MODEL_PY, path.join(dir, name, '1', 'model.py'));
    writeFileSync(path.join(dir, name, 'config.pbtxt'), `backend: "python"\nmax_batch_size: 0\n${extra}\n${IO}\n`);
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

function request(model: string, n: number, mode = '', parameters: Params = {}, cancellation?: Cancellation): InferRequest {
  const inputs: InferInputTensor[] = [{ name: 'N', datatype: 'INT32', shape: [1], data: i32([n]) }];
  if (mode) inputs.push({ name: 'MODE', datatype: 'BYTES' as const, shape: [1], data: bytesRaw([mode]) });
  return { modelName: model, modelVersion: '', id: 'r', inputs, parameters, ...(cancellation && { cancellation }) };
}

const outputs = (res: InferResponse): [number, string] => [
  fromI32(res.outputs.find((o) => o.name === 'OUT')!.data)[0]!,
  bytesToStrings(res.outputs.find((o) => o.name === 'LOG')!.data, 'LOG')[0]!,
];

function stream(req: InferRequest): Promise<Event[]> {
  return new Promise((resolve) => {
    const events: Event[] = [];
    const push = (e: Event): void => {
      events.push(e);
      if (e.final) resolve(events);
    };
    core.inferStream(req, {
      response: (res, final) => push({ kind: 'response', res, final }),
      error: (err, final) => push({ kind: 'error', err, final }),
    });
  });
}

describe('RESCHEDULE in a model that is not an iterative sequence', () => {
  it.each(['it_plain', 'it_sequence'])('%s: the request is answered with Triton core’s refusal (2.51 never answers it)', async (model) => {
    const params: Params = model === 'it_sequence' ? { sequence_id: 3, sequence_start: true, sequence_end: true } : {};
    const err = await expectServalErrorAsync(core.infer(request(model, 2, '', params)), 'INVALID_ARG');
    expect(err.message).toBe(NOT_CONFIGURED);
    // The model serves on (its own log of executions still holds the refused request's one).
    expect(outputs(await core.infer(request(model, 1, '', params)))[0]).toBe(2);
  });

  it('decoupled: the responses sent before it, then the refusal as the final response', async () => {
    const events = await stream(request('it_plain_stream', 3));
    expect(events.map((e) => [e.kind, e.final])).toEqual([
      ['response', false],
      ['error', true],
    ]);
    expect(outputs((events[0] as { res: InferResponse }).res)[0]).toBe(2);
    expect((events[1] as { err: ServalError }).err.message).toBe(NOT_CONFIGURED);
  });
});

describe('an iterative sequence model', () => {
  it('runs a request until it is released for good, counting every execution', async () => {
    const before = core.statistics('it_iterative', '')[0]!;
    const [n, log] = outputs(await core.infer(request('it_iterative', 3, '', { sequence_id: 40, sequence_start: true })));
    expect(n).toBe(3);
    expect(JSON.parse(log)).toEqual([
      [40, 1],
      [40, 0],
      [40, 0],
    ]);
    const after = core.statistics('it_iterative', '')[0]!;
    expect(after.execution_count - before.execution_count).toBe(3);
    expect(after.inference_count - before.inference_count).toBe(3);
  });

  it('refuses to reschedule a request that ended its sequence (START and END): 2.51 logs this and never answers', async () => {
    const err = await expectServalErrorAsync(
      core.infer(request('it_iterative', 2, '', { sequence_id: 41, sequence_start: true, sequence_end: true })),
      'INVALID_ARG',
    );
    expect(err.message).toBe(
      "inference request for sequence 41 to model 'it_iterative' must specify the START flag on the first request of the sequence",
    );
  });

  it('set_release_flags takes ALL or RESCHEDULE only (2.51 aborts on others), and an int', async () => {
    const [, bad] = outputs(await core.infer(request('it_iterative', 1, 'bad_value')));
    expect(bad).toBe(
      'TritonModelException: Unsupported request release flags: 4; use pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL (1) ' +
        'or pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE (2)',
    );
    const [, wrongType] = outputs(await core.infer(request('it_iterative', 1, 'bad_type')));
    expect(wrongType).toMatch(/^TypeError: set_release_flags\(\): incompatible arguments/);
  });

  it('decoupled: one response per execution through the same channel, the last one final', async () => {
    const events = await stream(request('it_iterative_stream', 3, '', { sequence_id: 42, sequence_start: true }));
    expect(events.map((e) => e.kind === 'response' && e.res && outputs(e.res)[0])).toEqual([2, 1, 0]);
    expect(events.map((e) => e.final)).toEqual([false, false, true]);
  });

  it('decoupled: a client cancel stops the executions and ends the request', async () => {
    const cancellation = new Cancellation();
    const before = core.statistics('it_iterative_stream', '')[0]!.execution_count;
    const done = stream(request('it_iterative_stream', 1000, 'slow', {}, cancellation));
    await new Promise((r) => setTimeout(r, 300));
    cancellation.cancel();
    const events = await done;
    expect(events.at(-1)!.final).toBe(true);
    // The execution that saw the cancel is counted once it returned.
    await new Promise((r) => setTimeout(r, 200));
    const ran = core.statistics('it_iterative_stream', '')[0]!.execution_count - before;
    expect(ran).toBeGreaterThan(1);
    expect(ran).toBeLessThan(100);
    await new Promise((r) => setTimeout(r, 200));
    expect(core.statistics('it_iterative_stream', '')[0]!.execution_count - before).toBe(ran);
    // The slot is free again.
    expect((await stream(request('it_iterative_stream', 1))).map((e) => e.final)).toEqual([true]);
  });
});
