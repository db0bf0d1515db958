// Child traces, as Triton's tracer keeps them for an ensemble's steps: the next id, "parent_id" in
// the model record, the parent's level, written with the parent as one group once all have ended,
// and not counted against trace_count or log_frequency. Then an ensemble request through the
// in-process core: one child per step, with the step model's record and timestamps.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { InferRequest } from '../../src/kernel/types.js';
import { TRACE_DEFAULTS, type TraceValues } from '../../src/trace/settings.js';
import { TraceManager } from '../../src/trace/trace_manager.js';
import { doubleSimple, ensembleConfig } from '../helpers/ensemble.js';
import { RecordedTrace } from '../helpers/frontends.js';
import { asBuffer } from '../helpers/tensors.js';
import { SIMPLE_TEST_MODEL, startTestCore, type TestCore } from '../helpers/test_core.js';
import { CORE_STAMPS } from '../helpers/trace_stamps.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'serval-trace-child-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const manager = (values: Partial<TraceValues> = {}): TraceManager =>
  new TraceManager({ ...TRACE_DEFAULTS, file: path.join(dir, 'trace.json'), ...values });

interface Rec {
  id: number;
  model_name?: string;
  model_version?: number;
  request_id?: string;
  parent_id?: number;
  timestamps?: { name: string; ns: number }[];
  activity?: string;
}
const readJson = (f: string): Rec[] => JSON.parse(readFileSync(f, 'utf8'));
const file = (): string => path.join(dir, 'trace.json');

describe('child traces', () => {
  it('take the next ids, carry parent_id in their model record, and are written with the parent, each id in one run', async () => {
    const m = manager({ level: 1, rate: 1 });
    const root = m.sample('ens')!;
    root.model('ens', 1, 'r');
    const a = root.child();
    const b = root.child();
    const grand = b.child(); // a step that is itself an ensemble
    expect([root.id, a.id, b.id, grand.id]).toEqual([1, 2, 3, 4]);
    expect(m.sample('ens')!.id).toBe(5); // sampled traces and children share one counter, as in Triton
    root.stamp('REQUEST_START', 1n);
    a.model('pre', 1, 'r');
    b.model('ens2', 2, 'r');
    grand.model('inner', 3, 'r');
    a.stamp('REQUEST_START', 2n);
    b.stamp('REQUEST_START', 3n);
    a.stamp('REQUEST_END', 4n);
    grand.stamp('REQUEST_START', 5n);
    a.end();
    grand.end();
    b.end();
    root.stamp('REQUEST_END', 9n);
    root.end();
    await m.close();
    const records = readJson(file());
    const mine = records.filter((r) => r.id !== 5);
    expect(mine).toEqual([
      { id: 1, model_name: 'ens', model_version: 1, request_id: 'r' },
      { id: 1, timestamps: [{ name: 'REQUEST_START', ns: 1 }] },
      { id: 1, timestamps: [{ name: 'REQUEST_END', ns: 9 }] },
      { id: 2, model_name: 'pre', model_version: 1, request_id: 'r', parent_id: 1 },
      { id: 2, timestamps: [{ name: 'REQUEST_START', ns: 2 }] },
      { id: 2, timestamps: [{ name: 'REQUEST_END', ns: 4 }] },
      { id: 3, model_name: 'ens2', model_version: 2, request_id: 'r', parent_id: 1 },
      { id: 3, timestamps: [{ name: 'REQUEST_START', ns: 3 }] },
      { id: 4, model_name: 'inner', model_version: 3, request_id: 'r', parent_id: 3 },
      { id: 4, timestamps: [{ name: 'REQUEST_START', ns: 5 }] },
    ]);
  });

  it('the group is written only when the last of its traces ends, whichever that is', async () => {
    const m = manager({ level: 1, rate: 1, logFrequency: 1 });
    const root = m.sample('ens')!;
    const child = root.child();
    root.model('ens', 1, '');
    child.model('pre', 1, '');
    root.end(); // e.g. the client went away while the step still runs
    await new Promise((r) => setTimeout(r, 30));
    expect(existsSync(`${file()}.0`)).toBe(false);
    child.stamp('REQUEST_END', 3n);
    child.end();
    child.end(); // idempotent
    const late = root.child(); // after the group was written: records nothing, writes nothing
    late.model('post', 1, '');
    late.end();
    await m.close();
    expect(readdirSync(dir)).toEqual(['trace.json.0']);
    expect(readJson(`${file()}.0`)).toEqual([
      { id: 1, model_name: 'ens', model_version: 1 },
      { id: 2, model_name: 'pre', model_version: 1, parent_id: 1 },
      { id: 2, timestamps: [{ name: 'REQUEST_END', ns: 3 }] },
    ]);
  });

  it('are not counted against trace_count or log_frequency: a group counts as one trace', async () => {
    const m = manager({ level: 1, rate: 1, count: 2, logFrequency: 2 });
    const first = m.sample('ens')!;
    const kids = [first.child(), first.child(), first.child()];
    expect(m.get('').trace_count).toBe('1');
    for (const t of [...kids, first]) {
      t.model('m', 1, '');
      t.end();
    }
    await new Promise((r) => setTimeout(r, 30));
    expect(existsSync(`${file()}.0`)).toBe(false); // one trace collected of log_frequency 2
    const second = m.sample('ens')!;
    const last = second.child();
    for (const t of [last, second]) {
      t.model('m', 1, '');
      t.end();
    }
    expect(m.sample('ens')).toBeUndefined(); // count used up by the two sampled traces
    await m.close();
    expect(readdirSync(dir)).toEqual(['trace.json.0']);
    expect([...new Set(readJson(`${file()}.0`).map((r) => r.id))]).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("have the parent's level: tensors without timestamps at TENSORS alone", async () => {
    const m = manager({ level: 2, rate: 1 });
    const root = m.sample('ens')!;
    const child = root.child();
    expect(child.tensors).toBe(true);
    child.model('pre', 1, '');
    child.stamp('REQUEST_START', 1n);
    child.tensor('TENSOR_QUEUE_INPUT', 'X', 'INT32', [1], asBuffer(new Uint8Array(new Int32Array([7]).buffer)));
    child.end();
    root.end();
    await m.close();
    expect(readJson(file())).toEqual([
      { id: 2, activity: 'TENSOR_QUEUE_INPUT', tensor: { name: 'X', data: '7', shape: '1', dtype: 'INT32' } },
    ]);
  });
});

describe('a traced ensemble request through the core', () => {
  let tc: TestCore;
  beforeEach(async () => {
    const loose = doubleSimple('loose');
    for (const t of [...loose.inputs, ...loose.outputs]) t.dims = [-1];
    const ensembles = [doubleSimple(), loose].map((e) => ({ name: e.name, config: ensembleConfig(e), model: SIMPLE_TEST_MODEL.model }));
    tc = await startTestCore([SIMPLE_TEST_MODEL, ...ensembles]);
  });
  afterEach(async () => {
    await tc.close();
  });

  const request = (trace: RecordedTrace | undefined, length = 16): InferRequest => ({
    modelName: 'double_simple',
    modelVersion: '',
    id: 'r1',
    parameters: {},
    ...(trace && { trace }),
    inputs: ['IN0', 'IN1'].map((name) => ({
      name,
      datatype: 'INT32',
      shape: [1, length],
      data: asBuffer(new Uint8Array(new Int32Array(length).fill(3).buffer)),
    })),
  });
  const at = (t: RecordedTrace, name: string): bigint => t.stamps.find((s) => s.name === name)!.ns;

  it("gives each step a child trace with the step model's record and the scheduler's timestamps, in order", async () => {
    const root = new RecordedTrace(1);
    await tc.core.infer(request(root));
    expect(root.modelRecord).toEqual({ name: 'double_simple', version: 1, requestId: 'r1' });
    expect(root.names()).toEqual(['REQUEST_START', 'QUEUE_START', 'REQUEST_END']);
    expect(root.children).toHaveLength(2);
    for (const c of root.children) {
      expect(c.modelRecord).toEqual({ name: 'simple', version: 1, requestId: 'r1' });
      expect(c.names()).toEqual([...CORE_STAMPS]);
      const ns = c.stamps.map((s) => s.ns);
      for (let i = 1; i < ns.length; i++) expect(ns[i]! >= ns[i - 1]!).toBe(true);
      expect(c.ended).toBe(1);
    }
    const [first, second] = root.children as [RecordedTrace, RecordedTrace];
    // The steps run inside the ensemble's request, the second after the first (it reads its outputs).
    expect(at(first, 'REQUEST_START')).toBeGreaterThanOrEqual(at(root, 'QUEUE_START'));
    expect(at(second, 'REQUEST_START')).toBeGreaterThanOrEqual(at(first, 'REQUEST_END'));
    expect(at(root, 'REQUEST_END')).toBeGreaterThanOrEqual(at(second, 'REQUEST_END'));
  });

  it("records the ensemble's and each step's tensors at the TENSORS level", async () => {
    const root = new RecordedTrace(1, true);
    await tc.core.infer(request(root));
    const list = (t: RecordedTrace) => t.tensorRecords.map((r) => `${r.activity}:${r.name}:${r.shape.join('x')}`);
    expect(list(root)).toEqual([
      'TENSOR_QUEUE_INPUT:IN0:1x16',
      'TENSOR_QUEUE_INPUT:IN1:1x16',
      'TENSOR_BACKEND_OUTPUT:OUT0:1x16',
      'TENSOR_BACKEND_OUTPUT:OUT1:1x16',
    ]);
    expect(root.children).toHaveLength(2);
    for (const c of root.children) {
      expect(list(c)).toEqual([
        'TENSOR_QUEUE_INPUT:INPUT0:1x16',
        'TENSOR_QUEUE_INPUT:INPUT1:1x16',
        'TENSOR_BACKEND_OUTPUT:OUTPUT0:1x16',
        'TENSOR_BACKEND_OUTPUT:OUTPUT1:1x16',
      ]);
    }
  });

  it('a step that fails still ends its child trace, with REQUEST_START and REQUEST_END', async () => {
    const root = new RecordedTrace(1);
    // loose takes any length, its first step (simple) only 16.
    await expect(tc.core.infer({ ...request(root, 8), modelName: 'loose' })).rejects.toThrow(/in ensemble 'loose'/);
    expect(root.children).toHaveLength(1);
    const child = root.children[0]!;
    expect(child.modelRecord).toEqual({ name: 'simple', version: 1, requestId: 'r1' });
    expect(child.names()).toEqual(['REQUEST_START', 'REQUEST_END']);
    expect(child.ended).toBe(1);
    expect(root.names()).toEqual(['REQUEST_START', 'QUEUE_START', 'REQUEST_END']);
  });

  it('an untraced ensemble request makes no traces', async () => {
    const res = await tc.core.infer(request(undefined));
    expect(res.outputs.map((o) => o.name)).toEqual(['OUT0', 'OUT1']);
  });
});
