// The repository's lifecycle options over the in-process test backend: --model-config-name,
// --model-load-thread-count, --model-load-retry-count, --model-namespacing, and Triton's texts
// for load requests naming no model folder.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/backends/backend.js';
import { BackendRegistry } from '../../src/backends/registry.js';
import { ServalError } from '../../src/kernel/errors.js';
import { createLogger, LogControl, type Logger } from '../../src/kernel/log.js';
import type { InferRequest } from '../../src/kernel/types.js';
import { NamespacedRepository } from '../../src/repository/namespaces.js';
import { type ControlMode, ModelRepository } from '../../src/repository/repository.js';
import { doubleSimple, ensembleConfig } from '../helpers/ensemble.js';
import { capturedLogger } from '../helpers/frontends.js';
import { fromI32, i32, range } from '../helpers/tensors.js';
import { testBackend } from '../helpers/test_backend.js';
import { identityTestModel, SIMPLE_TEST_MODEL, type TestModel } from '../helpers/test_core.js';

const dirs: string[] = [];
const repos: ModelRepository[] = [];
afterEach(async () => {
  await Promise.all(repos.splice(0).map((r) => r.unloadAll()));
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function folder(models: TestModel[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-lifecycle-'));
  dirs.push(dir);
  for (const m of models) writeModel(dir, m);
  return dir;
}

function writeModel(dir: string, m: TestModel): void {
  mkdirSync(path.join(dir, m.name, '1'), { recursive: true });
  writeFileSync(path.join(dir, m.name, '1', 'model.json'), JSON.stringify(m.model));
  writeFileSync(path.join(dir, m.name, 'config.pbtxt'), m.config);
}

interface Opts {
  mode?: ControlMode;
  startupModels?: string[];
  configName?: string;
  loadThreads?: number;
  loadRetries?: number;
  backend?: Backend<unknown>;
  namespacing?: boolean;
  /** Capture info lines too (tritonserver's load/unload lines are info). */
  info?: boolean;
}

async function open(roots: string[], o: Opts = {}): Promise<{ repo: ModelRepository; lines: string[] }> {
  const { log, lines } = o.info ? infoLogger() : capturedLogger();
  const Repository = o.namespacing ? NamespacedRepository : ModelRepository;
  const repo = new Repository(roots, log, {
    mode: o.mode ?? 'none',
    startupModels: o.startupModels ?? [],
    autoComplete: true,
    backends: new BackendRegistry([(o.backend ?? testBackend) as Backend<unknown>]),
    ...(o.configName !== undefined && { configName: o.configName }),
    ...(o.loadThreads !== undefined && { loadThreads: o.loadThreads }),
    ...(o.loadRetries !== undefined && { loadRetries: o.loadRetries }),
  });
  repos.push(repo);
  await repo.loadAll();
  return { repo, lines };
}

function infoLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger(new LogControl({ info: true, format: 'logfmt' }, (l) => lines.push(l))), lines };
}

const maxBatch = (repo: ModelRepository, name: string): number => repo.get(name, '').config.maxBatchSize;

function thrown(f: () => unknown): ServalError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ServalError);
    return e as ServalError;
  }
  throw new Error('expected a ServalError');
}

async function rejected(p: Promise<unknown>): Promise<ServalError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ServalError);
    return e as ServalError;
  }
  throw new Error('expected a ServalError');
}

const withBatch = (m: TestModel, n: number): string => m.config.replace(/max_batch_size: \d+/, `max_batch_size: ${n}`);

describe('--model-config-name', () => {
  const identity = identityTestModel('ident', 'INT32', [4], 8);

  function withCustom(name: string, batch: number): string {
    const dir = folder([identity, identityTestModel('plain', 'INT32', [4], 8)]);
    mkdirSync(path.join(dir, 'ident', 'configs'));
    writeFileSync(path.join(dir, 'ident', 'configs', `${name}.pbtxt`), withBatch(identity, batch));
    return dir;
  }

  it('loads configs/NAME.pbtxt where a model has it, config.pbtxt where it does not', async () => {
    const { repo } = await open([withCustom('small', 2)], { configName: 'small' });
    expect(maxBatch(repo, 'ident')).toBe(2);
    expect(maxBatch(repo, 'plain')).toBe(8);
  });

  it('without the option, or with a name no model has, config.pbtxt', async () => {
    const dir = withCustom('small', 2);
    expect(maxBatch((await open([dir])).repo, 'ident')).toBe(8);
    expect(maxBatch((await open([dir], { configName: 'large' })).repo, 'ident')).toBe(8);
  });

  it('a broken custom config is reported under its own file name', async () => {
    const dir = withCustom('small', 2);
    writeFileSync(path.join(dir, 'ident', 'configs', 'small.pbtxt'), 'max_batch_size: "many"');
    const { repo } = await open([dir], { configName: 'small' });
    const row = repo.index().find((r) => r.name === 'ident')!;
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toContain('small.pbtxt');
    expect(repo.isReady('plain', '')).toBe(true);
  });

  it('poll mode reloads when the custom config changes', async () => {
    const dir = withCustom('small', 2);
    const { repo } = await open([dir], { configName: 'small', mode: 'poll' });
    expect(maxBatch(repo, 'ident')).toBe(2);
    writeFileSync(path.join(dir, 'ident', 'configs', 'small.pbtxt'), `${withBatch(identity, 3)}\n`);
    await repo.poll();
    expect(maxBatch(repo, 'ident')).toBe(3);
  });

  it('explicit loads read it too', async () => {
    const { repo } = await open([withCustom('small', 2)], { configName: 'small', mode: 'explicit' });
    expect(repo.isReady('ident', '')).toBe(false);
    await repo.load('ident');
    expect(maxBatch(repo, 'ident')).toBe(2);
  });
});

/** The test backend, with instance starts that take a while and are counted while they run. */
function countingBackend(): { backend: Backend<unknown>; max: () => number } {
  let active = 0;
  let max = 0;
  const backend = {
    ...testBackend,
    async startInstance(...args: Parameters<typeof testBackend.startInstance>) {
      active++;
      max = Math.max(max, active);
      try {
        await new Promise((r) => setTimeout(r, 40));
        return await testBackend.startInstance(...args);
      } finally {
        active--;
      }
    },
  } as Backend<unknown>;
  return { backend, max: () => max };
}

describe('--model-load-thread-count', () => {
  const models = range(6, (i) => identityTestModel(`m${i}`, 'INT32', [4], 8));

  it.each([1, 2, 4])('%i: at most that many models load at once, all of them load', async (n) => {
    const { backend, max } = countingBackend();
    const { repo } = await open([folder(models)], { loadThreads: n, backend });
    expect(max()).toBe(n);
    for (const m of models) expect(repo.isReady(m.name, '')).toBe(true);
  });

  it('repository API loads share the limit', async () => {
    const { backend, max } = countingBackend();
    const { repo } = await open([folder(models)], { loadThreads: 2, backend, mode: 'explicit' });
    await Promise.all(models.map((m) => repo.load(m.name)));
    expect(max()).toBe(2);
    for (const m of models) expect(repo.isReady(m.name, '')).toBe(true);
  });

  it('an ensemble waiting for its composing models holds no slot', async () => {
    const { backend } = countingBackend();
    const ens: TestModel = { name: 'double_simple', config: ensembleConfig(doubleSimple()), model: SIMPLE_TEST_MODEL.model };
    const { repo } = await open([folder([ens, SIMPLE_TEST_MODEL])], { loadThreads: 1, backend });
    expect(repo.isReady('double_simple', '')).toBe(true);
  });
});

describe('--model-load-retry-count', () => {
  /** The test backend, failing the first `failures` instance starts of model `flaky`. */
  function flakyBackend(failures: number): Backend<unknown> {
    let left = failures;
    return {
      ...testBackend,
      async startInstance(...args: Parameters<typeof testBackend.startInstance>) {
        if (args[0].name.startsWith('flaky') && left-- > 0) throw ServalError.internal('instance failed to start');
        return testBackend.startInstance(...args);
      },
    } as Backend<unknown>;
  }
  const models = [identityTestModel('flaky', 'INT32', [4], 8), identityTestModel('steady', 'INT32', [4], 8)];

  it('a load failing fewer times than the retries succeeds, and each retry is logged', async () => {
    const { repo, lines } = await open([folder(models)], { loadRetries: 2, backend: flakyBackend(2) });
    expect(repo.isReady('flaky', '')).toBe(true);
    expect(repo.isReady('steady', '')).toBe(true);
    const retries = lines.filter((l) => l.includes("failed to load 'flaky' version 1, retrying"));
    expect(retries).toHaveLength(2);
    expect(retries[1]).toContain('retry 2 of 2');
  });

  it('without retries (the default) the same failure stands', async () => {
    const { repo } = await open([folder(models)], { backend: flakyBackend(1) });
    expect(repo.isReady('flaky', '')).toBe(false);
    expect(repo.index().find((r) => r.name === 'flaky')!.reason).toContain('instance failed to start');
  });

  it("a version failing to load: 2.51's text, with the instance's status name", async () => {
    const { repo } = await open([folder(models)], { mode: 'explicit', backend: flakyBackend(5) });
    const e = await rejected(repo.load('flaky'));
    expect([e.code, e.message]).toEqual([
      'INVALID_ARG',
      "load failed for model 'flaky': version 1 is at UNAVAILABLE state: Internal: instance failed to start;\n",
    ]);
  });

  it('more failures than retries: the last failure is the reason', async () => {
    const { repo } = await open([folder(models)], { loadRetries: 1, backend: flakyBackend(5) });
    expect(repo.isReady('flaky', '')).toBe(false);
    expect(repo.index().find((r) => r.name === 'flaky')!.reason).toContain('instance failed to start');
  });
});

describe("load requests naming no model folder: Triton's text", () => {
  it.each(['', ' ', '   ', '..', '.', '../etc', 'a/b', '/etc', 'a\\b', '.hidden', 'no_such_model'])('%j', async (name) => {
    const dir = folder([SIMPLE_TEST_MODEL]);
    // A model folder outside the repository a traversal could reach.
    writeModel(path.dirname(dir), { ...SIMPLE_TEST_MODEL, name: path.basename(dir) });
    const { repo } = await open([dir], { mode: 'explicit' });
    const e = await rejected(repo.load(name));
    expect([e.code, e.message]).toEqual(['INTERNAL', `failed to load '${name}', failed to poll from model repository`]);
    const g = thrown(() => repo.get(name, ''));
    expect([g.code, g.message]).toEqual(['NOT_FOUND', `Request for unknown model: '${name}' is not found`]);
    expect(repo.index()).toEqual([]);
  });
});

function request(model: string, a: number[], b: number[]): InferRequest {
  return {
    modelName: model,
    modelVersion: '',
    id: '',
    parameters: {},
    inputs: [
      { name: 'IN0', datatype: 'INT32', shape: [1, 16], data: i32(a) },
      { name: 'IN1', datatype: 'INT32', shape: [1, 16], data: i32(b) },
    ],
  };
}

describe('--model-namespacing', () => {
  const ens: TestModel = { name: 'double_simple', config: ensembleConfig(doubleSimple()), model: SIMPLE_TEST_MODEL.model };
  // The same name in both repositories: an adder in A, an identity-like model (OUTPUT0 = INPUT0) in B.
  const simpleB: TestModel = { ...SIMPLE_TEST_MODEL, model: { ...SIMPLE_TEST_MODEL.model, op: 'identity' } };
  const onlyB = (): TestModel => ({
    ...SIMPLE_TEST_MODEL,
    name: 'only_b',
    config: SIMPLE_TEST_MODEL.config.replace('"simple"', '"only_b"'),
  });

  async function two(o: Opts = {}) {
    const a = folder([SIMPLE_TEST_MODEL, ens]);
    const b = folder([simpleB, onlyB()]);
    return { a, b, ...(await open([a, b], { namespacing: true, ...o })) };
  }

  it("serves the same name from each repository; a request for it is ambiguous, with Triton's text", async () => {
    const { repo } = await two();
    expect(
      repo
        .index()
        .filter((r) => r.name === 'simple')
        .map((r) => r.state),
    ).toEqual(['READY', 'READY']);
    const e = thrown(() => repo.get('simple', ''));
    expect([e.code, e.message]).toEqual([
      'INVALID_ARG',
      "There are 2 identifiers of model 'simple' in global map, model namespace must be provided to resolve ambiguity.",
    ]);
    expect(repo.isReady('simple', '')).toBe(false);
    expect(repo.isReady('only_b', '')).toBe(true);
    expect((await repo.repositoryIndex(false)).filter((r) => r.name === 'simple')).toHaveLength(2);
  });

  it("an ensemble's steps resolve to its own repository's model first", async () => {
    const { repo } = await two();
    expect(repo.isReady('double_simple', '')).toBe(true);
    const a = range(16, (i) => i);
    const b = range(16, () => 1);
    const res = await repo.get('double_simple', '').infer(request('double_simple', a, b), process.hrtime.bigint());
    // A's simple adds; B's would pass IN0 through. Two steps of A's: (a + b) + (a - b) = 2a.
    const out = res.outputs.find((o) => o.name === 'OUT0') ?? res.outputs[0]!;
    expect(fromI32(out.data)).toEqual(a.map((x) => 2 * x));
  });

  it('an ensemble reaches a model only another repository holds', async () => {
    const a = folder([SIMPLE_TEST_MODEL]);
    const b = folder([{ ...ens, config: ensembleConfig(doubleSimple('double_a', 'simple')), name: 'double_a' }]);
    const { repo } = await open([a, b], { namespacing: true });
    expect(repo.isReady('double_a', '')).toBe(true);
  });

  it("load and unload log lines name the model '<repository>::<name>', as 2.51's", async () => {
    const { repo, lines, a, b } = await two({ mode: 'explicit', info: true });
    await repo.load('simple');
    await repo.unload('simple');
    for (const root of [a, b]) {
      expect(lines.some((l) => l.includes(`successfully loaded '${root}::simple'`))).toBe(true);
      expect(lines.some((l) => l.includes(`successfully unloaded '${root}::simple' version 1`))).toBe(true);
    }
  });

  it('explicit load and unload by name act on every repository holding it', async () => {
    const { repo } = await two({ mode: 'explicit' });
    await repo.load('simple');
    expect(repo.index().filter((r) => r.name === 'simple' && r.state === 'READY')).toHaveLength(2);
    await repo.unload('simple');
    expect(repo.index().filter((r) => r.name === 'simple' && r.state === 'READY')).toHaveLength(0);
    const e = await rejected(repo.load('nowhere'));
    expect(e.message).toBe("failed to load 'nowhere', failed to poll from model repository");
  });

  it('explicit start-up models load in the repositories that have them, once', async () => {
    const { repo } = await two({ mode: 'explicit', startupModels: ['only_b', 'nowhere'] });
    expect(repo.isReady('only_b', '')).toBe(true);
    expect(repo.index().filter((r) => r.name === 'only_b')).toHaveLength(1);
    expect(repo.index().filter((r) => r.name === 'nowhere')).toHaveLength(1);
  });

  it('poll mode: a folder of the same name appearing in another repository makes the name ambiguous', async () => {
    const a = folder([SIMPLE_TEST_MODEL]);
    const b = folder([onlyB()]);
    const { repo } = await open([a, b], { namespacing: true, mode: 'poll' });
    expect(repo.isReady('simple', '')).toBe(true);
    writeModel(b, simpleB);
    await repo.poll();
    expect(thrown(() => repo.get('simple', '')).message).toContain("There are 2 identifiers of model 'simple'");
    rmSync(path.join(b, 'simple'), { recursive: true });
    await repo.poll();
    expect(repo.isReady('simple', '')).toBe(true);
  });

  it('without namespacing the same name in two repositories does not load (as Triton)', async () => {
    const a = folder([SIMPLE_TEST_MODEL]);
    const b = folder([simpleB, onlyB()]);
    const { repo, lines } = await open([a, b], { mode: 'explicit' });
    const e = await rejected(repo.load('simple'));
    expect([e.code, e.message]).toEqual(['INTERNAL', "failed to load 'simple', failed to poll from model repository"]);
    expect(lines.some((l) => l.includes("failed to poll model 'simple': not unique across all model repositories"))).toBe(true);
    await repo.load('only_b');
    expect(repo.isReady('only_b', '')).toBe(true);
  });
});
