// BLS calls of a Python model traced as tritonserver 2.51 traces them, in the built server with
// real stubs (test/reference/models/bls_trace; side by side with Triton in
// test/reference/test_trace_reference.py): a call made with `trace=request.trace()` gets a child
// trace of the calling request's (the next id, "parent_id", the called model's name and version,
// the call's own request id when it has one, the model's own timestamps); a call without it, or
// from a request that was not sampled, is not traced.
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { inferJson, postJson } from '../helpers/http.js';
import { ROOT } from '../helpers/paths.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { CORE_STAMPS } from '../helpers/trace_stamps.js';

interface TraceRecord {
  id: number;
  model_name?: string;
  model_version?: number;
  request_id?: string;
  parent_id?: number;
  timestamps?: { name: string; ns: number }[];
  activity?: string;
  tensor?: { name: string; data: string };
}

interface Traced {
  model?: Omit<TraceRecord, 'id'>;
  names: string[];
  at: Map<string, number>;
  /** `activity name=data` of each tensor record. */
  tensors: string[];
}

/** Per trace id: its model record (without the id), its timestamps and its tensors, in file order. */
function traces(file: string): Map<number, Traced> {
  const out = new Map<number, Traced>();
  for (const r of JSON.parse(readFileSync(file, 'utf8')) as TraceRecord[]) {
    const t = out.get(r.id) ?? { names: [], at: new Map<string, number>(), tensors: [] };
    if (r.tensor) t.tensors.push(`${r.activity} ${r.tensor.name}=${r.tensor.data}`);
    if (r.model_name !== undefined) {
      const { id: _, ...model } = r;
      t.model = model;
    }
    for (const s of r.timestamps ?? []) {
      t.names.push(s.name);
      t.at.set(s.name, s.ns);
    }
    out.set(r.id, t);
  }
  return out;
}

/** bls_trace's JSON report (TEXT, hex-encoded) of one request with MODE = mode. */
async function ask(url: string, mode: string, id: string): Promise<{ type: string; out: number[][]; exception?: string }> {
  const res = await inferJson(url, 'bls_trace', { id, inputs: [{ name: 'MODE', shape: [1], datatype: 'BYTES', data: [mode] }] });
  expect(res.status, res.text()).toBe(200);
  const text = res.json().outputs[0].data[0] as string;
  return JSON.parse(Buffer.from(text, 'hex').toString('utf8'));
}

describe('traced BLS calls of a Python model', () => {
  let dir: string;
  let server: ServerHandle | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'serval-trace-bls-'));
    const models = path.join(ROOT, 'test', 'reference', 'models');
    cpSync(path.join(models, 'bls_trace'), path.join(dir, 'repo', 'bls_trace'), { recursive: true });
    cpSync(path.join(models, 'add_one_int32'), path.join(dir, 'repo', 'add_one_int32'), { recursive: true });
    cpSync(path.join(ROOT, 'model_repository', 'repeat_int32'), path.join(dir, 'repo', 'repeat_int32'), { recursive: true });
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('gives calls made with trace=request.trace() child traces, and no others', async () => {
    const file = path.join(dir, 'trace.json');
    const flags = ['--trace-config', `triton,file=${file}`, '--trace-config', 'rate=1'];
    flags.push('--trace-config', 'level=TIMESTAMPS', '--trace-config', 'level=TENSORS');
    server = await startServer(path.join(dir, 'repo'), flags);
    const untraced = await ask(server.url, 'untraced', 'outer-1');
    const twice = await ask(server.url, 'traced_twice', 'outer-2');
    const stream = await ask(server.url, 'stream_traced', 'outer-3');
    // Not sampled (the model's level OFF): its trace() is there and traces nothing.
    const off = await postJson(server.url, '/v2/models/bls_trace/trace/setting', { trace_level: ['OFF'] });
    expect(off.status, off.text()).toBe(200);
    const notSampled = await ask(server.url, 'traced', 'outer-4');
    for (const r of [untraced, twice, stream, notSampled]) {
      expect(r.exception).toBeUndefined();
      expect(r.type).toBe('InferenceTrace');
    }
    expect(twice.out).toEqual([[2], [3]]);
    expect(stream.out).toEqual([[4], [2]]);
    await server.stop();
    server = undefined;

    const all = traces(file);
    const models = Object.fromEntries([...all].map(([id, t]) => [id, t.model]));
    expect(models).toEqual({
      1: { model_name: 'bls_trace', model_version: 1, request_id: 'outer-1' },
      2: { model_name: 'bls_trace', model_version: 1, request_id: 'outer-2' },
      3: { model_name: 'add_one_int32', model_version: 1, request_id: 'inner', parent_id: 2 },
      4: { model_name: 'add_one_int32', model_version: 1, parent_id: 2 },
      5: { model_name: 'bls_trace', model_version: 1, request_id: 'outer-3' },
      6: { model_name: 'repeat_int32', model_version: 1, parent_id: 5 },
    });
    for (const [child, parent] of [
      [3, 2],
      [4, 2],
      [6, 5],
    ] as const) {
      const c = all.get(child)!;
      const p = all.get(parent)!;
      // The called model's own request: no front-end timestamps.
      expect(c.names).toEqual(CORE_STAMPS);
      expect(c.at.get('REQUEST_START')!).toBeGreaterThanOrEqual(p.at.get('COMPUTE_START')!);
      // A decoupled child is released when its model's execute() has returned too, which may
      // come after the parent took its last response and finished (tritonserver 2.51 releases
      // it later still): only the one-response children must end inside their parent.
      if (child !== 6) expect(c.at.get('REQUEST_END')!).toBeLessThanOrEqual(p.at.get('REQUEST_END')!);
    }
    expect(all.get(4)!.at.get('REQUEST_START')!).toBeGreaterThanOrEqual(all.get(3)!.at.get('REQUEST_END')!);
    // TENSORS: each child's inputs as queued and outputs as the model made them, a decoupled
    // model's for each of its responses (what it was not asked for left out, as in Triton).
    expect(all.get(4)!.tensors).toEqual(['TENSOR_QUEUE_INPUT IN=2', 'TENSOR_BACKEND_OUTPUT OUT=3']);
    expect(all.get(6)!.tensors).toEqual([
      'TENSOR_QUEUE_INPUT IN=4,2',
      'TENSOR_QUEUE_INPUT DELAY=0,0',
      'TENSOR_QUEUE_INPUT WAIT=0',
      'TENSOR_BACKEND_OUTPUT OUT=4',
      'TENSOR_BACKEND_OUTPUT OUT=2',
    ]);
  });
});
