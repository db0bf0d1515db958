// The trace extension's state: update checks, model/global merging (Triton's
// qa/L0_trace/trace_endpoint_test.py cases), sampling by rate and count, the trace files, the
// start-up flags, and a traced request through the in-process core.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServalError } from '../../src/kernel/errors.js';
import type { RequestTrace } from '../../src/kernel/trace.js';
import { parseTraceConfig } from '../../src/trace/config.js';
import { checkUpdate, TRACE_DEFAULTS, type TraceValues } from '../../src/trace/settings.js';
import { tensorText } from '../../src/trace/trace.js';
import { TraceManager } from '../../src/trace/trace_manager.js';
import { RecordedTrace } from '../helpers/frontends.js';
import { asBuffer } from '../helpers/tensors.js';
import { identityTestModel, startTestCore, type TestCore } from '../helpers/test_core.js';
import { CORE_STAMPS } from '../helpers/trace_stamps.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'serval-trace-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const manager = (values: Partial<TraceValues> = {}): TraceManager =>
  new TraceManager({ ...TRACE_DEFAULTS, file: path.join(dir, 'trace.json'), ...values });

function errorOf(f: () => unknown): ServalError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ServalError);
    return e as ServalError;
  }
  throw new Error('expected an error');
}

/** Runs `n` requests to `model` through sampling; returns the traces that were sampled. */
function requests(m: TraceManager, model: string, n: number): RequestTrace[] {
  const out: RequestTrace[] = [];
  for (let i = 0; i < n; i++) {
    const t = m.sample(model);
    if (t) out.push(t);
  }
  return out;
}

function finish(t: RequestTrace, model = 'simple'): void {
  t.model(model, 1, '');
  t.stamp('REQUEST_START', 1n);
  t.stamp('REQUEST_END', 2n);
  t.end();
}

const ids = (records: { id: number }[]): number[] => [...new Set(records.map((r) => r.id))];
const readJson = (f: string): { id: number; model_name?: string; timestamps?: { name: string; ns: number }[] }[] =>
  JSON.parse(readFileSync(f, 'utf8'));

describe('trace setting updates', () => {
  it('refuses trace_file over the network with UNSUPPORTED, as Triton does', () => {
    const e = errorOf(() => checkUpdate({ trace_file: ['/tmp/x'] }));
    expect(e.code).toBe('UNSUPPORTED');
    expect(e.message).toBe('trace file location can not be updated through network protocol');
  });

  it('checks levels: OFF alone, names known, and [] or null clears', () => {
    expect(checkUpdate({ trace_level: ['TIMESTAMPS', 'TENSORS'] }).level).toBe(3);
    expect(checkUpdate({ trace_level: ['OFF'] }).level).toBe(0);
    expect(checkUpdate({ trace_level: null }).level).toBeNull();
    expect(checkUpdate({ trace_level: [] }).level).toBeNull();
    expect(errorOf(() => checkUpdate({ trace_level: ['OFF', 'TIMESTAMPS'] })).message).toBe(
      "Expect only one trace level 'OFF' is specified",
    );
    expect(errorOf(() => checkUpdate({ trace_level: ['LOUD'] })).message).toMatch(/^Unable to parse 'trace_level', got: LOUD/);
  });

  it("parses numbers with Triton's texts", () => {
    expect(checkUpdate({ trace_rate: ['12'], trace_count: ['-1'], log_frequency: ['0'] })).toEqual({
      rate: 12,
      count: -1,
      logFrequency: 0,
    });
    expect(errorOf(() => checkUpdate({ trace_rate: ['abc'] })).message).toBe("Unable to parse 'trace_rate', got: abc");
    expect(errorOf(() => checkUpdate({ trace_rate: ['-3'] })).message).toBe(
      "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: -3",
    );
    expect(errorOf(() => checkUpdate({ trace_count: ['-2'] })).message).toBe(
      "Unable to parse 'trace_count'. Expecting value >= -1, got: -2",
    );
    expect(errorOf(() => checkUpdate({ log_frequency: ['1', '2'] })).message).toBe("expect only 1 value for 'log_frequency'");
    const unknown = errorOf(() => checkUpdate({ trace_rat: ['1'] }));
    expect(unknown.code).toBe('INVALID_ARG');
    expect(unknown.message).toContain("unknown trace setting 'trace_rat'");
  });

  it('accepts trace_mode triton (what a client may echo back) and refuses another mode', () => {
    expect(checkUpdate({ trace_mode: ['triton'] })).toEqual({});
    expect(errorOf(() => checkUpdate({ trace_mode: ['opentelemetry'] })).code).toBe('UNSUPPORTED');
  });
});

describe('global and model settings', () => {
  const initial = (file: string) => ({
    trace_file: file,
    trace_level: ['TIMESTAMPS'],
    trace_rate: '1',
    trace_count: '-1',
    log_frequency: '0',
    trace_mode: 'triton',
  });

  it('a model without its own setting reports the global one', () => {
    const m = manager({ level: 1, rate: 1 });
    expect(m.get('simple')).toEqual(initial(path.join(dir, 'trace.json')));
    expect(m.get('')).toEqual(m.get('simple'));
  });

  it('a model setting keeps its own fields and follows later global updates of the others', () => {
    const m = manager({ level: 1, rate: 1 });
    const file = path.join(dir, 'trace.json');
    expect(m.update('simple', { log_frequency: ['2'] })).toEqual({ ...initial(file), log_frequency: '2' });
    expect(m.update('', { trace_level: ['TIMESTAMPS', 'TENSORS'] })).toEqual({ ...initial(file), trace_level: ['TIMESTAMPS', 'TENSORS'] });
    expect(m.get('simple')).toEqual({ ...initial(file), trace_level: ['TIMESTAMPS', 'TENSORS'], log_frequency: '2' });
  });

  it("clearing falls back: global fields to their start-up values, model fields to the global ones (Triton's clear test)", () => {
    const m = manager({ level: 1, rate: 1 });
    const file = path.join(dir, 'trace.json');
    m.update('simple', { trace_rate: ['12'], log_frequency: ['34'] });
    m.update('', { trace_rate: ['56'], trace_count: ['78'], trace_level: ['OFF'] });
    const global = { ...initial(file), trace_level: ['OFF'] };
    expect(m.update('', { trace_rate: null, trace_count: null })).toEqual(global);
    expect(m.get('simple')).toEqual({ ...global, trace_rate: '12', log_frequency: '34' });
    expect(m.update('simple', { trace_rate: null, trace_level: null })).toEqual({ ...global, log_frequency: '34' });
    expect(m.get('')).toEqual(global);
    // Clearing the model's last own field removes its setting: it reports the global one again.
    m.update('', { trace_rate: ['9'] });
    expect(m.update('simple', { log_frequency: null })).toEqual({ ...global, trace_rate: '9' });
  });

  it('refuses a setting that would trace without a file or at rate 0, but allows one that is OFF', () => {
    const m = new TraceManager({ ...TRACE_DEFAULTS });
    expect(errorOf(() => m.update('', { trace_level: ['TIMESTAMPS'] })).message).toBe(
      'Attempting to set invalid trace setting :trace file name is not given',
    );
    const withFile = manager({ level: 1 });
    expect(errorOf(() => withFile.update('', { trace_rate: ['0'] })).message).toBe(
      'Attempting to set invalid trace setting :sample rate must be non-zero',
    );
    expect(withFile.update('', { trace_level: ['OFF'], trace_rate: ['0'] }).trace_rate).toBe('0');
  });
});

describe('sampling', () => {
  it('traces every rate-th request of a setting, and none while the level is OFF', () => {
    const m = manager({ level: 0, rate: 3 });
    expect(requests(m, 'simple', 9)).toHaveLength(0);
    m.update('', { trace_level: ['TIMESTAMPS'] });
    const traced = requests(m, 'simple', 9);
    expect(traced).toHaveLength(3);
    expect(traced.map((t) => t.id)).toEqual([1, 2, 3]);
  });

  it('a model setting samples its own requests; other models use the global setting', () => {
    const m = manager({ level: 0, rate: 1 });
    m.update('simple', { trace_level: ['TIMESTAMPS'], trace_rate: ['2'] });
    expect(requests(m, 'other', 4)).toHaveLength(0);
    expect(requests(m, 'simple', 4)).toHaveLength(2);
  });

  it('stops after count traces; the count reported is what is left', () => {
    const m = manager({ level: 1, rate: 1, count: 3 });
    expect(requests(m, 'simple', 2)).toHaveLength(2);
    expect(m.get('').trace_count).toBe('1');
    expect(requests(m, 'simple', 5)).toHaveLength(1);
    expect(m.get('').trace_count).toBe('0');
    m.update('', { trace_count: ['2'] });
    expect(requests(m, 'simple', 5)).toHaveLength(2);
  });

  it('records TIMESTAMPS only at that level; TENSORS marks the trace for tensor records', () => {
    const m = manager({ level: 2, rate: 1 });
    const t = m.sample('simple')!;
    expect(t.tensors).toBe(true);
  });
});

describe('trace files', () => {
  it('with log_frequency N, every N traces become file.0, file.1, ... (each a JSON array); the rest at shutdown', async () => {
    const m = manager({ level: 1, rate: 1, logFrequency: 2 });
    for (const t of requests(m, 'simple', 5)) finish(t);
    await m.close();
    const file = path.join(dir, 'trace.json');
    expect(readdirSync(dir).sort()).toEqual(['trace.json.0', 'trace.json.1', 'trace.json.2']);
    expect(ids(readJson(`${file}.0`))).toEqual([1, 2]);
    expect(ids(readJson(`${file}.1`))).toEqual([3, 4]);
    expect(ids(readJson(`${file}.2`))).toEqual([5]);
  });

  it("with log_frequency 0 nothing is written until shutdown; then the file is one JSON array of Triton's records", async () => {
    const m = manager({ level: 1, rate: 1 });
    const [a, b] = requests(m, 'simple', 2);
    finish(a!);
    b!.stamp('HTTP_RECV_START', 5n);
    finish(b!);
    await new Promise((r) => setTimeout(r, 20));
    expect(existsSync(path.join(dir, 'trace.json'))).toBe(false);
    await m.close();
    const records = readJson(path.join(dir, 'trace.json'));
    expect(records).toEqual([
      { id: 1, model_name: 'simple', model_version: 1 },
      { id: 1, timestamps: [{ name: 'REQUEST_START', ns: 1 }] },
      { id: 1, timestamps: [{ name: 'REQUEST_END', ns: 2 }] },
      { id: 2, timestamps: [{ name: 'HTTP_RECV_START', ns: 5 }] },
      { id: 2, model_name: 'simple', model_version: 1 },
      { id: 2, timestamps: [{ name: 'REQUEST_START', ns: 1 }] },
      { id: 2, timestamps: [{ name: 'REQUEST_END', ns: 2 }] },
    ]);
  });

  it('a replaced setting writes its traces once its last running trace ends; the file stays one array', async () => {
    const m = manager({ level: 1, rate: 1 });
    const [early, running] = requests(m, 'simple', 2);
    finish(early!);
    m.update('', { trace_rate: ['1'] }); // replaces the setting while `running` is still out
    for (const t of requests(m, 'simple', 1)) finish(t);
    finish(running!);
    await m.close();
    expect(ids(readJson(path.join(dir, 'trace.json'))).sort()).toEqual([1, 2, 3]);
  });

  it('when the count runs out, the traces so far go to the next indexed file at once', async () => {
    const m = manager({ level: 1, rate: 1, count: 2 });
    for (const t of requests(m, 'simple', 4)) finish(t);
    await new Promise((r) => setTimeout(r, 50));
    expect(ids(readJson(path.join(dir, 'trace.json.0')))).toEqual([1, 2]);
    await m.close();
  });

  it('a traced request that never got its model writes what it has', async () => {
    const m = manager({ level: 1, rate: 1 });
    const t = m.sample('nope')!;
    t.stamp('GRPC_WAITREAD_START', 7n);
    t.end();
    t.end(); // idempotent
    await m.close();
    expect(readJson(path.join(dir, 'trace.json'))).toEqual([{ id: 1, timestamps: [{ name: 'GRPC_WAITREAD_START', ns: 7 }] }]);
  });

  it('writes tensors as Triton does at the TENSORS level', async () => {
    const m = manager({ level: 2, rate: 1 });
    const t = m.sample('simple')!;
    t.tensor('TENSOR_QUEUE_INPUT', 'INPUT0', 'INT32', [1, 3], asBuffer(new Uint8Array(new Int32Array([1, -2, 3]).buffer)));
    t.stamp('REQUEST_START', 1n); // not at this level
    t.end();
    await m.close();
    expect(readJson(path.join(dir, 'trace.json'))).toEqual([
      { id: 1, activity: 'TENSOR_QUEUE_INPUT', tensor: { name: 'INPUT0', data: '1,-2,3', shape: '1,3', dtype: 'INT32' } },
    ]);
  });
});

describe('tensor text', () => {
  it('formats elements like the C++ stream does', () => {
    expect(tensorText('FP32', new Uint8Array(new Float32Array([0.1, 1.5, -2]).buffer))).toBe('0.1,1.5,-2');
    expect(tensorText('BOOL', new Uint8Array([1, 0, 2]))).toBe('1,0,1');
    const bytes = Buffer.concat([Buffer.from([2, 0, 0, 0]), Buffer.from('hi'), Buffer.from([1, 0, 0, 0]), Buffer.from('"')]);
    expect(tensorText('BYTES', bytes)).toBe('"hi","\\""');
    expect(tensorText('INT64', new Uint8Array(new BigInt64Array([2n ** 62n]).buffer))).toBe('4611686018427387904');
  });
});

describe('--trace-config', () => {
  it('reads global and triton settings', () => {
    expect(parseTraceConfig(['triton,file=/tmp/t.json', 'triton,log-frequency=50', 'rate=100', 'level=TIMESTAMPS', 'count=100'])).toEqual({
      level: 1,
      rate: 100,
      count: 100,
      logFrequency: 50,
      file: '/tmp/t.json',
      mode: 'triton',
    });
    expect(parseTraceConfig(['level=TIMESTAMPS', 'level=TENSORS']).level).toBe(3);
    expect(parseTraceConfig(['level=TIMESTAMPS', 'level=OFF']).level).toBe(0);
    expect(parseTraceConfig([])).toEqual(TRACE_DEFAULTS);
    // OpenTelemetry's own settings are accepted (and unused) as long as the mode is triton.
    expect(parseTraceConfig(['opentelemetry,url=localhost:4318/v1/traces', 'mode=triton']).mode).toBe('triton');
  });

  it('refuses bad entries with a message naming them', () => {
    expect(() => parseTraceConfig(['rate'])).toThrow("--trace-config option format is '<trace mode>,<setting>=<value>'. Got rate");
    expect(() => parseTraceConfig([',rate=1'])).toThrow(/No trace mode specified/);
    expect(() => parseTraceConfig(['rate=fast'])).toThrow('Bad option: "--trace-config rate=fast". Invalid option value. Got fast');
    expect(() => parseTraceConfig(['level=LOUD'])).toThrow(/invalid value for trace level option: LOUD/);
    expect(() => parseTraceConfig(['zipkin,url=x'])).toThrow(/invalid value for trace mode option: zipkin/);
    expect(() => parseTraceConfig(['rat=1'])).toThrow(/unknown --trace-config setting 'rat=1'/);
    expect(() => parseTraceConfig(['mode=opentelemetry'])).toThrow(/mode=opentelemetry is not supported/);
  });
});

describe('a traced request through the core', () => {
  let tc: TestCore;
  beforeEach(async () => {
    tc = await startTestCore();
  });
  afterEach(async () => {
    await tc.close();
  });

  const simpleRequest = (trace: RequestTrace) => ({
    modelName: 'simple',
    modelVersion: '',
    id: 'r1',
    parameters: {},
    trace,
    inputs: ['INPUT0', 'INPUT1'].map((name) => ({
      name,
      datatype: 'INT32',
      shape: [1, 16],
      data: asBuffer(new Uint8Array(new Int32Array(16).fill(2).buffer)),
    })),
  });

  it('gets the model record and the core and scheduler timestamps in order, queue and compute inside the request', async () => {
    const trace = new RecordedTrace(1);
    await tc.core.infer(simpleRequest(trace));
    expect(trace.modelRecord).toEqual({ name: 'simple', version: 1, requestId: 'r1' });
    expect(trace.names()).toEqual([...CORE_STAMPS]);
    const ns = trace.stamps.map((s) => s.ns);
    for (let i = 1; i < ns.length; i++) expect(ns[i]! >= ns[i - 1]!, `${trace.names()[i]} before ${trace.names()[i - 1]}`).toBe(true);
  });

  it('records the input and output tensors at the TENSORS level', async () => {
    const trace = new RecordedTrace(1, true);
    await tc.core.infer(simpleRequest(trace));
    expect(trace.tensorRecords.map((t) => `${t.activity}:${t.name}:${t.shape.join('x')}:${t.bytes}`)).toEqual([
      'TENSOR_QUEUE_INPUT:INPUT0:1x16:64',
      'TENSOR_QUEUE_INPUT:INPUT1:1x16:64',
      'TENSOR_BACKEND_OUTPUT:OUTPUT0:1x16:64',
      'TENSOR_BACKEND_OUTPUT:OUTPUT1:1x16:64',
    ]);
  });

  it('a request that fails its checks still gets REQUEST_START and REQUEST_END', async () => {
    const trace = new RecordedTrace(1);
    const req = simpleRequest(trace);
    req.inputs.pop();
    await expect(tc.core.infer(req)).rejects.toThrow(/expected 2 inputs/);
    expect(trace.names()).toEqual(['REQUEST_START', 'REQUEST_END']);
  });

  it('the core reports trace settings per ready model and refuses unknown ones', () => {
    expect(tc.core.traceSettings('simple').trace_level).toEqual(['OFF']);
    const e = errorOf(() => tc.core.traceSettings('nope'));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe('Request for unknown model : nope');
  });
});

describe('traced requests batched together', () => {
  let tc: TestCore;
  beforeEach(async () => {
    tc = await startTestCore([
      identityTestModel('batched', 'INT32', [2], 4, { extraConfig: 'dynamic_batching { max_queue_delay_microseconds: 200000 }' }),
    ]);
  });
  afterEach(async () => {
    await tc.close();
  });

  it('share the execution: each keeps its own queue start, both get the same compute times', async () => {
    const request = (trace: RequestTrace | undefined, id: string) => ({
      modelName: 'batched',
      modelVersion: '',
      id,
      parameters: {},
      ...(trace && { trace }),
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 2], data: asBuffer(new Uint8Array(new Int32Array([1, 2]).buffer)) }],
    });
    const a = new RecordedTrace(1);
    const b = new RecordedTrace(2);
    // A third, untraced request in the same batch: the traced ones are unaffected by it.
    await Promise.all([tc.core.infer(request(a, 'a')), tc.core.infer(request(undefined, 'u')), tc.core.infer(request(b, 'b'))]);
    const at = (t: RecordedTrace, name: string): bigint => t.stamps.find((s) => s.name === name)!.ns;
    expect(a.names()).toEqual(b.names());
    for (const name of ['COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END']) expect(at(a, name)).toBe(at(b, name));
    expect(at(a, 'QUEUE_START')).toBeLessThan(at(b, 'QUEUE_START'));
    expect(at(b, 'QUEUE_START')).toBeLessThanOrEqual(at(b, 'COMPUTE_START'));
    const stats = tc.core.statistics('batched', '')[0]!;
    expect(stats.execution_count).toBe(1);
  });
});
