// The trace and logging extensions end to end on the spawned server: tracing turned on through the
// API, requests over HTTP and gRPC, the trace file read after shutdown; log settings changed
// while it runs decide what is written to the --log-file.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { grpcClient } from '../helpers/grpc.js';
import { openInferStream } from '../helpers/grpc_stream.js';
import { get, postJson } from '../helpers/http.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { simpleGrpcRequest, simpleJsonInputs } from '../helpers/simple.js';
import { range } from '../helpers/tensors.js';
import { CORE_STAMPS } from '../helpers/trace_stamps.js';

const repo = inject('modelRepository');

interface TraceRecord {
  id: number;
  model_name?: string;
  model_version?: number;
  request_id?: string;
  timestamps?: { name: string; ns: number }[];
}

const HTTP_ORDER = ['HTTP_RECV_START', 'HTTP_RECV_END', ...CORE_STAMPS, 'INFER_RESPONSE_COMPLETE', 'HTTP_SEND_START', 'HTTP_SEND_END'];
const GRPC_ORDER = HTTP_ORDER.map((n) => n.replace('HTTP_RECV', 'GRPC_WAITREAD').replace('HTTP_SEND', 'GRPC_SEND'));

/** The file's records grouped by trace id: the model record and the timestamps in file order. */
function traces(file: string): Map<number, { model?: TraceRecord; stamps: { name: string; ns: number }[] }> {
  const records = JSON.parse(readFileSync(file, 'utf8')) as TraceRecord[];
  const out = new Map<number, { model?: TraceRecord; stamps: { name: string; ns: number }[] }>();
  for (const r of records) {
    const t = out.get(r.id) ?? { stamps: [] };
    if (r.model_name !== undefined) t.model = r;
    for (const s of r.timestamps ?? []) t.stamps.push(s);
    out.set(r.id, t);
  }
  return out;
}

describe('trace extension', () => {
  let dir: string;
  let server: ServerHandle | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'serval-trace-it-'));
  });
  afterEach(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('turned on through the API, traces every rate-th request over both protocols into a valid JSON file', async () => {
    const file = path.join(dir, 'trace.json');
    server = await startServer(repo, ['--trace-config', `triton,file=${file}`]);
    // Off at start (Triton's default level); the file comes from the command line only.
    expect((await get(server.url, '/v2/trace/setting')).json()).toEqual({
      trace_level: ['OFF'],
      trace_rate: '1000',
      trace_count: '-1',
      log_frequency: '0',
      trace_file: file,
      trace_mode: 'triton',
    });
    const on = await postJson(server.url, '/v2/trace/setting', { trace_level: ['TIMESTAMPS'], trace_rate: '2' });
    expect(on.status, on.text()).toBe(200);
    expect(on.json()).toMatchObject({ trace_level: ['TIMESTAMPS'], trace_rate: '2' });
    const refused = await postJson(server.url, '/v2/trace/setting', { trace_file: path.join(dir, 'elsewhere.json') });
    expect(refused.status).toBe(501);
    expect(refused.json()).toEqual({ error: 'trace file location can not be updated through network protocol' });

    for (let i = 0; i < 4; i++) {
      const r = await postJson(server.url, '/v2/models/simple/infer', { id: `h${i}`, inputs: simpleJsonInputs(range(16), range(16)) });
      expect(r.status, r.text()).toBe(200);
    }
    const client = grpcClient(server.grpcAddress);
    try {
      for (let i = 0; i < 4; i++) await client.call('ModelInfer', simpleGrpcRequest(range(16), range(16), { id: `g${i}` }));
      // The model's own setting reports through gRPC as value lists.
      const res = await client.call('TraceSetting', { model_name: 'simple' });
      expect(res.settings.trace_rate).toEqual({ value: ['2'] });
    } finally {
      client.close();
    }
    // Requests on a ModelStreamInfer stream are sampled and stamped like unary ones.
    const stream = openInferStream(server.grpcAddress);
    try {
      for (let i = 0; i < 4; i++) stream.send(simpleGrpcRequest(range(16), range(16), { id: `s${i}` }));
      const replies = await stream.waitFor(4);
      expect(replies.map((r) => r.error_message)).toEqual(['', '', '', '']);
      stream.end();
      expect((await stream.status).code).toBe(0);
    } finally {
      stream.close();
    }
    // Nothing is written before shutdown with log_frequency 0 (as in Triton); then the array is closed.
    expect(await server.stop()).toBe(0);
    server = undefined;
    const all = traces(file);
    expect([...all.values()].map((t) => t.model?.request_id)).toEqual(['h1', 'h3', 'g1', 'g3', 's1', 's3']);
    for (const t of all.values()) {
      expect(t.model).toMatchObject({ model_name: 'simple', model_version: 1 });
      const order = t.model!.request_id!.startsWith('h') ? HTTP_ORDER : GRPC_ORDER;
      expect(t.stamps.map((s) => s.name)).toEqual(order);
      const at = Object.fromEntries(t.stamps.map((s) => [s.name, s.ns]));
      // Every timestamp is on one steady clock, in the order of the request's life.
      for (let i = 1; i < order.length; i++) {
        if (order[i] === 'INFER_RESPONSE_COMPLETE') continue;
        expect(at[order[i]!]!, `${order[i]} >= ${order[i - 1]}`).toBeGreaterThanOrEqual(at[order[i - 1]!]!);
      }
      expect(at.QUEUE_START).toBeGreaterThanOrEqual(at.REQUEST_START!);
      expect(at.COMPUTE_END).toBeLessThanOrEqual(at.REQUEST_END!);
    }
  });

  it('a model setting with a log frequency and a count writes file.0, file.1 and then stops tracing', async () => {
    const file = path.join(dir, 'trace.json');
    server = await startServer(repo, [
      '--trace-config',
      `triton,file=${file}`,
      '--trace-config',
      'level=TIMESTAMPS',
      '--trace-config',
      'rate=1',
    ]);
    const set = await postJson(server.url, '/v2/models/simple/trace/setting', { log_frequency: '2', trace_count: '4' });
    expect(set.json()).toMatchObject({ log_frequency: '2', trace_count: '4', trace_rate: '1' });
    for (let i = 0; i < 6; i++)
      await postJson(server.url, '/v2/models/simple/infer', { id: `r${i}`, inputs: simpleJsonInputs(range(16), range(16)) });
    expect((await get(server.url, '/v2/models/simple/trace/setting')).json().trace_count).toBe('0');
    // Clearing the model's fields falls back to the global setting.
    const cleared = await postJson(server.url, '/v2/models/simple/trace/setting', { log_frequency: null, trace_count: null });
    expect(cleared.json()).toEqual((await get(server.url, '/v2/trace/setting')).json());
    expect(await server.stop()).toBe(0);
    server = undefined;
    const ids = (f: string) => [...traces(f).values()].map((t) => t.model?.request_id);
    expect(ids(`${file}.0`)).toEqual(['r0', 'r1']);
    expect(ids(`${file}.1`)).toEqual(['r2', 'r3']);
    expect(existsSync(`${file}.2`)).toBe(false);
  });
});

describe('logging extension', () => {
  let dir: string;
  let server: ServerHandle | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'serval-log-it-'));
  });
  afterEach(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const reload = async (s: ServerHandle): Promise<void> => {
    expect((await postJson(s.url, '/v2/repository/models/simple/unload', {})).status).toBe(200);
    expect((await postJson(s.url, '/v2/repository/models/simple/load', {})).status).toBe(200);
  };
  const loadedLines = (file: string): string[] =>
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.includes("successfully loaded 'simple'"));

  it('--log-file takes the lines; settings changed at run time change what is written', async () => {
    const file = path.join(dir, 'serval.log');
    server = await startServer(repo, ['--model-control-mode', 'explicit', '--load-model', 'simple', '--log-file', file]);
    expect((await get(server.url, '/v2/logging')).json()).toEqual({
      log_file: file,
      log_info: true,
      log_warning: true,
      log_error: true,
      log_verbose_level: 0,
      log_format: 'default',
    });
    expect(loadedLines(file)).toHaveLength(1);
    expect(server.stderr()).not.toContain('successfully loaded');

    const off = await postJson(server.url, '/v2/logging', { log_info: false });
    expect(off.json()).toMatchObject({ log_info: false, log_warning: true });
    await reload(server);
    expect(loadedLines(file)).toHaveLength(1);

    const client = grpcClient(server.grpcAddress);
    try {
      const res = await client.call('LogSettings', {
        settings: { log_info: { bool_param: true }, log_format: { string_param: 'ISO8601' } },
      });
      expect(res.settings.log_info.bool_param).toBe(true);
      expect(res.settings.log_format.string_param).toBe('ISO8601');
      const e = await client.error('LogSettings', { settings: { log_file: { string_param: path.join(dir, 'other.log') } } });
      expect(e.details).toBe('log file location can not be updated through network protocol');
    } finally {
      client.close();
    }
    await reload(server);
    const lines = loadedLines(file);
    expect(lines).toHaveLength(2);
    // tritonserver's default (glog) layout, then its ISO8601 one; the location is Serval's module and line.
    expect(lines[0]).toMatch(/^I\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ repository\.js:\d+\] "successfully loaded 'simple'"$/);
    expect(lines[1]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ repository\.js:\d+\] "successfully loaded 'simple'"$/);
    // The unload before it, as tritonserver words it; the one while log_info was off is not there.
    const unloads = readFileSync(file, 'utf8').match(/^.* "successfully unloaded 'simple' version 1"$/gm) ?? [];
    expect(unloads).toHaveLength(1);
    expect(unloads[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ repository\.js:\d+\] /);
    expect((await postJson(server.url, '/v2/logging', { log_file: path.join(dir, 'other.log') })).status).toBe(501);
    expect(existsSync(path.join(dir, 'other.log'))).toBe(false);
  });
});
