// ModelStreamInfer (src/frontends/grpc/stream.ts) in-process: a grpc-js server on port 0 over a
// fake core whose requests the test completes (or fails) one by one, so every ordering below is
// forced by the test, never by timing. test/integration/grpc_stream.test.ts runs the real server.
import * as grpc from '@grpc/grpc-js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CoreApi } from '../../src/core/api.js';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { GRPC_ERROR_HEADER } from '../../src/frontends/grpc/stream.js';
import type { DataType } from '../../src/kernel/datatypes.js';
import { grpcStatus, ServalError } from '../../src/kernel/errors.js';
import type { InferRequest, InferResponse } from '../../src/kernel/types.js';
import { capturedLogger, errorLines, fakeCore } from '../helpers/frontends.js';
import { status } from '../helpers/grpc.js';
import { type InferStreamClient, openInferStream, type StreamReply } from '../helpers/grpc_stream.js';
import { fromI32, i32, range } from '../helpers/tensors.js';

const UNKNOWN = (m: string): string => `Request for unknown model: '${m}' is not found`;

/** A request the fake core holds until the test completes or fails it. */
interface Held {
  req: InferRequest;
  complete(): void;
  fail(e: unknown): void;
  /** Set when the request's Cancellation fired (the client went away). */
  cancelled: boolean;
}

/** The response an identity model would give: each input comes back as OUT_<name>. */
function echo(req: InferRequest): InferResponse {
  return {
    modelName: req.modelName,
    modelVersion: '1',
    id: req.id,
    outputs: req.inputs.map((i) => ({ name: `OUT_${i.name}`, datatype: i.datatype as DataType, shape: i.shape, data: i.data })),
  };
}

/**
 * fakeCore(), plus two models that succeed: `echo` answers at once, `hold` is taken in (queued:
 * InferRequest.admitted) and waits for the test. Every other model name fails as fakeCore
 * documents (invalid, busy, boom, unknown, ...), as a refusal of the request as issued; with the
 * prefix `queued_` it fails the same way after it was taken in (a failure in the model).
 */
const QUEUED = 'queued_';
function controlledCore(): { core: CoreApi; requests: InferRequest[]; held: Held[] } {
  const base = fakeCore();
  const held: Held[] = [];
  const core: CoreApi = {
    ...base,
    infer(req) {
      if (req.modelName === 'echo') {
        base.requests.push(req);
        return Promise.resolve(echo(req));
      }
      if (req.modelName.startsWith(QUEUED)) {
        req.admitted?.();
        return base.infer({ ...req, modelName: req.modelName.slice(QUEUED.length) });
      }
      if (req.modelName !== 'hold') return base.infer(req);
      base.requests.push(req);
      req.admitted?.();
      return new Promise<InferResponse>((resolve, reject) => {
        const h: Held = { req, complete: () => resolve(echo(req)), fail: reject, cancelled: false };
        // As the scheduler does for a queued request: a cancel drops it with CANCELLED.
        req.cancellation?.onCancel(() => {
          h.cancelled = true;
          reject(ServalError.cancelled('request was cancelled'));
        });
        held.push(h);
      });
    },
  };
  return { core, requests: base.requests, held };
}

/** A ModelInferRequest with one INT32 input holding `values`. */
function request(model: string, id: string, values: number[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model_name: model,
    id,
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [values.length] }],
    raw_input_contents: [i32(values)],
    ...extra,
  };
}

const until = async (cond: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
};

/** The values a successful echo reply carries, and checks of the reply's form. */
function okValues(r: StreamReply, id: string): number[] {
  expect(r.error_message).toBe('');
  const res = r.infer_response!;
  expect(res.id).toBe(id);
  // Triton flags every streamed response; a non-decoupled model's one response is the final one.
  expect(res.parameters.triton_final_response?.bool_param).toBe(true);
  expect(res.outputs.map((o) => o.name)).toEqual(['OUT_IN']);
  return fromI32(res.raw_output_contents[0]!);
}

/** A failed request: error_message, and only the id in infer_response (Triton clears the rest). */
function expectFailed(r: StreamReply, id: string, message: string): void {
  expect(r.error_message).toBe(message);
  expect(r.infer_response?.id).toBe(id);
  expect(r.infer_response?.outputs).toEqual([]);
  expect(r.infer_response?.model_name).toBe('');
  expect(r.infer_response?.parameters).toEqual({});
}

describe('gRPC ModelStreamInfer', () => {
  let g: GrpcServer;
  let lines: string[];
  let fake: ReturnType<typeof controlledCore>;
  let stream: InferStreamClient;
  const streams: InferStreamClient[] = [];
  const open = (): InferStreamClient => {
    const s = openInferStream(`127.0.0.1:${g.port}`);
    streams.push(s);
    return s;
  };

  beforeEach(async () => {
    fake = controlledCore();
    const logged = capturedLogger();
    lines = logged.lines;
    g = await startGrpcServer(fake.core, logged.log, '127.0.0.1', 0);
    stream = open();
  });
  afterEach(() => {
    for (const s of streams.splice(0)) s.close();
    g.server.forceShutdown();
  });

  it('keeps many requests in flight on one stream and answers each with its id, in request order', async () => {
    const n = 16;
    for (const i of range(n)) stream.send(request('hold', `r${i}`, [i, i * 10, 100 - i]));
    // All of them reach the core before any is answered: the stream does not serialize them.
    await until(() => fake.held.length === n, `${n} requests in the core`);
    expect(fake.held.map((h) => h.req.id)).toEqual(range(n, (i) => `r${i}`));
    // Completed last to first; Triton writes a non-decoupled model's responses in request order.
    for (const h of [...fake.held].reverse()) h.complete();
    const replies = await stream.waitFor(n);
    expect(replies.map((r) => r.infer_response?.id)).toEqual(range(n, (i) => `r${i}`));
    replies.forEach((r, i) => {
      expect(okValues(r, `r${i}`)).toEqual([i, i * 10, 100 - i]);
      expect(r.infer_response?.model_name).toBe('hold');
    });
    stream.end();
    expect((await stream.status).code).toBe(status.OK);
    expect(stream.replies).toHaveLength(n);
  });

  it('writes a response as soon as its request completes when nothing before it is pending', async () => {
    for (const i of range(3)) stream.send(request('hold', `r${i}`, [i]));
    await until(() => fake.held.length === 3, 'three requests in the core');
    for (const i of range(3)) {
      fake.held[i]!.complete();
      const replies = await stream.waitFor(i + 1);
      expect(okValues(replies[i]!, `r${i}`)).toEqual([i]);
    }
    stream.end();
    expect((await stream.status).code).toBe(status.OK);
  });

  it('answers a failed request in error_message with its id and goes on with the next ones', async () => {
    stream.send(request('echo', 'ok1', [1]));
    stream.send(request('invalid', 'bad', [2]));
    stream.send(request('echo', 'ok2', [3]));
    stream.send(request('no_such_model', 'lost', [4]));
    stream.send(request('busy', 'full', [5]));
    stream.send(request('echo', 'ok3', [6]));
    const r = await stream.waitFor(6);
    expect(okValues(r[0]!, 'ok1')).toEqual([1]);
    expectFailed(r[1]!, 'bad', "[request id: <id_unknown>] infer: bad request for model 'invalid'");
    expect(okValues(r[2]!, 'ok2')).toEqual([3]);
    expectFailed(r[3]!, 'lost', UNKNOWN('no_such_model'));
    expectFailed(r[4]!, 'full', 'Exceeds maximum queue size');
    expect(okValues(r[5]!, 'ok3')).toEqual([6]);
    stream.end();
    expect((await stream.status).code).toBe(status.OK);
    // Refusals are answers, not server faults: nothing logged.
    expect(lines).toEqual([]);
  });

  it('an unexpected fault is answered in-band and logged with the request id; the stream goes on', async () => {
    stream.send(request('boom', 'b1', [1]));
    stream.send(request('boom_async', 'b2', [2]));
    stream.send(request('echo', 'after', [3]));
    const r = await stream.waitFor(3);
    expectFailed(r[0]!, 'b1', 'boom');
    expectFailed(r[1]!, 'b2', 'boom');
    expect(okValues(r[2]!, 'after')).toEqual([3]);
    const errors = errorLines(lines);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/method=\/inference\.GRPCInferenceService\/ModelStreamInfer request_id=b1 /);
    expect(errors[1]).toMatch(/request_id=b2 /);
  });

  it('an error waits for the responses of earlier requests (request order holds for errors too)', async () => {
    stream.send(request('hold', 'slow', [1]));
    await until(() => fake.held.length === 1, 'the held request');
    stream.send(request('no_such_model', 'err', [2]));
    stream.send(request('echo', 'fast', [3]));
    await until(() => fake.requests.length === 3, 'all three requests in the core');
    fake.held[0]!.complete();
    const r = await stream.waitFor(3);
    expect(r.map((x) => x.infer_response?.id)).toEqual(['slow', 'err', 'fast']);
    expectFailed(r[1]!, 'err', UNKNOWN('no_such_model'));
  });

  it('a request that fails after the core took it in is answered naming it, flagged final, as Triton’s response callback does', async () => {
    stream.send(request(`${QUEUED}invalid`, 'late', [1], { model_version: '3' }));
    stream.send(request('no_such_model', 'early', [2], { model_version: '3' }));
    const [late, early] = await stream.waitFor(2);
    expect(late!.error_message).toBe("[request id: <id_unknown>] infer: bad request for model 'invalid'");
    // The request's model name and version as the client sent them, no outputs, the final flag.
    expect(late!.infer_response).toEqual(
      expect.objectContaining({ id: 'late', model_name: `${QUEUED}invalid`, model_version: '3', outputs: [], raw_output_contents: [] }),
    );
    expect(late!.infer_response?.parameters).toEqual({ triton_final_response: expect.objectContaining({ bool_param: true }) });
    // Refused as issued: only the id.
    expectFailed(early!, 'early', UNKNOWN('no_such_model'));
  });

  it('malformed requests get the codec’s error and never reach the core; the stream goes on', async () => {
    // raw_input_contents for one input of two.
    stream.send({
      model_name: 'echo',
      id: 'm1',
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [1] },
        { name: 'B', datatype: 'INT32', shape: [1] },
      ],
      raw_input_contents: [i32([1])],
    });
    // Typed contents of a datatype that does not exist.
    stream.send({ model_name: 'echo', id: 'm2', inputs: [{ name: 'A', datatype: 'INT33', shape: [1], contents: { int_contents: [1] } }] });
    // The stream-only parameter with the wrong type.
    stream.send(request('echo', 'm3', [1], { parameters: { triton_enable_empty_final_response: { string_param: 'yes' } } }));
    stream.send(request('echo', 'good', [7]));
    const r = await stream.waitFor(4);
    expectFailed(
      r[0]!,
      'm1',
      'raw_input_contents has 1 entries but the request has 2 inputs; give raw contents for every input or for none',
    );
    expectFailed(r[1]!, 'm2', "input 'A' has unknown datatype 'INT33'");
    expectFailed(r[2]!, 'm3', "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.");
    expect(okValues(r[3]!, 'good')).toEqual([7]);
    expect(fake.requests.map((q) => q.id)).toEqual(['good']);
  });

  it('takes triton_enable_empty_final_response out of the request, as Triton does; other parameters pass', async () => {
    stream.send(
      request('echo', 'p', [1], {
        parameters: { triton_enable_empty_final_response: { bool_param: true }, custom: { int64_param: '5' } },
      }),
    );
    const [r] = await stream.waitFor(1);
    expect(okValues(r!, 'p')).toEqual([1]);
    expect(fake.requests[0]!.parameters).toEqual({ custom: 5 });
  });

  it('a message that is not a ModelInferRequest ends the call with INTERNAL and cancels what it held', async () => {
    stream.send(request('hold', 'queued', [1]));
    await until(() => fake.held.length === 1, 'the held request');
    stream.sendRaw(Buffer.from([0x0a, 0xff, 0xff, 0xff]));
    const s = await stream.status;
    expect(s.code).toBe(status.INTERNAL);
    await until(() => fake.held[0]!.cancelled, 'the held request cancelled');
    // The server is fine: a new stream works.
    const next = open();
    next.send(request('echo', 'again', [2]));
    const [r] = await next.waitFor(1);
    expect(okValues(r!, 'again')).toEqual([2]);
  });

  it('a cancelled stream cancels every request it still has in the core', async () => {
    for (const i of range(3)) stream.send(request('hold', `c${i}`, [i]));
    await until(() => fake.held.length === 3, 'three requests in the core');
    fake.held[0]!.complete();
    await stream.waitFor(1);
    expect(fake.held.map((h) => h.cancelled)).toEqual([false, false, false]);
    stream.cancel();
    expect((await stream.status).code).toBe(status.CANCELLED);
    await until(() => fake.held[1]!.cancelled && fake.held[2]!.cancelled, 'both pending requests cancelled');
    expect(fake.held.map((h) => h.req.cancellation?.cancelled)).toEqual([false, true, true]);
    expect(stream.replies).toHaveLength(1);
  });

  it('after the client half-closes, in-flight requests are answered, then the stream ends OK', async () => {
    for (const i of range(3)) stream.send(request('hold', `h${i}`, [i]));
    await until(() => fake.held.length === 3, 'three requests in the core');
    stream.end();
    let ended = false;
    void stream.status.then(() => (ended = true));
    fake.held[0]!.complete();
    fake.held[1]!.complete();
    await stream.waitFor(2);
    // h2 is still in the core, so the server cannot have ended the stream.
    await new Promise((r) => setImmediate(r));
    expect(ended).toBe(false);
    fake.held[2]!.complete();
    const s = await stream.status;
    expect(s.code).toBe(status.OK);
    expect(stream.replies.map((r) => r.infer_response?.id)).toEqual(['h0', 'h1', 'h2']);
    expect(fake.held.some((h) => h.cancelled)).toBe(false);
  });

  it('a half-closed stream with nothing in flight ends at once', async () => {
    stream.send(request('echo', 'e', [1]));
    await stream.waitFor(1);
    stream.end();
    expect((await stream.status).code).toBe(status.OK);
  });

  it('shutdown ends an idle open stream instead of waiting for the client', async () => {
    stream.send(request('echo', 'e', [1]));
    await stream.waitFor(1);
    // The client neither half-closes nor cancels: shutdown must still complete.
    await g.shutdown();
    expect((await stream.status).code).toBe(status.OK);
  });

  it('shutdown lets a stream’s in-flight requests finish and be written, then ends it', async () => {
    stream.send(request('hold', 'last', [9]));
    await until(() => fake.held.length === 1, 'the held request');
    let down = false;
    const shutdown = g.shutdown().then(() => (down = true));
    await new Promise((r) => setImmediate(r));
    expect(down).toBe(false);
    fake.held[0]!.complete();
    const [r] = await stream.waitFor(1);
    expect(okValues(r!, 'last')).toEqual([9]);
    expect((await stream.status).code).toBe(status.OK);
    await shutdown;
    expect(fake.held[0]!.cancelled).toBe(false);
  });

  it('a request without an id is answered with an empty id', async () => {
    stream.send({ model_name: 'echo', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], raw_input_contents: [i32([4])] });
    stream.send({ model_name: 'no_such_model', inputs: [] });
    const r = await stream.waitFor(2);
    expect(okValues(r[0]!, '')).toEqual([4]);
    expectFailed(r[1]!, '', UNKNOWN('no_such_model'));
  });
});

/** Stream-opening metadata carrying Triton's `triton_grpc_error` header with `value`. */
function grpcErrorHeader(value: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set(GRPC_ERROR_HEADER, value);
  return md;
}

describe('gRPC ModelStreamInfer with the triton_grpc_error header', () => {
  let g: GrpcServer;
  let lines: string[];
  let fake: ReturnType<typeof controlledCore>;
  const streams: InferStreamClient[] = [];
  const open = (value?: string): InferStreamClient => {
    const s = openInferStream(`127.0.0.1:${g.port}`, value === undefined ? undefined : grpcErrorHeader(value));
    streams.push(s);
    return s;
  };

  beforeEach(async () => {
    fake = controlledCore();
    const logged = capturedLogger();
    lines = logged.lines;
    g = await startGrpcServer(fake.core, logged.log, '127.0.0.1', 0);
  });
  afterEach(() => {
    for (const s of streams.splice(0)) s.close();
    g.server.forceShutdown();
  });

  // Triton compares the header's value with "true" exactly; anything else is the default mode.
  for (const value of [undefined, 'false', 'True', '1', '']) {
    it(`header ${value === undefined ? 'absent' : `'${value}'`}: the core's errors stay in-band and the stream goes on`, async () => {
      const s = open(value);
      s.send(request('invalid', 'bad', [1]));
      s.send(request('no_such_model', 'lost', [2]));
      s.send(request('echo', 'ok', [3]));
      const r = await s.waitFor(3);
      expectFailed(r[0]!, 'bad', "[request id: <id_unknown>] infer: bad request for model 'invalid'");
      expectFailed(r[1]!, 'lost', UNKNOWN('no_such_model'));
      expect(okValues(r[2]!, 'ok')).toEqual([3]);
      s.end();
      expect((await s.status).code).toBe(status.OK);
    });
  }

  // Each kind of core error ends its stream with the code of the one status table, and its message.
  const cases: [model: string, error: ServalError | Error, code: number, message: string][] = [
    ['invalid', ServalError.invalidArg('x'), status.INVALID_ARGUMENT, "[request id: <id_unknown>] infer: bad request for model 'invalid'"],
    ['no_such_model', ServalError.notFound('x'), status.NOT_FOUND, UNKNOWN('no_such_model')],
    ['busy', ServalError.unavailable('x'), status.UNAVAILABLE, 'Exceeds maximum queue size'],
    ['unsupported', ServalError.unsupported('x'), status.UNIMPLEMENTED, 'infer: not supported by the fake core'],
    ['boom', new Error('boom'), status.INTERNAL, 'boom'],
    ['boom_async', new Error('boom'), status.INTERNAL, 'boom'],
  ];
  for (const [model, error, code, message] of cases) {
    it(`'true': a request failing in the core like '${model}' ends the stream with gRPC status ${code} and the error's message`, async () => {
      // The mapping under test is the one table's, not a second one.
      expect(grpcStatus(error instanceof ServalError ? error.code : 'INTERNAL')).toBe(code);
      const s = open('true');
      s.send(request('echo', 'first', [1]));
      await s.waitFor(1);
      s.send(request(`${QUEUED}${model}`, 'failing', [2]));
      const st = await s.status;
      expect(st.code).toBe(code);
      expect(st.details).toBe(message);
      // The response written before the error reached the client; the error itself is not in-band.
      expect(s.replies).toHaveLength(1);
      expect(okValues(s.replies[0]!, 'first')).toEqual([1]);
      // An unexpected fault is still logged with its request id.
      expect(errorLines(lines)).toHaveLength(code === status.INTERNAL ? 1 : 0);
      if (code === status.INTERNAL) expect(errorLines(lines)[0]).toMatch(/request_id=failing /);
    });
  }

  it('the first failure ends the stream at once: requests still in the core are cancelled, unsent answers dropped', async () => {
    const s = open('true');
    s.send(request('echo', 'done', [0]));
    await s.waitFor(1);
    for (const i of range(4)) s.send(request('hold', `h${i}`, [i]));
    await until(() => fake.held.length === 4, 'four requests in the core');
    // h3 is answered but waits behind h0 (request order); h2 then fails in the core.
    fake.held[3]!.complete();
    fake.held[2]!.fail(ServalError.invalidArg('the model refused h2'));
    const st = await s.status;
    expect(st.code).toBe(status.INVALID_ARGUMENT);
    expect(st.details).toBe('the model refused h2');
    // As Triton cancels a finished stream's requests in the core.
    await until(() => fake.held[0]!.cancelled && fake.held[1]!.cancelled, 'the pending requests cancelled');
    expect(fake.held.map((h) => h.req.cancellation?.cancelled)).toEqual([true, true, false, false]);
    // Only what was written before the failure reached the client: not h3's answer.
    expect(s.replies.map((r) => r.infer_response?.id)).toEqual(['done']);
    // Cancelled requests do not add anything (the stream is gone), nor is anything logged.
    await new Promise((r) => setImmediate(r));
    expect(lines).toEqual([]);
  });

  it('refusals of the request as issued (unknown model, invalid inputs, a full queue, a fault) stay in-band, as in Triton; a later failure in the core ends the stream', async () => {
    const s = open('true');
    s.send(request('invalid', 'bad', [1]));
    s.send(request('no_such_model', 'lost', [2]));
    s.send(request('busy', 'full', [3]));
    s.send(request('boom_async', 'fault', [4]));
    s.send(request('echo', 'ok', [5]));
    const r = await s.waitFor(5);
    expectFailed(r[0]!, 'bad', "[request id: <id_unknown>] infer: bad request for model 'invalid'");
    expectFailed(r[1]!, 'lost', UNKNOWN('no_such_model'));
    expectFailed(r[2]!, 'full', 'Exceeds maximum queue size');
    expectFailed(r[3]!, 'fault', 'boom');
    expect(okValues(r[4]!, 'ok')).toEqual([5]);
    s.send(request(`${QUEUED}invalid`, 'late', [6]));
    const st = await s.status;
    expect(st.code).toBe(status.INVALID_ARGUMENT);
    expect(s.replies).toHaveLength(5);
  });

  it('requests the front-end cannot read stay in-band, as Triton answers errors found before the core', async () => {
    const s = open('true');
    s.send({ model_name: 'echo', id: 'm1', inputs: [{ name: 'A', datatype: 'INT33', shape: [1], contents: { int_contents: [1] } }] });
    s.send(request('echo', 'm2', [1], { parameters: { triton_enable_empty_final_response: { string_param: 'yes' } } }));
    s.send(request('echo', 'good', [7]));
    const r = await s.waitFor(3);
    expectFailed(r[0]!, 'm1', "input 'A' has unknown datatype 'INT33'");
    expectFailed(r[1]!, 'm2', "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.");
    expect(okValues(r[2]!, 'good')).toEqual([7]);
    // The stream is still in the header's mode: the core's first error ends it.
    s.send(request(`${QUEUED}busy`, 'full', [8]));
    const st = await s.status;
    expect(st.code).toBe(status.UNAVAILABLE);
    expect(st.details).toBe('Exceeds maximum queue size');
    expect(s.replies).toHaveLength(3);
  });

  it('a failed stream leaves the others alone: one in the default mode on the same server goes on', async () => {
    const strict = open('true');
    const plain = open();
    strict.send(request('hold', 's0', [1]));
    plain.send(request('hold', 'p0', [2]));
    await until(() => fake.held.length === 2, 'both requests in the core');
    // Two connections: which request reached the core first is not fixed.
    const held = (id: string): Held => fake.held.find((h) => h.req.id === id)!;
    strict.send(request(`${QUEUED}invalid`, 's1', [3]));
    expect((await strict.status).code).toBe(status.INVALID_ARGUMENT);
    await until(() => held('s0').cancelled, 'the strict stream’s request cancelled');
    expect(held('p0').cancelled).toBe(false);
    held('p0').complete();
    plain.send(request('invalid', 'p1', [4]));
    const r = await plain.waitFor(2);
    expect(okValues(r[0]!, 'p0')).toEqual([2]);
    expectFailed(r[1]!, 'p1', "[request id: <id_unknown>] infer: bad request for model 'invalid'");
    // A new stream with the header works from the start.
    const again = open('true');
    again.send(request('echo', 'again', [5]));
    const [a] = await again.waitFor(1);
    expect(okValues(a!, 'again')).toEqual([5]);
    again.end();
    plain.end();
    expect((await again.status).code).toBe(status.OK);
    expect((await plain.status).code).toBe(status.OK);
  });

  it('without errors, a stream with the header half-closes and ends OK like any other', async () => {
    const s = open('true');
    for (const i of range(3)) s.send(request('hold', `h${i}`, [i]));
    await until(() => fake.held.length === 3, 'three requests in the core');
    s.end();
    for (const h of [...fake.held].reverse()) h.complete();
    expect((await s.status).code).toBe(status.OK);
    expect(s.replies.map((r) => r.infer_response?.id)).toEqual(['h0', 'h1', 'h2']);
  });
});
