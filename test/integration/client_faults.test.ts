// Client faults are 4xx (issue 25): BYTES data that simple_string cannot use — an element that is
// no decimal number, an empty one, one out of range, a lone surrogate in a JSON string (it arrives
// as U+FFFD), bytes that are not UTF-8 — is answered 400 / INVALID_ARGUMENT naming the input, over
// HTTP (JSON and the binary extension) and gRPC (typed and raw contents). Nothing is logged as a
// server fault, the server stays up and the next valid request succeeds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSimpleString } from '../../tools/onnx/models.js';
import { type GrpcClient, grpcClient, status } from '../helpers/grpc.js';
import { inferBinary, inferJson } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { bytesRaw, range, stringsOf } from '../helpers/tensors.js';

const model = buildSimpleString();
const ones = range(16, () => '1');
const numbers = range(16, (i) => String(i));
/** `numbers` with element `at` replaced. */
const withElement = (at: number, value: string): string[] => numbers.map((v, i) => (i === at ? value : v));

describe('BYTES the model cannot use are the client’s fault: 400 / INVALID_ARGUMENT', () => {
  let repo: Repo;
  let server: ServerHandle;
  let grpc: GrpcClient;
  beforeAll(async () => {
    repo = makeRepo([{ name: 'simple_string', config: model.config, versions: { 1: model.onnx } }]);
    server = await startServer(repo.dir);
    grpc = grpcClient(server.grpcAddress);
  });
  afterAll(async () => {
    grpc?.close();
    await server?.stop();
    repo?.cleanup();
  });

  const json = (a: unknown[], b: unknown[] = ones) =>
    inferJson(server.url, 'simple_string', {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'BYTES', data: a },
        { name: 'INPUT1', shape: [1, 16], datatype: 'BYTES', data: b },
      ],
    });

  /** The server answers a valid request correctly (it is up and the instance serves). */
  const stillServes = async () => {
    const res = await json(numbers);
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs[0].data).toEqual(range(16, (i) => String(i + 1)));
  };

  it.each([
    ['not a number', 3, 'abc', "BYTES element 3 \"abc\" of inference input 'INPUT0' for model 'simple_string' is not a decimal integer"],
    ['empty', 0, '', "BYTES element 0 \"\" of inference input 'INPUT0' for model 'simple_string' is not a decimal integer"],
    [
      'out of range',
      15,
      '99999999999999999999',
      "BYTES element 15 \"99999999999999999999\" of inference input 'INPUT0' for model 'simple_string' is out of range for a 64-bit integer",
    ],
    [
      'a lone surrogate',
      7,
      '\ud800',
      "BYTES element 7 \"\\ufffd\" of inference input 'INPUT0' for model 'simple_string' is not a decimal integer",
    ],
  ])('HTTP JSON, an element %s: 400 naming the input and the element', async (_what, at, value, text) => {
    const res = await json(withElement(at, value));
    expect(res.status, res.text()).toBe(400);
    expect(res.json().error).toContain(text);
    expect(res.json().error).toContain("Cast node. Name:'Cast_0' Status Message: stoll");
    await stillServes();
  });

  it('names the second input when it holds the bad element', async () => {
    const res = await json(numbers, withElement(2, 'x'));
    expect(res.status).toBe(400);
    expect(res.json().error).toMatch(/^BYTES element 2 "x" of inference input 'INPUT1' for model 'simple_string' is not a decimal integer/);
  });

  it('HTTP binary extension: a non-numeric element and bytes that are not UTF-8 are 400', async () => {
    const send = (raw0: Buffer) =>
      inferBinary(server.url, 'simple_string', [
        { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], raw: raw0 },
        { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], raw: bytesRaw(ones) },
      ]);
    const trailing = await send(bytesRaw(withElement(5, '1O')));
    expect(trailing.status).toBe(200); // "1O" converts as 1 (C's stoll stops at the letter), as in Triton
    const bad = await send(bytesRaw(withElement(5, 'O1')));
    expect(bad.status).toBe(400);
    expect(bad.json().error).toContain('BYTES element 5 "O1" of inference input \'INPUT0\'');
    const notUtf8 = await send(bytesRaw([...numbers.slice(0, 4), Buffer.from([0x31, 0xff, 0xfe]), ...numbers.slice(5)]));
    expect(notUtf8.status).toBe(400);
    expect(notUtf8.json().error).toContain("inference input 'INPUT0' for model 'simple_string': BYTES element 4 is not valid UTF-8");
    await stillServes();
  });

  it('gRPC, typed and raw contents: INVALID_ARGUMENT naming the input; then a valid request succeeds', async () => {
    const request = (contents: Record<string, unknown>) => ({
      model_name: 'simple_string',
      inputs: [
        { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16] },
        { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16] },
      ],
      ...contents,
    });
    const typed = (a: (string | Buffer)[]) => ({
      model_name: 'simple_string',
      inputs: [
        { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], contents: { bytes_contents: a.map((e) => Buffer.from(e)) } },
        { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], contents: { bytes_contents: ones.map((e) => Buffer.from(e)) } },
      ],
    });
    const nonNumeric = await grpc.error('ModelInfer', typed(withElement(9, '-')));
    expect(nonNumeric.code).toBe(status.INVALID_ARGUMENT);
    expect(nonNumeric.details).toContain(
      "BYTES element 9 \"-\" of inference input 'INPUT0' for model 'simple_string' is not a decimal integer",
    );
    const rawRange = await grpc.error(
      'ModelInfer',
      request({ raw_input_contents: [bytesRaw(numbers), bytesRaw(withElement(1, '-9223372036854775809'))] }),
    );
    expect(rawRange.code).toBe(status.INVALID_ARGUMENT);
    expect(rawRange.details).toContain("of inference input 'INPUT1' for model 'simple_string' is out of range for a 64-bit integer");
    const lone = Buffer.from([0xed, 0xa0, 0x80]); // U+D800 as WTF-8: not UTF-8
    const rawUtf8 = await grpc.error(
      'ModelInfer',
      request({ raw_input_contents: [bytesRaw([lone, ...numbers.slice(1)]), bytesRaw(ones)] }),
    );
    expect(rawUtf8.code).toBe(status.INVALID_ARGUMENT);
    expect(rawUtf8.details).toContain("inference input 'INPUT0' for model 'simple_string': BYTES element 0 is not valid UTF-8");
    const typedUtf8 = await grpc.error('ModelInfer', typed([Buffer.from([0xc3]), ...numbers.slice(1)]));
    expect(typedUtf8.code).toBe(status.INVALID_ARGUMENT);

    const ok = await grpc.call('ModelInfer', request({ raw_input_contents: [bytesRaw(numbers), bytesRaw(ones)] }));
    expect(stringsOf(ok.raw_output_contents[0])).toEqual(range(16, (i) => String(i + 1)));
  });

  it('none of it was logged as a server fault (nor by ONNX Runtime); the server is still up', async () => {
    await stillServes();
    expect(server.alive()).toBe(true);
    const logs = server.stdout() + server.stderr();
    expect(logs).not.toMatch(/^E\d{4} /m); // tritonserver's error lines (the default --log-format)
    expect(logs).not.toContain('onnxruntime');
    expect(logs).not.toContain('Cast');
  });
});
