// Decoupled models over gRPC (src/frontends/grpc/stream.ts, unary_infer.ts) in-process: a grpc-js
// server on port 0 over the fake core, whose decoupled models answer a request any number of
// times. `decoupled_held` requests answer only when the test makes them, so every interleaving
// below is forced by the test, never by timing. Triton's stream_infer_handler.cc and
// infer_handler.cc are the reference (docs/protocol.md).
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServalClientError } from '../../src/client/errors.js';
import { GrpcClient as NodeClient } from '../../src/client/grpc.js';
import type { Result } from '../../src/client/types.js';
import type { CoreApi } from '../../src/core/api.js';
import { readInferRequest } from '../../src/frontends/grpc/infer_wire.js';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { GRPC_ERROR_HEADER, streamInfer } from '../../src/frontends/grpc/stream.js';
import { DECOUPLED_REFUSAL } from '../../src/frontends/grpc/unary_infer.js';
import { ByteBudget } from '../../src/kernel/byte_budget.js';
import type { DataType } from '../../src/kernel/datatypes.js';
import { ServalError } from '../../src/kernel/errors.js';
import type { InferRequest, InferResponse, ResponseSink } from '../../src/kernel/types.js';
import { capturedLogger, errorLines, fakeCore } from '../helpers/frontends.js';
import { grpcClient, packageDefinition, status } from '../helpers/grpc.js';
import { type InferStreamClient, openInferStream, type StreamReply } from '../helpers/grpc_stream.js';
import { fromI32, i32, range } from '../helpers/tensors.js';

/** A decoupled request the test answers through its sink. */
interface Held {
  req: InferRequest;
  /** One response echoing `values` as OUT. */
  send(values: number[], final?: boolean): void;
  /** The final flag alone. */
  end(): void;
  error(e: ServalError, final: boolean): void;
  /** Its Cancellation fired; the model then ends it with a final CANCELLED error, as Serval's instances do. */
  cancelled: boolean;
}

/** A non-decoupled request the test completes. */
interface Pending {
  req: InferRequest;
  complete(): void;
}

const response = (req: InferRequest, values: number[]): InferResponse => ({
  modelName: req.modelName,
  modelVersion: '1',
  id: req.id,
  outputs: [{ name: 'OUT', datatype: 'INT32' as DataType, shape: [values.length], data: i32(values) }],
});

/**
 * fakeCore() plus: `decoupled_held` (taken in, then answered by the test through `held`);
 * `decoupled_refuse` (refused before it is taken in, as a full queue is); and the non-decoupled
 * `hold`, answered once when the test completes it (in `pending`).
 */
function decoupledCore(): { core: CoreApi; base: ReturnType<typeof fakeCore>; held: Held[]; pending: Pending[] } {
  const base = fakeCore();
  const held: Held[] = [];
  const pending: Pending[] = [];
  const core: CoreApi = {
    ...base,
    inferStream(req: InferRequest, sink: ResponseSink): void {
      if (req.modelName === 'decoupled_refuse') {
        base.requests.push(req);
        sink.error(ServalError.unavailable('Exceeds maximum queue size'), true);
        return;
      }
      if (req.modelName === 'hold') {
        base.requests.push(req);
        req.admitted?.();
        pending.push({ req, complete: () => sink.response(response(req, [req.inputs.length]), true) });
        return;
      }
      if (req.modelName !== 'decoupled_held') {
        base.inferStream(req, sink);
        return;
      }
      base.requests.push(req);
      req.admitted?.();
      let ended = false;
      const h: Held = {
        req,
        send: (values, final = false) => {
          if (ended) return;
          ended = final;
          sink.response(response(req, values), final);
        },
        end: () => {
          if (ended) return;
          ended = true;
          sink.response(undefined, true);
        },
        error: (e, final) => {
          if (ended) return;
          ended = final;
          sink.error(e, final);
        },
        cancelled: false,
      };
      req.cancellation?.onCancel(() => {
        h.cancelled = true;
        h.error(ServalError.cancelled('request was cancelled'), true);
      });
      held.push(h);
    },
  };
  return { core, base, held, pending };
}

/** A ModelInferRequest with one INT32 input IN holding `values`. */
function request(model: string, id: string, values: number[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model_name: model,
    id,
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [values.length] }],
    raw_input_contents: [i32(values)],
    ...extra,
  };
}

const EMPTY_FINAL = { parameters: { triton_enable_empty_final_response: { bool_param: true } } };

const until = async (cond: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
};

const finalOf = (r: StreamReply): boolean | undefined => r.infer_response?.parameters.triton_final_response?.bool_param;

/** A successful response: its id, its final flag, and the INT32 values of its one output. */
function ok(r: StreamReply): { id: string; final: boolean | undefined; values: number[] } {
  expect(r.error_message).toBe('');
  const res = r.infer_response!;
  // Triton flags every streamed response, as a bool.
  expect(res.parameters.triton_final_response?.parameter_choice).toBe('bool_param');
  return { id: res.id, final: finalOf(r), values: fromI32(res.raw_output_contents[0]!) };
}

/** The messages the stream has for request `id` so far. */
const of = (replies: readonly StreamReply[], id: string): StreamReply[] => replies.filter((r) => r.infer_response?.id === id);

describe('gRPC ModelStreamInfer with decoupled models', () => {
  let g: GrpcServer;
  let lines: string[];
  let fake: ReturnType<typeof decoupledCore>;
  let budget: ByteBudget;
  let stream: InferStreamClient;
  const streams: InferStreamClient[] = [];
  const open = (metadata?: grpc.Metadata): InferStreamClient => {
    const s = openInferStream(`127.0.0.1:${g.port}`, metadata);
    streams.push(s);
    return s;
  };

  beforeEach(async () => {
    fake = decoupledCore();
    const logged = capturedLogger();
    lines = logged.lines;
    // Limit 0: no limit, but every request's bytes are counted while it is in flight.
    budget = new ByteBudget(0);
    g = await startGrpcServer(fake.core, logged.log, '127.0.0.1', 0, { budget });
    stream = open();
  });
  afterEach(() => {
    for (const s of streams.splice(0)) s.close();
    g.server.forceShutdown();
  });

  it('writes each response of a decoupled request as its own message with the request id; only the last is flagged final', async () => {
    stream.send(request('decoupled_3', 'd', [4, 5, 6], { model_version: '1' }));
    const replies = await stream.waitFor(3);
    expect(replies.map(ok)).toEqual([
      { id: 'd', final: false, values: [4, 5, 6] },
      { id: 'd', final: false, values: [4, 5, 6] },
      { id: 'd', final: true, values: [4, 5, 6] },
    ]);
    for (const r of replies) {
      expect(r.infer_response?.model_name).toBe('decoupled_3');
      expect(r.infer_response?.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([['IN', 'INT32', ['3']]]);
    }
    stream.end();
    expect((await stream.status).code).toBe(status.OK);
    // The final response was the third; nothing follows it.
    expect(stream.replies).toHaveLength(3);
    expect(budget.inFlight).toBe(0);
  });

  it('writes a response as soon as the model sends it, before the request ends', async () => {
    stream.send(request('decoupled_held', 'h', [1]));
    await until(() => fake.held.length === 1, 'the request in the core');
    const h = fake.held[0]!;
    for (const i of range(3)) {
      h.send([i]);
      const r = await stream.waitFor(i + 1);
      expect(ok(r[i]!)).toEqual({ id: 'h', final: false, values: [i] });
    }
    // Still answering: its bytes are still held against the budget.
    expect(budget.inFlight).toBe(4);
    h.send([9], true);
    const r = await stream.waitFor(4);
    expect(ok(r[3]!)).toEqual({ id: 'h', final: true, values: [9] });
    expect(budget.inFlight).toBe(0);
  });

  it('responses from timers arrive in the order the model sent them', async () => {
    stream.send(request('decoupled_async_5', 'a', [7, 7]));
    const replies = await stream.waitUntil((r) => r.some((x) => finalOf(x) === true), 'the final response');
    expect(replies.map((r) => ok(r).final)).toEqual([false, false, false, false, true]);
    stream.end();
    expect((await stream.status).code).toBe(status.OK);
    expect(stream.replies).toHaveLength(5);
  });

  it('interleaves the responses of two decoupled requests as the model produces them', async () => {
    stream.send(request('decoupled_held', 'A', [1]));
    stream.send(request('decoupled_held', 'B', [2]));
    await until(() => fake.held.length === 2, 'both requests in the core');
    const [a, b] = fake.held as [Held, Held];
    // B answers before A although A came first, and their responses alternate.
    b.send([20]);
    await stream.waitFor(1);
    a.send([10]);
    await stream.waitFor(2);
    b.send([21]);
    await stream.waitFor(3);
    a.send([11], true);
    await stream.waitFor(4);
    b.send([22], true);
    const replies = await stream.waitFor(5);
    expect(replies.map(ok)).toEqual([
      { id: 'B', final: false, values: [20] },
      { id: 'A', final: false, values: [10] },
      { id: 'B', final: false, values: [21] },
      { id: 'A', final: true, values: [11] },
      { id: 'B', final: true, values: [22] },
    ]);
  });

  it('a decoupled request does not wait for an earlier non-decoupled one, which keep request order among themselves', async () => {
    stream.send(request('hold', 'n0', [1]));
    stream.send(request('decoupled_held', 'd', [2]));
    stream.send(request('hold', 'n1', [3]));
    await until(() => fake.pending.length === 2 && fake.held.length === 1, 'all three requests in the core');
    fake.held[0]!.send([5]);
    fake.held[0]!.send([6], true);
    await stream.waitFor(2);
    // n1 done first still waits for n0.
    fake.pending[1]!.complete();
    await new Promise((r) => setTimeout(r, 20));
    expect(stream.replies.map((r) => r.infer_response?.id)).toEqual(['d', 'd']);
    fake.pending[0]!.complete();
    const replies = await stream.waitFor(4);
    expect(replies.map((r) => [r.infer_response?.id, finalOf(r)])).toEqual([
      ['d', false],
      ['d', true],
      ['n0', true],
      ['n1', true],
    ]);
  });

  it('the final flag alone is dropped unless the request set triton_enable_empty_final_response', async () => {
    stream.send(request('decoupled_0', 'quiet', [1]));
    stream.send(request('decoupled_0', 'quiet_false', [1], { parameters: { triton_enable_empty_final_response: { bool_param: false } } }));
    stream.send(request('decoupled_0', 'loud', [1], { model_version: '1', ...EMPTY_FINAL }));
    stream.send(request('decoupled_0', 'loud_unversioned', [1], EMPTY_FINAL));
    const replies = await stream.waitFor(2);
    stream.end();
    expect((await stream.status).code).toBe(status.OK);
    expect(stream.replies).toHaveLength(2);
    // An empty response named after the request as it was sent, flagged final.
    expect(replies.map((r) => [r.error_message, r.infer_response])).toEqual([
      [
        '',
        expect.objectContaining({
          id: 'loud',
          model_name: 'decoupled_0',
          model_version: '1',
          outputs: [],
          raw_output_contents: [],
          parameters: { triton_final_response: expect.objectContaining({ bool_param: true }) },
        }),
      ],
      ['', expect.objectContaining({ id: 'loud_unversioned', model_name: 'decoupled_0', model_version: '', outputs: [] })],
    ]);
    expect(Object.keys(replies[1]!.infer_response!.parameters)).toEqual(['triton_final_response']);
    // The parameter is the front-end's: the core never sees it.
    for (const q of fake.base.requests) expect(q.parameters).toEqual({});
  });

  it('with the parameter, a request whose last response is a full one gets no extra empty one; one ended by the flag alone gets it', async () => {
    stream.send(request('decoupled_2', 'full', [3], EMPTY_FINAL));
    const full = await stream.waitFor(2);
    expect(full.map((r) => ok(r).final)).toEqual([false, true]);
    stream.send(request('decoupled_held', 'flag', [4], EMPTY_FINAL));
    await until(() => fake.held.length === 1, 'the request in the core');
    fake.held[0]!.send([1]);
    fake.held[0]!.end();
    const replies = await stream.waitFor(4);
    expect(ok(replies[2]!)).toEqual({ id: 'flag', final: false, values: [1] });
    expect(replies[3]!.infer_response?.outputs).toEqual([]);
    expect(finalOf(replies[3]!)).toBe(true);
    stream.end();
    expect((await stream.status).code).toBe(status.OK);
    expect(stream.replies).toHaveLength(4);
  });

  it('a wrong triton_enable_empty_final_response fails the request before the core, answered at once (not behind earlier requests)', async () => {
    stream.send(request('hold', 'first', [1]));
    await until(() => fake.pending.length === 1, 'the held request');
    stream.send(request('decoupled_2', 'bad', [1], { parameters: { triton_enable_empty_final_response: { int64_param: '1' } } }));
    const [r] = await stream.waitFor(1);
    expect(r!.error_message).toBe("invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.");
    // Refused before issue: Triton clears the response and puts back only the id.
    expect(r!.infer_response).toEqual(expect.objectContaining({ id: 'bad', model_name: '', parameters: {}, outputs: [] }));
    expect(fake.base.requests.map((q) => q.id)).toEqual(['first']);
    fake.pending[0]!.complete();
    await stream.waitFor(2);
  });

  it('an error mid-way goes in-band naming the request, flagged not final, and the request goes on; a final error ends it', async () => {
    stream.send(request('decoupled_held', 'e', [1], { model_version: '1' }));
    await until(() => fake.held.length === 1, 'the request in the core');
    const h = fake.held[0]!;
    h.send([1]);
    h.error(ServalError.invalidArg('the model disliked element 2'), false);
    h.send([3]);
    h.error(ServalError.unavailable('the model gave up'), true);
    const replies = await stream.waitFor(4);
    expect(ok(replies[0]!)).toEqual({ id: 'e', final: false, values: [1] });
    expect(ok(replies[2]!)).toEqual({ id: 'e', final: false, values: [3] });
    // As Triton's response callback fills a failed response: cleared, then id, model name and version and the flag.
    expect([replies[1]!.error_message, replies[3]!.error_message]).toEqual(['the model disliked element 2', 'the model gave up']);
    for (const [r, final] of [
      [replies[1]!, false],
      [replies[3]!, true],
    ] as const) {
      expect(r.infer_response).toEqual(
        expect.objectContaining({ id: 'e', model_name: 'decoupled_held', model_version: '1', outputs: [], raw_output_contents: [] }),
      );
      expect(finalOf(r)).toBe(final);
    }
    expect(budget.inFlight).toBe(0);
    // The stream goes on.
    stream.send(request('decoupled_1', 'next', [8]));
    const after = await stream.waitFor(5);
    expect(ok(after[4]!)).toEqual({ id: 'next', final: true, values: [8] });
    // Refusals and the model's own errors are answers, not server faults.
    expect(errorLines(lines)).toEqual([]);
  });

  it('a server fault after a response is in-band and logged with the request id', async () => {
    stream.send(request('decoupled_fail', 'f', [2]));
    const replies = await stream.waitFor(2);
    expect(ok(replies[0]!)).toEqual({ id: 'f', final: false, values: [2] });
    expect(replies[1]!.error_message).toBe('the model failed after its first response');
    expect(finalOf(replies[1]!)).toBe(true);
    const errors = errorLines(lines);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/method=\/inference\.GRPCInferenceService\/ModelStreamInfer request_id=f /);
  });

  it('a decoupled request refused before the core took it in is answered with its id only', async () => {
    stream.send(request('decoupled_refuse', 'r', [1]));
    const [r] = await stream.waitFor(1);
    expect(r!.error_message).toBe('Exceeds maximum queue size');
    expect(r!.infer_response).toEqual(expect.objectContaining({ id: 'r', model_name: '', model_version: '', parameters: {}, outputs: [] }));
    expect(budget.inFlight).toBe(0);
  });

  it('after the client half-closes, the stream ends only once every decoupled request has sent its final response', async () => {
    stream.send(request('decoupled_held', 'x', [1]));
    stream.send(request('decoupled_held', 'y', [2]));
    await until(() => fake.held.length === 2, 'both requests in the core');
    stream.end();
    let ended = false;
    void stream.status.then(() => (ended = true));
    fake.held[0]!.send([1], true);
    fake.held[1]!.send([2]);
    await stream.waitFor(2);
    await new Promise((r) => setTimeout(r, 20));
    expect(ended).toBe(false);
    fake.held[1]!.end();
    expect((await stream.status).code).toBe(status.OK);
    expect(stream.replies.map((r) => [r.infer_response?.id, finalOf(r)])).toEqual([
      ['x', true],
      ['y', false],
    ]);
    expect(fake.held.some((h) => h.cancelled)).toBe(false);
  });

  it('cancelling the stream cancels every decoupled request still answering, and their budget is given back', async () => {
    stream.send(request('decoupled_forever', 'forever', range(100)));
    stream.send(request('decoupled_held', 'held', [1, 2, 3]));
    stream.send(request('decoupled_1', 'done', [4]));
    await stream.waitUntil((r) => of(r, 'forever').length === 1 && of(r, 'done').length === 1, 'the first responses');
    await until(() => fake.held.length === 1, 'the held request');
    fake.held[0]!.send([1]);
    await stream.waitUntil((r) => of(r, 'held').length === 1, 'the held request’s response');
    expect(budget.inFlight).toBe(4 * 103);
    stream.cancel();
    expect((await stream.status).code).toBe(status.CANCELLED);
    // The models hear of it: each ends its request (a final CANCELLED error, written nowhere).
    await until(() => fake.base.cancelled.length === 1 && fake.held[0]!.cancelled, 'both models to see the cancellation');
    expect(fake.base.cancelled.map((q) => q.id)).toEqual(['forever']);
    expect(fake.base.requests.find((q) => q.id === 'done')?.cancellation?.cancelled).toBe(false);
    await until(() => budget.inFlight === 0, 'the budget given back');
    // A model that sends after the end is ignored, and the server is fine.
    fake.held[0]!.send([5], true);
    const next = open();
    next.send(request('decoupled_1', 'again', [6]));
    const [r] = await next.waitFor(1);
    expect(ok(r!)).toEqual({ id: 'again', final: true, values: [6] });
    expect(errorLines(lines)).toEqual([]);
  });

  it('a request cancelled while its responses come from timers stops them', async () => {
    stream.send(request('decoupled_async_1000', 'long', [1]));
    await stream.waitFor(2);
    stream.cancel();
    await until(() => fake.base.cancelled.length === 1, 'the model to see the cancellation');
    const sent = fake.base.cancelled[0]!;
    expect(sent.id).toBe('long');
    expect(budget.inFlight).toBe(0);
  });

  it('triton_grpc_error: an error after admission ends the stream with its status; the stream’s other requests are cancelled', async () => {
    const md = new grpc.Metadata();
    md.set(GRPC_ERROR_HEADER, 'true');
    const s = open(md);
    s.send(request('decoupled_held', 'p', [1]));
    s.send(request('decoupled_held', 'q', [2]));
    await until(() => fake.held.length === 2, 'both requests in the core');
    const [p, q] = fake.held as [Held, Held];
    p.send([1]);
    await s.waitFor(1);
    // A refusal stays in-band in this mode too.
    s.send(request('decoupled_refuse', 'r', [3]));
    await s.waitFor(2);
    q.error(ServalError.invalidArg('q went wrong'), false);
    const st = await s.status;
    expect(st.code).toBe(status.INVALID_ARGUMENT);
    expect(st.details).toBe('q went wrong');
    await until(() => p.cancelled && q.cancelled, 'both requests cancelled');
    expect(s.replies.map((r) => [r.infer_response?.id, r.error_message])).toEqual([
      ['p', ''],
      ['r', 'Exceeds maximum queue size'],
    ]);
    await until(() => budget.inFlight === 0, 'the budget given back');
  });
});

describe('gRPC ModelStreamInfer: what is written after the stream ends', () => {
  /** A duplex call as grpc-js hands it to the handler: requests go in as events, writes are kept. */
  class FakeCall extends EventEmitter {
    readonly written: Buffer[] = [];
    readonly metadata = new grpc.Metadata();
    ended = false;
    write(b: Buffer): boolean {
      this.written.push(b);
      return true;
    }
    end(): void {
      this.ended = true;
    }
    getPath(): string {
      return '/inference.GRPCInferenceService/ModelStreamInfer';
    }
  }
  const method = (): protoLoader.MethodDefinition<object, object> =>
    (packageDefinition()['inference.GRPCInferenceService'] as protoLoader.ServiceDefinition)
      .ModelStreamInfer as protoLoader.MethodDefinition<object, object>;
  const incoming = (req: Record<string, unknown>) => readInferRequest(method().requestSerialize(req));
  const decode = (b: Buffer): StreamReply => method().responseDeserialize(b) as StreamReply;

  it('a cancelled stream writes nothing more, whatever its decoupled requests still send, and ends each one’s trace', async () => {
    const fake = decoupledCore();
    const budget = new ByteBudget(0);
    const { handler } = streamInfer(fake.core, capturedLogger().log, budget);
    const call = new FakeCall();
    handler(call as unknown as Parameters<typeof handler>[0]);
    call.emit('data', incoming(request('decoupled_held', 'a', [1, 2])));
    call.emit('data', incoming(request('hold', 'n', [3])));
    call.emit('data', incoming(request('decoupled_held', 'b', [4])));
    const [a, b] = fake.held as [Held, Held];
    a.send([1]);
    expect(call.written.map(decode).map((r) => r.infer_response?.id)).toEqual(['a']);
    // The model of `b` will not stop on a cancel: it keeps answering until it ends the request.
    b.req.cancellation?.onCancel(() => {
      b.cancelled = true;
    });
    call.emit('cancelled');
    expect(a.cancelled).toBe(true);
    expect(b.cancelled).toBe(true);
    expect(fake.pending[0]!.req.cancellation?.cancelled).toBe(true);
    b.send([5]);
    b.send([6]);
    fake.pending[0]!.complete();
    expect(call.written).toHaveLength(1);
    expect(call.ended).toBe(false);
    // b still holds its bytes until its final answer.
    expect(budget.inFlight).toBe(4);
    b.send([7], true);
    expect(budget.inFlight).toBe(0);
    expect(call.written).toHaveLength(1);
  });

  it('with the trace extension sampling, a decoupled request’s trace is written once, after its final response', () => {
    const fake = decoupledCore();
    const traced: CoreApi = { ...fake.core, startTrace: () => fake.base.startTrace('traced') };
    const { handler } = streamInfer(traced, capturedLogger().log);
    const call = new FakeCall();
    handler(call as unknown as Parameters<typeof handler>[0]);
    call.emit('data', incoming(request('decoupled_held', 't', [1])));
    const h = fake.held[0]!;
    h.send([1]);
    h.send([2]);
    const trace = fake.base.traces[0]!;
    expect(trace.ended).toBe(0);
    h.send([3], true);
    expect(trace.ended).toBe(1);
    expect(trace.names()).toEqual([
      'GRPC_WAITREAD_START',
      'GRPC_WAITREAD_END',
      'INFER_RESPONSE_COMPLETE',
      ...range(3).flatMap(() => ['GRPC_SEND_START', 'GRPC_SEND_END']),
    ]);
    expect(call.written.map(decode).map(finalOf)).toEqual([false, false, true]);
  });
});

describe('unary ModelInfer on a decoupled model', () => {
  let g: GrpcServer;
  let fake: ReturnType<typeof decoupledCore>;
  let lines: string[];

  beforeEach(async () => {
    fake = decoupledCore();
    const logged = capturedLogger();
    lines = logged.lines;
    g = await startGrpcServer(fake.core, logged.log, '127.0.0.1', 0);
  });
  afterEach(() => {
    g.server.forceShutdown();
  });

  it('is refused UNIMPLEMENTED with Triton’s text on the own transport and through grpc-js, before the core sees it', async () => {
    // Triton: TRITONSERVER_ERROR_UNSUPPORTED, which its gRPC status table makes UNIMPLEMENTED.
    expect(DECOUPLED_REFUSAL).toBe("ModelInfer RPC doesn't support models with decoupled transaction policy");
    const plain = grpcClient(`127.0.0.1:${g.port}`);
    // A compressed call is not taken by the own transport: grpc-js serves it.
    const compressed = new grpc.Client(`127.0.0.1:${g.port}`, grpc.credentials.createInsecure(), {
      'grpc.default_compression_algorithm': grpc.compressionAlgorithms.gzip,
    });
    const m = (packageDefinition()['inference.GRPCInferenceService'] as protoLoader.ServiceDefinition).ModelInfer!;
    const viaGrpcJs = (req: Record<string, unknown>) =>
      new Promise<grpc.ServiceError>((resolve, reject) =>
        compressed.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, req, (err) =>
          err ? resolve(err) : reject(new Error('expected ModelInfer to fail')),
        ),
      );
    try {
      for (const model of ['decoupled_2', 'decoupled_0', 'decoupled_held']) {
        for (const e of [await plain.error('ModelInfer', request(model, 'u', [1])), await viaGrpcJs(request(model, 'u', [1]))]) {
          expect({ code: e.code, details: e.details }).toEqual({ code: status.UNIMPLEMENTED, details: DECOUPLED_REFUSAL });
        }
      }
      // Triton checks the transaction policy before the request's parameters and inputs.
      const bad = request('decoupled_2', 'bad', [1], { parameters: { priority: { string_param: 'high' } }, raw_input_contents: [] });
      const e = await plain.error('ModelInfer', bad);
      expect({ code: e.code, details: e.details }).toEqual({ code: status.UNIMPLEMENTED, details: DECOUPLED_REFUSAL });
      expect(fake.base.requests).toEqual([]);
      // Not a server fault: nothing logged. Models that are not decoupled are served as before.
      expect(lines).toEqual([]);
      const nf = await plain.error('ModelInfer', request('no_such_model', 'n', [1]));
      expect(nf.code).toBe(status.NOT_FOUND);
    } finally {
      plain.close();
      compressed.close();
    }
  });

  it('the same request goes through on a stream', async () => {
    const s = openInferStream(`127.0.0.1:${g.port}`);
    try {
      s.send(request('decoupled_2', 'u', [1]));
      const replies = await s.waitFor(2);
      expect(replies.map(ok).map((r) => r.final)).toEqual([false, true]);
    } finally {
      s.close();
    }
  });
});

describe('the Node client’s stream with decoupled models', () => {
  let g: GrpcServer;
  let client: NodeClient;

  beforeEach(async () => {
    g = await startGrpcServer(decoupledCore().core, capturedLogger().log, '127.0.0.1', 0);
    client = new NodeClient(`127.0.0.1:${g.port}`);
  });
  afterEach(() => {
    client.close();
    g.server.forceShutdown();
  });

  const input = (values: number[]) => [{ name: 'IN', shape: [values.length], data: new Int32Array(values) }];

  it('inferEach hands over every response with its final flag and resolves after the last', async () => {
    const stream = client.stream();
    try {
      const got: [number[] | string, boolean][] = [];
      const each = (r: Result | ServalClientError, final: boolean): void => {
        got.push([r instanceof ServalClientError ? r.message : Array.from(r.output('IN', 'INT32').data), final]);
      };
      await stream.inferEach('decoupled_3', input([1, 2]), {}, each);
      expect(got).toEqual([
        [[1, 2], false],
        [[1, 2], false],
        [[1, 2], true],
      ]);
      got.length = 0;
      await stream.inferEach('decoupled_fail', input([3]), {}, each);
      expect(got).toEqual([
        [[3], false],
        ['the model failed after its first response', true],
      ]);
      // Only the final flag: with the option an empty response says the request is over.
      const empty: Result[] = [];
      await stream.inferEach('decoupled_0', input([4]), { enableEmptyFinalResponse: true, id: 'e' }, (r, final) => {
        expect(final).toBe(true);
        empty.push(r as Result);
      });
      expect(empty.map((r) => [r.id, r.modelName, r.outputs.length])).toEqual([['e', 'decoupled_0', 0]]);
      // The ids are free again once a request has had its final response.
      await stream.inferEach('decoupled_1', input([5]), { id: 'e' }, () => undefined);
    } finally {
      stream.end();
    }
  });

  it('infer resolves with the first response; onResponse sees them all, with their flags', async () => {
    const stream = client.stream();
    const seen: [string, boolean][] = [];
    stream.onResponse = (_r, id, final) => seen.push([id, final]);
    try {
      const r = await stream.infer('decoupled_2', input([6]), { id: 'two' });
      expect(Array.from(r.output('IN', 'INT32').data)).toEqual([6]);
      await until(() => seen.length === 2, 'both responses');
      expect(seen).toEqual([
        ['two', false],
        ['two', true],
      ]);
      // A second request with the same id while the first still answers is refused.
      const held = stream.infer('decoupled_forever', input([7]), { id: 'busy' });
      await held;
      await expect(stream.infer('decoupled_1', input([8]), { id: 'busy' })).rejects.toThrow("request id 'busy' is already in flight");
    } finally {
      stream.cancel();
    }
  });
});
