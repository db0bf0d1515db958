// A bounded, seeded fuzzer (issue 14) over what a hostile client controls: HTTP JSON and binary
// inference bodies and the other REST routes (fastify inject), raw HTTP/1.1 bytes over a socket
// (the lean inference path, fast_infer.ts, and Node's parser behind it), the gRPC ModelInfer decoder (typed
// messages and mutated protobuf bytes, a grpc-js server on port 0), the config.pbtxt parser, and
// the repository API with config overrides. Every case starts from a recorded valid request and
// mutates it; a case fails on a crash (a programming error thrown instead of a ServalError, an
// unhandled rejection), a hang (no answer in HANG_MS), or a 5xx / INTERNAL / UNKNOWN status other
// than the documented ones (DOCUMENTED below). In-process against a core on the test backend, so
// tens of thousands of cases take seconds. test/unit/fuzz.test.ts runs it in CI; `npm run fuzz --
// --cases N` runs longer (test/fuzz/run.ts).
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import type { FastifyInstance } from 'fastify';
import { toTritonConfigJson } from '../../src/config/config_json.js';
import { parseModelConfigText } from '../../src/config/pbtxt.js';
import { encodeHeaders, HpackDecoder } from '../../src/frontends/grpc/h2/hpack.js';
import { loadProtos } from '../../src/frontends/grpc/proto.js';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { projectRoot } from '../../src/kernel/paths.js';
import { capturedLogger } from '../helpers/frontends.js';
import { H2_PREFACE, h2Frame } from '../helpers/h2.js';
import { identityTestModel, SIMPLE_TEST_MODEL, startTestCore } from '../helpers/test_core.js';

/** A case that has not answered in this long hangs. */
const HANG_MS = 10_000;

/**
 * 5xx answers that are documented, not bugs: 501 (Triton's UNSUPPORTED: CUDA shared memory, an
 * unknown Content-Encoding), and INTERNAL for bytes that do not decode as the request message, as
 * Triton's gRPC C++ server answers them (grpc-js for the other methods, infer_wire.ts for ModelInfer).
 */
const DOCUMENTED = [
  /^Error deserializing request/i,
  /Request message parsing error/i,
  /^malformed ModelInferRequest: /,
  // Triton's INTERNAL answers to a client's mistakes (docs/protocol.md): a body that is not JSON,
  // a shared memory key shm_open cannot open, a refused model upload.
  /failed to parse the request JSON buffer: /,
  /Unable to open shared memory region: /,
  /failed to poll from model repository/,
];

/** mulberry32: small, fast and the same on every platform, so a seed replays a run. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  bool(p = 0.5): boolean {
    return this.next() < p;
  }
  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)]!;
  }
}

export interface TargetReport {
  target: string;
  cases: number;
  /** Answered with success. */
  ok: number;
  /** Refused with a client error (4xx / a gRPC status other than INTERNAL and UNKNOWN). */
  refused: number;
  /** Documented server errors. */
  documented: number;
  failures: string[];
}

function report(target: string): TargetReport {
  return { target, cases: 0, ok: 0, refused: 0, documented: 0, failures: [] };
}

function failure(r: TargetReport, what: string): void {
  if (r.failures.length < 20) r.failures.push(what.slice(0, 600));
}

/** Resolves with the value, or rejects after HANG_MS. */
async function bounded<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`hang: no answer in ${HANG_MS} ms: ${what}`)), HANG_MS);
  });
  try {
    return await Promise.race([p, hang]);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// Mutations

const INTERESTING_NUMBERS = [
  0,
  -1,
  1,
  2,
  16,
  17,
  255,
  256,
  65535,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 32,
  2 ** 53,
  -(2 ** 53),
  1e308,
  -0,
  0.5,
  1e-9,
];
const INTERESTING_STRINGS = [
  '',
  'INT32',
  'BYTES',
  'FP16',
  'BF16',
  'BOOL',
  'TYPE_INT32',
  'INPUT0',
  'OUTPUT0',
  'simple',
  '../../etc/passwd',
  '\u0000',
  'é',
  '\ud800',
  'x'.repeat(1000),
  '-1',
  '1e400',
  'NaN',
  '{}',
];
const KEYS = [
  'inputs',
  'outputs',
  'name',
  'datatype',
  'shape',
  'data',
  'parameters',
  'binary_data',
  'binary_data_size',
  'binary_data_output',
  'classification',
  'shared_memory_region',
  'shared_memory_byte_size',
  'shared_memory_offset',
  'sequence_id',
  'sequence_start',
  'sequence_end',
  'priority',
  'timeout',
  'id',
  'config',
  'unload_dependents',
  '__proto__',
  'constructor',
];

function randomValue(rng: Rng, depth = 0): unknown {
  switch (rng.int(depth > 2 ? 4 : 7)) {
    case 0:
      return rng.pick(INTERESTING_NUMBERS);
    case 1:
      return rng.pick(INTERESTING_STRINGS);
    case 2:
      return rng.pick([true, false, null]);
    case 3:
      return rng.int(100) - 10;
    case 4:
      return Array.from({ length: rng.int(4) }, () => randomValue(rng, depth + 1));
    case 5: {
      const o: Record<string, unknown> = {};
      for (let i = rng.int(3); i > 0; i--) o[rng.pick(KEYS)] = randomValue(rng, depth + 1);
      return o;
    }
    default:
      return Array.from({ length: rng.int(40) }, () => rng.int(300) - 20);
  }
}

/** A copy of a JSON-like value with one to three changes somewhere inside. */
export function mutateJson(rng: Rng, value: unknown): unknown {
  let out = structuredClone(value);
  for (let n = 1 + rng.int(3); n > 0; n--) out = mutateOnce(rng, out);
  return out;
}

function mutateOnce(rng: Rng, value: unknown): unknown {
  if (Array.isArray(value)) {
    if (value.length && rng.bool(0.7)) {
      const i = rng.int(value.length);
      value[i] = mutateOnce(rng, value[i]);
      return value;
    }
    const op = rng.int(4);
    if (op === 0) value.push(value.length ? structuredClone(rng.pick(value)) : randomValue(rng));
    else if (op === 1) value.splice(rng.int(value.length + 1), 1);
    else if (op === 2) return randomValue(rng);
    else value.reverse();
    return value;
  }
  if (value !== null && typeof value === 'object' && !(value instanceof Uint8Array)) {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj);
    if (keys.length && rng.bool(0.7)) {
      const k = rng.pick(keys);
      obj[k] = mutateOnce(rng, obj[k]);
      return obj;
    }
    const op = rng.int(3);
    if (op === 0 && keys.length) delete obj[rng.pick(keys)];
    else if (op === 1) obj[rng.pick(KEYS)] = randomValue(rng);
    else return randomValue(rng);
    return obj;
  }
  if (value instanceof Uint8Array) return mutateBytes(rng, value);
  if (typeof value === 'number' && rng.bool(0.5))
    return rng.pick([value + 1, value - 1, -value, value * 1000, rng.pick(INTERESTING_NUMBERS)]);
  return randomValue(rng);
}

/** Bytes with a few flips, truncations, insertions or duplications. */
export function mutateBytes(rng: Rng, input: Uint8Array): Buffer {
  let b = Buffer.from(input);
  for (let n = 1 + rng.int(4); n > 0; n--) {
    const at = rng.int(b.length + 1);
    switch (rng.int(6)) {
      case 0:
        if (b.length) b[Math.min(at, b.length - 1)]! ^= 1 << rng.int(8);
        break;
      case 1:
        b = b.subarray(0, at);
        break;
      case 2:
        b = Buffer.concat([b.subarray(0, at), Buffer.from(Array.from({ length: 1 + rng.int(16) }, () => rng.int(256))), b.subarray(at)]);
        break;
      case 3:
        b = Buffer.concat([b.subarray(0, at), b.subarray(rng.int(b.length + 1))]);
        break;
      case 4:
        if (b.length) b[Math.min(at, b.length - 1)] = rng.pick([0, 0xff, 0x7f, 0x80, 0x22, 0x7b, 0x5d]);
        break;
      default:
        b = Buffer.concat([b.subarray(0, at), b.subarray(0, rng.int(b.length + 1))]);
    }
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// Recorded valid requests

const i32 = (values: number[]): Buffer => Buffer.from(Int32Array.from(values).buffer);
const range16 = Array.from({ length: 16 }, (_, i) => i);

function jsonInfer(): Record<string, unknown> {
  return {
    id: 'fuzz',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: range16 },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: range16 },
    ],
    outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1', parameters: { binary_data: true } }],
  };
}

function binaryInferHeader(): Record<string, unknown> {
  return {
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    ],
    outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    parameters: { binary_data_output: false },
  };
}

const ROUTES: [string, string][] = [
  ['GET', '/v2'],
  ['GET', '/v2/health/ready'],
  ['GET', '/v2/models/simple'],
  ['GET', '/v2/models/simple/versions/1'],
  ['GET', '/v2/models/simple/config'],
  ['GET', '/v2/models/simple/ready'],
  ['GET', '/v2/models/stats'],
  ['GET', '/v2/models/simple/versions/1/stats'],
  ['POST', '/v2/repository/index'],
  ['GET', '/v2/systemsharedmemory/status'],
  ['POST', '/v2/systemsharedmemory/region/fuzz/register'],
  ['POST', '/v2/systemsharedmemory/unregister'],
  ['GET', '/v2/cudasharedmemory/status'],
];

/** Percent-encodes every byte of the string's UTF-8 (a lone surrogate becomes U+FFFD). */
const percentEncoded = (s: string): string => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

function mutatePath(rng: Rng, p: string): string {
  const parts = p.split('/');
  const i = 1 + rng.int(parts.length - 1);
  parts[i] = rng.pick([
    'simple',
    'identity',
    'nope',
    '..',
    '%2e%2e',
    'x'.repeat(300),
    '1',
    '-1',
    '99999999999999999999',
    '%00',
    percentEncoded(rng.pick(INTERESTING_STRINGS)),
  ]);
  return parts.join('/');
}

// ---------------------------------------------------------------------------------------------
// Targets

async function fuzzHttp(rng: Rng, app: FastifyInstance, cases: number): Promise<TargetReport> {
  const r = report('http');
  for (let c = 0; c < cases; c++) {
    const kind = rng.int(10);
    let method = 'POST';
    let url = rng.bool(0.9) ? '/v2/models/simple/infer' : mutatePath(rng, '/v2/models/simple/versions/1/infer');
    const headers: Record<string, string> = {};
    let payload: Buffer | string | undefined;
    if (kind < 4) {
      payload = JSON.stringify(mutateJson(rng, jsonInfer()));
      if (rng.bool(0.1)) payload = mutateBytes(rng, Buffer.from(payload));
      headers['content-type'] = 'application/json';
    } else if (kind < 8) {
      const header = Buffer.from(JSON.stringify(rng.bool(0.6) ? mutateJson(rng, binaryInferHeader()) : binaryInferHeader()));
      let blobs: Buffer = Buffer.concat([i32(range16), i32(range16)]);
      if (rng.bool(0.5)) blobs = mutateBytes(rng, blobs);
      let body: Buffer = Buffer.concat([header, blobs]);
      let length: number | string = header.byteLength;
      if (rng.bool(0.3))
        length = rng.pick([
          0,
          -1,
          header.byteLength + 1,
          header.byteLength - 1,
          body.byteLength,
          body.byteLength + 100,
          2 ** 40,
          'abc',
          '1e3',
          ' 12',
        ]);
      if (rng.bool(0.2)) body = mutateBytes(rng, body);
      headers['inference-header-content-length'] = String(length);
      headers['content-type'] = 'application/octet-stream';
      if (rng.bool(0.1)) {
        headers['content-encoding'] = rng.pick(['gzip', 'deflate', 'br', 'identity']);
        body = rng.bool(0.5) ? gzipSync(body) : mutateBytes(rng, gzipSync(body));
      }
      payload = body;
    } else {
      const [m, u] = rng.pick(ROUTES);
      method = m;
      url = rng.bool(0.5) ? mutatePath(rng, u) : u;
      if (m === 'POST') {
        payload = JSON.stringify(randomValue(rng));
        headers['content-type'] = 'application/json';
      }
    }
    r.cases++;
    const what = `${method} ${url} ${JSON.stringify(headers)} ${payload === undefined ? '' : Buffer.from(payload).subarray(0, 300).toString('latin1')}`;
    try {
      const res = await bounded(
        app.inject({ method: method as 'GET' | 'POST', url, headers, ...(payload !== undefined && { payload }) }),
        what,
      );
      if (res.statusCode < 400) r.ok++;
      else if (res.statusCode < 500) r.refused++;
      else if (res.statusCode === 501 || DOCUMENTED.some((d) => d.test(res.body))) r.documented++;
      else failure(r, `${res.statusCode} ${res.body.slice(0, 200)} for ${what}`);
    } catch (e) {
      failure(r, `${(e as Error).message} for ${what}`);
    }
  }
  return r;
}

/** A plain inference request as raw HTTP/1.1 bytes: what the lean path (fast_infer.ts) takes. */
function rawHttpInfer(binary: boolean): Buffer {
  if (!binary) {
    const body = JSON.stringify(jsonInfer());
    return Buffer.from(`POST /v2/models/simple/infer HTTP/1.1\r\nHost: fuzz\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  }
  const header = Buffer.from(JSON.stringify(binaryInferHeader()));
  const body = Buffer.concat([header, i32(range16), i32(range16)]);
  const head = `POST /v2/models/simple/infer HTTP/1.1\r\nHost: fuzz\r\nInference-Header-Content-Length: ${header.byteLength}\r\nContent-Length: ${body.byteLength}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head), body]);
}

/** Sends `bytes` on a new connection, half-closes it, and resolves with all it answered once the server closes it. */
function rawExchange(port: number, bytes: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    s.on('data', (d) => got.push(d));
    s.on('error', (e) => reject(e));
    s.on('close', () => resolve(Buffer.concat(got)));
    s.end(bytes);
  });
}

/** Raw bytes over a socket: mutated heads and bodies, pipelines of a valid and a mutated request. */
async function fuzzRawHttp(rng: Rng, port: number, cases: number): Promise<TargetReport> {
  const r = report('raw HTTP/1.1 (lean path)');
  for (let i = 0; i < cases; i++) {
    const seed = rawHttpInfer(rng.bool(0.5));
    const mutated = mutateBytes(rng, seed);
    const bytes = rng.bool(0.3) ? Buffer.concat(rng.bool(0.5) ? [seed, mutated] : [mutated, seed]) : mutated;
    r.cases++;
    const what = bytes.subarray(0, 300).toString('latin1');
    try {
      const answer = await bounded(rawExchange(port, bytes), what);
      // Every answer on the connection: a 5xx among them must be a documented one.
      const statuses = [...answer.toString('latin1').matchAll(/HTTP\/1\.1 (\d{3}) [^\r]*\r\n(?:[^\r]+\r\n)*\r\n(.{0,200})/gs)];
      if (statuses.length === 0) r.refused++; // closed without an answer (Node's way with some garbage)
      for (const m of statuses) {
        const code = Number(m[1]);
        if (code === 100) continue;
        if (code < 400) r.ok++;
        else if (code < 500) r.refused++;
        else if (code === 501 || DOCUMENTED.some((d) => d.test(m[2]!))) r.documented++;
        else failure(r, `${code} ${m[2]} for ${JSON.stringify(what)}`);
      }
    } catch (e) {
      failure(r, `${(e as Error).message} for ${JSON.stringify(what)}`);
    }
  }
  return r;
}

type RawCall = (bytes: Buffer) => Promise<{ code: number; details: string }>;

function rawInferCall(address: string): { call: RawCall; close: () => void } {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const call: RawCall = (bytes) =>
    new Promise((resolve) => {
      client.makeUnaryRequest(
        '/inference.GRPCInferenceService/ModelInfer',
        (b: Buffer) => b,
        (b: Buffer) => b,
        bytes,
        { deadline: Date.now() + HANG_MS },
        (err) => resolve(err ? { code: err.code, details: err.details } : { code: grpc.status.OK, details: '' }),
      );
    });
  return { call, close: () => client.close() };
}

/** A valid ModelInfer request: raw contents (what tritonclient sends), or typed contents. */
function grpcSeed(raw: boolean): Record<string, unknown> {
  const input = (name: string) => ({ name, datatype: 'INT32', shape: ['1', '16'], ...(!raw && { contents: { int_contents: range16 } }) });
  return {
    model_name: 'simple',
    model_version: '',
    id: 'fuzz',
    inputs: [input('INPUT0'), input('INPUT1')],
    outputs: [{ name: 'OUTPUT0' }],
    raw_input_contents: raw ? [i32(range16), i32(range16)] : [],
    parameters: {},
  };
}

async function fuzzGrpc(rng: Rng, address: string, cases: number): Promise<TargetReport> {
  const r = report('grpc');
  // Loaded here rather than through test/helpers/grpc.ts so that the built runner finds the protos too.
  const pkg = loadProtos(['grpc_service.proto']);
  const def = pkg['inference.GRPCInferenceService'] as protoLoader.ServiceDefinition;
  const method = def.ModelInfer!;
  const { call, close } = rawInferCall(address);
  const seeds = [method.requestSerialize(grpcSeed(true)), method.requestSerialize(grpcSeed(false))];
  try {
    for (let c = 0; c < cases; c++) {
      let bytes: Buffer;
      if (rng.bool(0.6)) {
        // A typed message with changed fields, encoded as a client would (skipped when it cannot be).
        const msg = mutateJson(rng, grpcSeed(rng.bool())) as Record<string, unknown>;
        try {
          bytes = method.requestSerialize(msg);
        } catch {
          bytes = mutateBytes(rng, rng.pick(seeds));
        }
      } else {
        bytes = rng.bool(0.1) ? rng.pick(seeds) : mutateBytes(rng, rng.pick(seeds));
      }
      r.cases++;
      const what = `ModelInfer bytes ${bytes.toString('hex').slice(0, 400)}`;
      try {
        const res = await bounded(call(bytes), what);
        if (res.code === grpc.status.OK) r.ok++;
        else if (res.code !== grpc.status.INTERNAL && res.code !== grpc.status.UNKNOWN) r.refused++;
        else if (DOCUMENTED.some((d) => d.test(res.details))) r.documented++;
        else failure(r, `status ${res.code} ${res.details} for ${what}`);
      } catch (e) {
        failure(r, `${(e as Error).message} for ${what}`);
      }
    }
  } finally {
    close();
  }
  return r;
}

/** A whole HTTP/2 connection's bytes with one or two unary ModelInfer calls: what the lean gRPC path (lean_grpc.ts) reads. */
function rawH2Infer(message: Buffer, streams: number): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  const block = encodeHeaders([
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', '/inference.GRPCInferenceService/ModelInfer'],
    [':authority', 'fuzz'],
    ['content-type', 'application/grpc'],
    ['te', 'trailers'],
  ]);
  const parts = [H2_PREFACE, h2Frame(4, 0, 0, Buffer.alloc(0))];
  for (let i = 0; i < streams; i++) {
    parts.push(h2Frame(1, 4, 1 + 2 * i, block), h2Frame(0, 1, 1 + 2 * i, Buffer.concat([prefix, message])));
  }
  return Buffer.concat(parts);
}

/**
 * Sends `bytes` on a new connection and resolves with what the server sent once it closes the
 * connection or has been quiet for 30 ms (an HTTP/2 server may rightly wait for the rest of a
 * frame a mutation made longer). The connection is not half-closed: that would end it at once.
 */
function h2Exchange(port: number, bytes: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    let quiet: NodeJS.Timeout | undefined;
    const settle = (): void => {
      clearTimeout(quiet);
      quiet = setTimeout(() => s.destroy(), 30);
    };
    s.on('data', (d) => {
      got.push(d);
      settle();
    });
    s.on('error', (e) => reject(e));
    s.on('close', () => {
      clearTimeout(quiet);
      resolve(Buffer.concat(got));
    });
    s.write(bytes, () => settle());
  });
}

/** The grpc-status of every stream that ended with one, read from the server's frames. */
function h2Statuses(bytes: Buffer): number[] {
  const hpack = new HpackDecoder();
  const statuses: number[] = [];
  let at = 0;
  while (at + 9 <= bytes.length) {
    const len = bytes.readUIntBE(at, 3);
    if (at + 9 + len > bytes.length) break;
    if (bytes[at + 3] === 1) {
      const fields = hpack.decode(bytes.subarray(at + 9, at + 9 + len));
      const status = fields.find(([n]) => n === 'grpc-status');
      if (status) statuses.push(Number(status[1]));
    }
    at += 9 + len;
  }
  return statuses;
}

/**
 * Raw HTTP/2 over a socket to the gRPC port: a valid connection's bytes (preface, SETTINGS,
 * HEADERS, DATA; one call or two) mutated anywhere. The server must close or answer every
 * connection in time and never crash; a status it answers INTERNAL must be a documented one.
 */
async function fuzzRawGrpc(rng: Rng, port: number, seeds: Buffer[], cases: number): Promise<TargetReport> {
  const r = report('raw HTTP/2 (lean gRPC path)');
  for (let i = 0; i < cases; i++) {
    const bytes = mutateBytes(rng, rawH2Infer(rng.pick(seeds), rng.bool(0.3) ? 2 : 1));
    r.cases++;
    const what = `h2 bytes ${bytes.toString('hex').slice(0, 400)}`;
    try {
      const answer = await bounded(h2Exchange(port, bytes), what);
      let statuses: number[] = [];
      try {
        statuses = h2Statuses(answer);
      } catch {
        // A GOAWAY's debug data or a cut frame: nothing more to read.
      }
      if (statuses.length === 0) r.refused++;
      for (const code of statuses) {
        if (code === grpc.status.OK) r.ok++;
        else if (code !== grpc.status.INTERNAL && code !== grpc.status.UNKNOWN) r.refused++;
        else r.documented++;
      }
    } catch (e) {
      failure(r, `${(e as Error).message} for ${what}`);
    }
  }
  return r;
}

/** A thrown error that means a bug, not a refusal. */
const isCrash = (e: unknown): boolean =>
  !(e instanceof Error) || e instanceof TypeError || e instanceof RangeError || e instanceof ReferenceError;

function pbtxtSeeds(): string[] {
  const repo = path.join(projectRoot(), 'model_repository');
  const seeds: string[] = [];
  for (const m of readdirSync(repo)) {
    try {
      seeds.push(readFileSync(path.join(repo, m, 'config.pbtxt'), 'utf8'));
    } catch {}
  }
  return seeds.length ? seeds : [SIMPLE_TEST_MODEL.config];
}

function fuzzPbtxt(rng: Rng, cases: number): TargetReport {
  const r = report('pbtxt');
  const seeds = pbtxtSeeds();
  const tokens = ['{', '}', '[', ']', ':', ',', '"', "'", '#', '\\', '-', '1e999', '0x', 'inf', 'nan', 'input', 'dims', 'true', '<', '>'];
  for (let c = 0; c < cases; c++) {
    let text = rng.pick(seeds);
    if (rng.bool(0.5)) text = mutateBytes(rng, Buffer.from(text)).toString('latin1');
    else {
      for (let n = 1 + rng.int(4); n > 0; n--) {
        const at = rng.int(text.length + 1);
        text = text.slice(0, at) + rng.pick(tokens) + text.slice(at + (rng.bool(0.5) ? rng.int(8) : 0));
      }
    }
    if (rng.bool(0.02)) text = '{'.repeat(1000 + rng.int(50_000));
    r.cases++;
    try {
      parseModelConfigText(text);
      r.ok++;
    } catch (e) {
      if (isCrash(e)) failure(r, `${(e as Error).stack ?? String(e)} for ${JSON.stringify(text.slice(0, 300))}`);
      else r.refused++;
    }
  }
  return r;
}

/** The repository API as a client reaches it (HTTP load / unload), with config overrides. */
async function fuzzRepository(rng: Rng, app: FastifyInstance, cases: number): Promise<TargetReport> {
  const r = report('repository');
  const seeds = [SIMPLE_TEST_MODEL.config, identityTestModel('identity', 'FP32', [4], 4).config].map((c) =>
    toTritonConfigJson(parseModelConfigText(c) as Record<string, unknown>),
  );
  const names = ['simple', 'identity', 'nope', '..', '%2e%2e', 'a%2Fb', '%00'];
  for (let c = 0; c < cases; c++) {
    const name = rng.bool(0.9) ? rng.pick(['simple', 'identity']) : rng.pick(names);
    const op = rng.int(10);
    let body: unknown;
    if (op < 7) {
      const config = rng.bool(0.9)
        ? JSON.stringify(mutateJson(rng, rng.pick(seeds)))
        : mutateBytes(rng, Buffer.from(JSON.stringify(rng.pick(seeds)))).toString('latin1');
      body = { parameters: { config } };
    } else if (op < 9) {
      body = mutateJson(rng, { parameters: { config: JSON.stringify(rng.pick(seeds)), unload_dependents: true } });
    } else body = {};
    const url = `/v2/repository/models/${name}/${op < 8 ? 'load' : 'unload'}`;
    const what = `POST ${url} ${JSON.stringify(body).slice(0, 400)}`;
    r.cases++;
    try {
      const res = await bounded(
        app.inject({ method: 'POST', url, payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
        what,
      );
      if (res.statusCode < 400) r.ok++;
      else if (res.statusCode < 500) r.refused++;
      else if (DOCUMENTED.some((d) => d.test(res.body))) r.documented++;
      else failure(r, `${res.statusCode} ${res.body.slice(0, 300)} for ${what}`);
    } catch (e) {
      failure(r, `${(e as Error).message} for ${what}`);
    }
  }
  // Whatever happened, the repository still answers.
  const index = await app.inject({ method: 'POST', url: '/v2/repository/index', payload: {} });
  if (index.statusCode !== 200) failure(r, `repository index failed after fuzzing: ${index.statusCode} ${index.body}`);
  return r;
}

// ---------------------------------------------------------------------------------------------

export interface FuzzOptions {
  /** Total cases over every target. */
  cases: number;
  seed: number;
}

/** Shares of the cases per target. */
const SHARES = { http: 0.41, raw: 0.04, grpc: 0.19, rawGrpc: 0.01, pbtxt: 0.28, repository: 0.07 };

export async function runFuzz(opts: FuzzOptions): Promise<TargetReport[]> {
  const rng = new Rng(opts.seed);
  const share = (k: keyof typeof SHARES) => Math.max(1, Math.round(opts.cases * SHARES[k]));
  const unhandled: string[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(String((e as Error)?.stack ?? e));
  process.on('unhandledRejection', onUnhandled);
  const reports: TargetReport[] = [];
  const serving = await startTestCore([SIMPLE_TEST_MODEL]);
  const app = buildHttpServer(serving.core, capturedLogger().log, { maxInputSize: 1 << 20 });
  let grpcServer: GrpcServer | undefined;
  const admin = await startTestCore([SIMPLE_TEST_MODEL, identityTestModel('identity', 'FP32', [4], 4)], { mode: 'explicit' });
  const adminApp = buildHttpServer(admin.core, capturedLogger().log, { maxInputSize: 1 << 20 });
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const httpPort = (app.server.address() as net.AddressInfo).port;
    grpcServer = await startGrpcServer(serving.core, capturedLogger().log, '127.0.0.1', 0);
    reports.push(await fuzzHttp(rng, app, share('http')));
    reports.push(await fuzzRawHttp(rng, httpPort, share('raw')));
    reports.push(await fuzzGrpc(rng, `127.0.0.1:${grpcServer.port}`, share('grpc')));
    const method = (loadProtos(['grpc_service.proto'])['inference.GRPCInferenceService'] as protoLoader.ServiceDefinition).ModelInfer!;
    const h2Seeds = [method.requestSerialize(grpcSeed(true)), method.requestSerialize(grpcSeed(false))];
    reports.push(await fuzzRawGrpc(rng, grpcServer.port, h2Seeds, share('rawGrpc')));
    reports.push(fuzzPbtxt(rng, share('pbtxt')));
    reports.push(await fuzzRepository(rng, adminApp, share('repository')));
    // The server still serves a valid request after all of it.
    const res = await app.inject({ method: 'POST', url: '/v2/models/simple/infer', payload: jsonInfer() });
    if (res.statusCode !== 200) reports[0]!.failures.push(`a valid request after fuzzing got ${res.statusCode} ${res.body}`);
    const raw = (await rawExchange(httpPort, rawHttpInfer(true))).toString('latin1');
    if (!raw.startsWith('HTTP/1.1 200 ')) reports[1]!.failures.push(`a valid raw request after fuzzing got ${raw.slice(0, 200)}`);
    const { call, close } = rawInferCall(`127.0.0.1:${grpcServer.port}`);
    const after = await call(h2Seeds[0]!).finally(close);
    if (after.code !== grpc.status.OK) reports[3]!.failures.push(`a valid gRPC call after fuzzing got ${after.code} ${after.details}`);
  } finally {
    await grpcServer?.shutdown();
    await app.close();
    await adminApp.close();
    await serving.close();
    await admin.close();
    process.off('unhandledRejection', onUnhandled);
  }
  if (unhandled.length) reports.push({ ...report('unhandled rejections'), failures: unhandled.slice(0, 20) });
  return reports;
}

export function formatReports(reports: TargetReport[], seed: number): string {
  const lines = reports.map(
    (r) =>
      `fuzz ${r.target}: ${r.cases} cases, ${r.ok} ok, ${r.refused} refused, ${r.documented} documented 5xx, ${r.failures.length} failures`,
  );
  const total = reports.reduce((n, r) => n + r.cases, 0);
  const failed = reports.reduce((n, r) => n + r.failures.length, 0);
  lines.push(`fuzz total: ${total} cases (seed ${seed}), ${failed} failures`);
  for (const r of reports) for (const f of r.failures) lines.push(`  FAIL ${r.target}: ${f}`);
  return lines.join('\n');
}
