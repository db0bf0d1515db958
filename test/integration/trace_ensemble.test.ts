// A traced ensemble request in the built server over ONNX models, read back from the trace file
// as Triton writes it: the ensemble's own trace (front-end, REQUEST and QUEUE timestamps), and one
// child trace per step whose "parent_id" is the ensemble trace's id, with the step model's name,
// version, request id and its own queue and compute timestamps. Children do not count against
// trace_count.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildSimple } from '../../tools/onnx/models.js';
import { doubleSimple, ensembleConfig, writeEnsemble } from '../helpers/ensemble.js';
import { inferJson } from '../helpers/http.js';
import { makeRepo, type Repo } from '../helpers/repo.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { range } from '../helpers/tensors.js';
import { CORE_STAMPS } from '../helpers/trace_stamps.js';

interface TraceRecord {
  id: number;
  model_name?: string;
  model_version?: number;
  request_id?: string;
  parent_id?: number;
  timestamps?: { name: string; ns: number }[];
}

interface Traced {
  model?: TraceRecord;
  names: string[];
  ns: number[];
}

/** The file's records by trace id, in file order; checks that each id's records are one run, as Triton writes them. */
function traces(file: string): Map<number, Traced> {
  const records = JSON.parse(readFileSync(file, 'utf8')) as TraceRecord[];
  const out = new Map<number, Traced>();
  let last: number | undefined;
  for (const r of records) {
    if (r.id !== last && out.has(r.id)) throw new Error(`trace ${r.id} is split in the file`);
    last = r.id;
    const t = out.get(r.id) ?? { names: [], ns: [] };
    if (r.model_name !== undefined) t.model = r;
    for (const s of r.timestamps ?? []) {
      t.names.push(s.name);
      t.ns.push(s.ns);
    }
    out.set(r.id, t);
  }
  return out;
}

const STEP_ORDER = CORE_STAMPS;

const inputs = () => [
  { name: 'IN0', datatype: 'INT32', shape: [1, 16], data: range(16, (i) => i) },
  { name: 'IN1', datatype: 'INT32', shape: [1, 16], data: range(16, (i) => 2 * i) },
];

describe('a traced ensemble request', () => {
  let dir: string;
  let repo: Repo;
  let server: ServerHandle | undefined;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'serval-trace-ens-'));
    const simple = buildSimple();
    repo = makeRepo([{ name: simple.name, config: simple.config, versions: { 1: simple.onnx } }]);
    writeEnsemble(repo.dir, 'double_simple', ensembleConfig(doubleSimple()));
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    repo.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes one child trace per step, each with parent_id, its model and its own ordered timestamps', async () => {
    const file = path.join(dir, 'trace.json');
    server = await startServer(repo.dir, [
      '--trace-config',
      `triton,file=${file}`,
      '--trace-config',
      'level=TIMESTAMPS',
      '--trace-config',
      'rate=1',
    ]);
    const res = await inferJson(server.url, 'double_simple', { id: 'ens-1', inputs: inputs() });
    expect(res.status, res.text()).toBe(200);
    await server.stop();
    server = undefined;

    const all = traces(file);
    expect(all.size).toBe(3);
    const roots = [...all].filter(([, t]) => t.model?.parent_id === undefined);
    expect(roots).toHaveLength(1);
    const [rootId, root] = roots[0]!;
    expect(root.model).toEqual({ id: rootId, model_name: 'double_simple', model_version: 1, request_id: 'ens-1' });
    // The ensemble's own request: no compute of its own, as in Triton.
    expect(root.names).toEqual([
      'HTTP_RECV_START',
      'HTTP_RECV_END',
      'REQUEST_START',
      'QUEUE_START',
      'REQUEST_END',
      'INFER_RESPONSE_COMPLETE',
      'HTTP_SEND_START',
      'HTTP_SEND_END',
    ]);
    const children = [...all].filter(([id]) => id !== rootId).sort(([a], [b]) => a - b);
    expect(children.map(([id]) => id)).toEqual([rootId + 1, rootId + 2]);
    for (const [id, child] of children) {
      expect(child.model).toEqual({ id, model_name: 'simple', model_version: 1, request_id: 'ens-1', parent_id: rootId });
      expect(child.names).toEqual(STEP_ORDER);
      for (let i = 1; i < child.ns.length; i++) expect(child.ns[i]!, child.names[i]).toBeGreaterThanOrEqual(child.ns[i - 1]!);
    }
    const at = (t: Traced, name: string): number => t.ns[t.names.indexOf(name)]!;
    const [first, second] = [children[0]![1], children[1]![1]];
    // Within the ensemble's request, and the second step after the first (it reads the first's outputs).
    expect(at(first, 'REQUEST_START')).toBeGreaterThanOrEqual(at(root, 'QUEUE_START'));
    expect(at(second, 'REQUEST_START')).toBeGreaterThanOrEqual(at(first, 'REQUEST_END'));
    expect(at(root, 'REQUEST_END')).toBeGreaterThanOrEqual(at(second, 'REQUEST_END'));
  });

  it('counts only the sampled requests against trace_count: two ensemble requests of three, with their children', async () => {
    const file = path.join(dir, 'trace.json');
    server = await startServer(repo.dir, [
      '--trace-config',
      `triton,file=${file}`,
      '--trace-config',
      'level=TIMESTAMPS',
      '--trace-config',
      'rate=1',
      '--trace-config',
      'count=2',
    ]);
    for (let i = 0; i < 3; i++) {
      const res = await inferJson(server.url, 'double_simple', { id: `c${i}`, inputs: inputs() });
      expect(res.status, res.text()).toBe(200);
    }
    await server.stop();
    server = undefined;
    // The count ran out: the traces went to the first indexed file, as Triton writes them.
    expect(readdirSync(dir)).toEqual(['trace.json.0']);
    const all = [...traces(`${file}.0`).values()];
    const roots = all.filter((t) => t.model?.parent_id === undefined);
    expect(roots.map((t) => t.model?.request_id)).toEqual(['c0', 'c1']);
    for (const r of roots) {
      const kids = all.filter((t) => t.model?.parent_id === r.model?.id);
      expect(kids.map((k) => k.model?.model_name)).toEqual(['simple', 'simple']);
      expect(kids.map((k) => k.model?.request_id)).toEqual([r.model?.request_id, r.model?.request_id]);
    }
    expect(all).toHaveLength(6);
  });
});
