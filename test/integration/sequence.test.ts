// The sequence batcher end to end on the built server and ONNX Runtime: the bundled
// simple_sequence (direct), simple_dyna_sequence (oldest, CORRID) and running_sum (implicit state)
// over HTTP, gRPC and the gRPC stream with interleaved sequences; Triton's errors; the idle
// timeout and an initial_state data file on a fixture model; the statistics and metadata.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildRunningSum } from '../../tools/onnx/sequence_models.js';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { openInferStream } from '../helpers/grpc_stream.js';
import { get, inferJson, request } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { fromI32, i32, range } from '../helpers/tensors.js';

// Triton's example clients' values: sequences [0] + VALUES and [100] + -VALUES.
const VALUES = [11, 7, 5, 3, 2, 0, 1];
const SEQ_A = [0, ...VALUES];
const SEQ_B = [100, ...VALUES.map((v) => 0 - v)];
const running = (xs: number[]): number[] => xs.map((_, i) => xs.slice(0, i + 1).reduce((s, x) => s + x, 0));

type Id = number | string | bigint;

function httpInfer(url: string, model: string, id: Id, value: number, start: boolean, end: boolean) {
  return inferJson(url, model, {
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [value] }],
    parameters: { sequence_id: typeof id === 'bigint' ? Number(id) : id, sequence_start: start, sequence_end: end },
  });
}

const grpcId = (id: Id): Record<string, unknown> =>
  typeof id === 'string' ? { string_param: id } : typeof id === 'bigint' ? { uint64_param: id.toString() } : { int64_param: String(id) };

function grpcRequest(model: string, id: Id, value: number, start: boolean, end: boolean, reqId = ''): Record<string, unknown> {
  return {
    model_name: model,
    id: reqId,
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }],
    raw_input_contents: [i32([value])],
    parameters: { sequence_id: grpcId(id), sequence_start: { bool_param: start }, sequence_end: { bool_param: end } },
  };
}

/**
 * Sends several sequences interleaved, one request of each in turn (every request after the
 * previous answer of its own sequence): returns each sequence's outputs.
 */
async function interleaved(send: (id: Id, v: number, start: boolean, end: boolean) => Promise<number>, seqs: [Id, number[]][]) {
  const outs = seqs.map((): number[] => []);
  const longest = Math.max(...seqs.map(([, v]) => v.length));
  for (let i = 0; i < longest; i++) {
    await Promise.all(
      seqs.map(async ([id, vals], k) => {
        if (i >= vals.length) return;
        outs[k]!.push(await send(id, vals[i]!, i === 0, i === vals.length - 1));
      }),
    );
  }
  return outs;
}

describe('sequence models on the example repository', () => {
  let server: ServerHandle;
  let client: GrpcClient;
  beforeAll(async () => {
    server = await startServer(inject('modelRepository'));
    client = grpcClient(server.grpcAddress);
  });
  afterAll(async () => {
    client?.close();
    await server?.stop();
  });

  const viaHttp = (model: string) => async (id: Id, v: number, start: boolean, end: boolean) => {
    const res = await httpInfer(server.url, model, id, v, start, end);
    expect(res.status, res.text()).toBe(200);
    return res.json().outputs[0].data[0] as number;
  };
  const viaGrpc = (model: string) => async (id: Id, v: number, start: boolean, end: boolean) => {
    const res = await client.call('ModelInfer', grpcRequest(model, id, v, start, end));
    return fromI32(res.raw_output_contents[0])[0]!;
  };

  it("simple_sequence over HTTP: the outputs Triton's example client expects, integer and string IDs", async () => {
    const [a, b, c] = await interleaved(viaHttp('simple_sequence'), [
      [1000, SEQ_A],
      [1001, SEQ_B],
      ['0b1e2c3d-uuid', [20, ...VALUES.map((v) => 0 - v)]],
    ]);
    expect(a).toEqual([1, ...VALUES]);
    expect(b).toEqual([101, ...VALUES.map((v) => 0 - v)]);
    expect(c).toEqual([21, ...VALUES.map((v) => 0 - v)]);
  });

  it('simple_dyna_sequence over gRPC: the correlation ID (int64, uint64) reaches the model at END', async () => {
    const big = 2n ** 63n + 1003n;
    const [a, b] = await interleaved(viaGrpc('simple_dyna_sequence'), [
      [1002, SEQ_A],
      [big, SEQ_B],
    ]);
    expect(a).toEqual([1, ...VALUES.slice(0, -1), 1 + 1002]);
    // The model adds the low 32 bits of the UINT64 CORRID.
    expect(b).toEqual([101, ...VALUES.slice(0, -1).map((v) => 0 - v), -1 + 1003]);
    // A string ID for a UINT64 CORRID control is refused, as Triton refuses it.
    const e = await client.error('ModelInfer', grpcRequest('simple_dyna_sequence', 'text-id', 5, true, true));
    expect(e.code).toBe(status.INVALID_ARGUMENT);
    expect(e.details).toBe("sequence batching control 'CORRID' data-type is 'BYTES', but model 'simple_dyna_sequence' expects 'UINT64'");
  });

  it('simple_string_dyna_sequence: a string correlation ID reaches its TYPE_STRING CORRID (read as a number at END); a numeric one is refused', async () => {
    const [a, b] = await interleaved(viaGrpc('simple_string_dyna_sequence'), [
      ['1002', SEQ_A],
      ['77', SEQ_B],
    ]);
    expect(a).toEqual([1, ...VALUES.slice(0, -1), 1 + 1002]);
    expect(b).toEqual([101, ...VALUES.slice(0, -1).map((v) => 0 - v), -1 + 77]);
    const res = await httpInfer(server.url, 'simple_string_dyna_sequence', 1002, 1, true, true);
    expect(res.status).toBe(400);
    expect(res.json().error).toBe(
      "sequence batching control 'CORRID' data-type is 'UINT64', but model 'simple_string_dyna_sequence' expects 'BYTES'",
    );
  });

  it('takes a uint64 correlation ID above 2^53 in HTTP JSON exactly', async () => {
    // JSON.stringify cannot write these IDs, so the body is text. 2^64 - 1 has -1 as its low 32 bits.
    const send = (id: string, start: boolean, end: boolean, v: number) =>
      request(server.url, 'POST', '/v2/models/simple_dyna_sequence/infer', {
        headers: { 'content-type': 'application/json' },
        body:
          `{"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[${v}]}],` +
          `"parameters":{"sequence_id":${id},"sequence_start":${start},"sequence_end":${end}}}`,
      });
    const max = '18446744073709551615';
    expect((await send(max, true, false, 10)).json().outputs[0].data).toEqual([11]);
    // 2^64 - 2 rounds to the same double: only exact IDs keep it a different, unknown sequence.
    const neighbour = await send('18446744073709551614', false, false, 1);
    expect(neighbour.status).toBe(400);
    expect(neighbour.json().error).toContain('inference request for sequence 18446744073709551614 ');
    expect((await send(max, false, true, 10)).json().outputs[0].data).toEqual([10 - 1]);
  });

  it('running_sum on one gRPC stream: the server keeps each sequence’s state between requests', async () => {
    const stream = openInferStream(server.grpcAddress);
    try {
      // Three sequences, their requests written in turn without waiting: the stream answers each
      // sequence's requests in order, and the state makes them running sums.
      const seqs: [Id, number[]][] = [
        [7, SEQ_A],
        ['s-8', SEQ_B],
        [9, range(5, (i) => i * 10)],
      ];
      let n = 0;
      for (let i = 0; i < SEQ_A.length; i++) {
        for (const [id, vals] of seqs) {
          if (i >= vals.length) continue;
          stream.send(grpcRequest('running_sum', id, vals[i]!, i === 0, i === vals.length - 1, `${String(id)}_${i}`));
          n += 1;
        }
      }
      const replies = await stream.waitFor(n);
      expect(replies.map((r) => r.error_message)).toEqual(range(n, () => ''));
      for (const [id, vals] of seqs) {
        const mine = replies.filter((r) => r.infer_response!.id.startsWith(`${String(id)}_`));
        expect(mine.map((r) => r.infer_response!.id)).toEqual(vals.map((_, i) => `${String(id)}_${i}`));
        expect(mine.map((r) => fromI32(r.infer_response!.raw_output_contents[0]!)[0])).toEqual(running(vals));
        // Only the configured output goes back; the state stays in the server.
        expect(mine[0]!.infer_response!.outputs.map((o) => o.name)).toEqual(['OUTPUT']);
      }
      stream.end();
      expect((await stream.status).code).toBe(status.OK);
    } finally {
      stream.close();
    }
  });

  it("answers Triton's errors: no START, no correlation ID, a batch of 2, a flag that is not a boolean", async () => {
    let res = await httpInfer(server.url, 'simple_sequence', 4242, 1, false, false);
    expect(res.status).toBe(400);
    expect(res.json().error).toBe(
      "inference request for sequence 4242 to model 'simple_sequence' must specify the START flag on the first request of the sequence",
    );
    const e = await client.error('ModelInfer', grpcRequest('simple_string_dyna_sequence', 'nope', 1, false, true));
    expect(e.code).toBe(status.INVALID_ARGUMENT);
    expect(e.details).toContain("inference request for sequence nope to model 'simple_string_dyna_sequence' must specify the START flag");
    res = await inferJson(server.url, 'running_sum', { inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [1] }] });
    expect(res.status).toBe(400);
    expect(res.json().error).toBe("inference request to model 'running_sum' must specify a non-zero or non-empty correlation ID");
    res = await inferJson(server.url, 'simple_sequence', {
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [2, 1], data: [1, 2] }],
      parameters: { sequence_id: 5, sequence_start: true },
    });
    expect(res.status).toBe(400);
    expect(res.json().error).toBe(
      "inference request to model 'simple_sequence' must specify batch-size 1 due to requirements of sequence batcher",
    );
    res = await inferJson(server.url, 'simple_sequence', {
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [1] }],
      parameters: { sequence_id: 5, sequence_start: 'yes' },
    });
    expect(res.status).toBe(400);
    expect(res.json().error).toContain("'sequence_start'");
    // Control inputs are the batcher's: a client cannot send one.
    res = await inferJson(server.url, 'simple_sequence', {
      inputs: [
        { name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [1] },
        { name: 'START', datatype: 'INT32', shape: [1, 1], data: [1] },
      ],
      parameters: { sequence_id: 5, sequence_start: true, sequence_end: true },
    });
    expect(res.status).toBe(400);
    expect(res.json().error).toContain("unexpected inference input 'START'");
  });

  it('reports the sequence extension, the normalised config and the statistics', async () => {
    const meta = (await get(server.url, '/v2')).json();
    expect(meta.extensions).toContain('sequence');
    const config = (await get(server.url, '/v2/models/simple_dyna_sequence/config')).json();
    expect(config.sequence_batching.oldest).toMatchObject({ max_candidate_sequences: 1024, preferred_batch_size: [8] });
    expect(config.sequence_batching.control_input.map((c: { name: string }) => c.name)).toEqual(['START', 'END', 'READY', 'CORRID']);
    const before = (await get(server.url, '/v2/models/running_sum/stats')).json().model_stats[0];
    await interleaved(viaHttp('running_sum'), [
      [31, [1, 2, 3]],
      [32, [4, 5, 6]],
    ]);
    const after = (await get(server.url, '/v2/models/running_sum/stats')).json().model_stats[0];
    expect(after.inference_count - before.inference_count).toBe(6);
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(6);
    // Two sequences in slots 0 and 1 of one instance: every execution has 1 or 2 rows.
    const rows = (st: { batch_stats: { batch_size: number; compute_infer: { count: number } }[] }) =>
      st.batch_stats.reduce((n, x) => n + x.batch_size * x.compute_infer.count, 0);
    const executed = after.execution_count - before.execution_count;
    expect(executed).toBeGreaterThanOrEqual(3);
    expect(executed).toBeLessThanOrEqual(6);
    expect(rows(after) - rows(before)).toBeGreaterThanOrEqual(6);
    expect(rows(after) - rows(before)).toBeLessThanOrEqual(2 * executed);
  });
});

describe('idle timeout and initial state on a fixture model', () => {
  let server: ServerHandle;
  let repo: Repo;
  beforeAll(async () => {
    // running_sum's graph with a 300 ms idle limit, one slot, and a state starting at 1000 read
    // from initial_state/start.bin.
    const m = buildRunningSum();
    const config = m.config
      .replace('name: "running_sum"', 'name: "idle_sum"')
      .replace('max_batch_size: 8', 'max_batch_size: 1')
      .replace('max_sequence_idle_microseconds: 5000000', 'max_sequence_idle_microseconds: 300000')
      .replace(
        'initial_state: { name: "zero" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true }',
        'initial_state: { name: "start" data_type: TYPE_INT32 dims: [ 1 ] data_file: "start.bin" }',
      );
    expect(config).toContain('data_file');
    repo = makeRepo([{ name: 'idle_sum', config, versions: { 1: m.onnx } }]);
    mkdirSync(path.join(repo.dir, 'idle_sum', 'initial_state'));
    writeFileSync(path.join(repo.dir, 'idle_sum', 'initial_state', 'start.bin'), i32([1000]));
    server = await startServer(repo.dir);
  });
  afterAll(async () => {
    await server?.stop();
    repo?.cleanup();
  });

  const send = (id: number, v: number, start = false, end = false) => httpInfer(server.url, 'idle_sum', id, v, start, end);

  it('starts each sequence from the initial_state file', async () => {
    const outs: number[] = [];
    for (const [i, v] of [1, 2, 3].entries()) outs.push((await send(1, v, i === 0, i === 2)).json().outputs[0].data[0]);
    expect(outs).toEqual([1001, 1003, 1006]);
  });

  it("frees the slot of an idle sequence for the backlog; the idle sequence's next request gets Triton's error", async () => {
    expect((await send(2, 5, true)).json().outputs[0].data[0]).toBe(1005);
    // Sequence 3 waits for the only slot, which sequence 2 loses after 300 ms idle.
    const third = await send(3, 7, true, true);
    expect(third.status, third.text()).toBe(200);
    expect(third.json().outputs[0].data[0]).toBe(1007);
    const late = await send(2, 1);
    expect(late.status).toBe(400);
    expect(late.json().error).toBe(
      "inference request for sequence 2 to model 'idle_sum' must specify the START flag on the first request of the sequence",
    );
  });
});
