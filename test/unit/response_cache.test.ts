// The response cache: keys, LRU by bytes, the flags, the config field, and the core path (a hit
// answers without running the model; statistics and metrics count hits and misses as Triton does).
import { afterEach, describe, expect, it } from 'vitest';
import { parseCacheSettings } from '../../src/cache/cache_config.js';
import { type KeyTensor, ResponseCache, requestKey } from '../../src/cache/response_cache.js';
import { buildRegistry } from '../../src/frontends/metrics/metrics.js';
import type { InferOutputTensor, InferRequest } from '../../src/kernel/types.js';
import { parseArgs, UsageError } from '../../src/options.js';
import { doubleSimple, ensembleConfig } from '../helpers/ensemble.js';
import { resolveForTest } from '../helpers/resolve.js';
import { executions } from '../helpers/test_backend.js';
import { identityTestModel, SIMPLE_TEST_MODEL, startTestCore, type TestCore } from '../helpers/test_core.js';

const i32 = (...v: number[]): Uint8Array => new Uint8Array(Int32Array.from(v).buffer);
const tensor = (name: string, data: Uint8Array, shape = [1, data.byteLength / 4], datatype = 'INT32'): KeyTensor => ({
  name,
  datatype,
  shape,
  data,
});
const out = (name: string, bytes: number, fill = 1): InferOutputTensor => ({
  name,
  datatype: 'INT32',
  shape: [1, bytes / 4],
  data: new Uint8Array(bytes).fill(fill),
});

describe('requestKey', () => {
  const a = tensor('A', i32(1, 2, 3, 4));
  const b = tensor('B', i32(5, 6, 7, 8));
  const base = requestKey('m', 1, [a, b], [{ name: 'OUT', classification: 0 }]);

  it('is the same for the same request, whatever order the inputs come in', () => {
    expect(requestKey('m', 1, [b, a], [{ name: 'OUT', classification: 0 }])).toBe(base);
    expect(requestKey('m', 1, [tensor('A', i32(1, 2, 3, 4)), b], [{ name: 'OUT', classification: 0 }])).toBe(base);
  });

  it('differs when the model, version, an input name, datatype, shape, byte or the requested outputs differ', () => {
    const outs = [{ name: 'OUT', classification: 0 }];
    const keys = [
      requestKey('m2', 1, [a, b], outs),
      requestKey('m', 2, [a, b], outs),
      requestKey('m', 1, [tensor('C', a.data), b], outs),
      requestKey('m', 1, [tensor('A', a.data, [1, 4], 'FP32'), b], outs),
      requestKey('m', 1, [tensor('A', a.data, [2, 2]), b], outs),
      requestKey('m', 1, [tensor('A', i32(1, 2, 3, 5)), b], outs),
      requestKey('m', 1, [a, b], [{ name: 'OUT2', classification: 0 }]),
      requestKey('m', 1, [a, b], [{ name: 'OUT', classification: 2 }]),
      requestKey('m', 1, [a], outs),
    ];
    expect(new Set([base, ...keys]).size).toBe(keys.length + 1);
  });

  it('does not confuse where one input ends and the next begins', () => {
    const x = requestKey('m', 1, [tensor('A', i32(1, 2)), tensor('B', i32(3, 4, 5, 6))], []);
    const y = requestKey('m', 1, [tensor('A', i32(1, 2, 3, 4)), tensor('B', i32(5, 6))], []);
    expect(x).not.toBe(y);
  });
});

describe('ResponseCache', () => {
  it('returns a copy of what was stored: later changes to the response do not reach it', () => {
    const c = new ResponseCache(1 << 20);
    const o = out('OUT', 16, 7);
    expect(c.insert('k', [o])).toBe(true);
    o.data.fill(0);
    const hit = c.lookup('k');
    expect(hit).toHaveLength(1);
    expect(hit![0]).toMatchObject({ name: 'OUT', datatype: 'INT32', shape: [1, 4] });
    expect([...hit![0]!.data]).toEqual(new Array(16).fill(7));
    expect(c.lookup('other')).toBeUndefined();
    expect(c.stats()).toMatchObject({ lookups: 2, hits: 1, misses: 1, entries: 1 });
  });

  it('evicts the least recently used entries, by bytes, to make room', () => {
    const c = new ResponseCache(3 * (1000 + 400));
    for (const k of ['a', 'b', 'c']) expect(c.insert(k, [out('OUT', 1000)])).toBe(true);
    expect(c.size).toBe(3);
    c.lookup('a'); // a becomes the most recently used; b is now the oldest
    expect(c.insert('d', [out('OUT', 1000)])).toBe(true);
    expect(c.lookup('b')).toBeUndefined();
    expect(c.lookup('a')).toBeDefined();
    expect(c.lookup('c')).toBeDefined();
    expect(c.lookup('d')).toBeDefined();
    expect(c.bytes).toBeLessThanOrEqual(c.capacity);
    // A large entry pushes out as many as it needs.
    expect(c.insert('big', [out('OUT', 2400)])).toBe(true);
    expect(c.size).toBe(2);
    expect(c.bytes).toBeLessThanOrEqual(c.capacity);
    expect(c.stats().evictions).toBe(3);
  });

  it('refuses a response larger than the whole cache and keeps what it has', () => {
    const c = new ResponseCache(4096);
    expect(c.insert('small', [out('OUT', 64)])).toBe(true);
    expect(c.insert('huge', [out('OUT', 8192)])).toBe(false);
    expect(c.lookup('small')).toBeDefined();
    expect(c.lookup('huge')).toBeUndefined();
    expect(c.stats().rejected).toBe(1);
  });
});

describe('cache flags', () => {
  it('reads --cache-config local,size=N and the deprecated --response-cache-byte-size', () => {
    expect(parseCacheSettings(['local,size=1048576'], undefined)).toEqual({ name: 'local', size: 1048576 });
    expect(parseCacheSettings([], 8192)).toEqual({ name: 'local', size: 8192 });
    expect(parseCacheSettings([], undefined)).toBeUndefined();
    expect(parseCacheSettings(['local,size=0'], undefined)).toBeUndefined();
    expect(parseArgs(['--cache-config', 'local,size=4096'])).toMatchObject({ cacheConfig: ['local,size=4096'] });
    expect(parseArgs(['--response-cache-byte-size=4096'])).toMatchObject({ responseCacheByteSize: 4096 });
  });

  it('refuses what tritonserver refuses, with its words', () => {
    expect(() => parseArgs(['--response-cache-byte-size', '1', '--cache-config', 'local,size=2'])).toThrow(UsageError);
    expect(() => parseCacheSettings(['local,size=2'], 1)).toThrow(/Incompatible flags --response-cache-byte-size and --cache-config/);
    expect(() => parseCacheSettings(['size=2'], undefined)).toThrow(/No cache specified/);
    expect(() => parseCacheSettings(['local,size'], undefined)).toThrow(/<cache name>,<setting>=<value>/);
    expect(() => parseCacheSettings(['local,size=1', 'redis,host=x'], undefined)).toThrow(/multiple cache configurations/);
    expect(() => parseCacheSettings(['redis,host=x'], undefined)).toThrow(/'redis' is not available/);
    expect(() => parseCacheSettings(['local,size=lots'], undefined)).toThrow(/size must be/);
    expect(() => parseCacheSettings(['local,colour=red'], undefined)).toThrow(/unknown setting 'colour'/);
  });
});

describe('response_cache in the model config', () => {
  const io = {
    max_batch_size: 8,
    input: [{ name: 'IN', data_type: 'TYPE_INT32' as const, dims: [4] }],
    output: [{ name: 'OUT', data_type: 'TYPE_INT32' as const, dims: [4] }],
  };
  it('is off unless enabled', () => {
    expect(resolveForTest({ name: 'm', ...io }).responseCache).toBe(false);
    expect(resolveForTest({ name: 'm', ...io, response_cache: { enable: true } }).responseCache).toBe(true);
  });
  it("is refused for a sequence model, with Triton's text", () => {
    expect(() =>
      resolveForTest({
        name: 'm',
        ...io,
        response_cache: { enable: true },
        sequence_batching: { max_sequence_idle_microseconds: 1000000 },
      }),
    ).toThrow('Response Cache does not currently support model m with sequence batching scheduler. Please disable the response cache.');
  });
  it("is refused for a decoupled model, with Triton's text", () => {
    expect(() =>
      resolveForTest({ name: 'm', ...io, response_cache: { enable: true }, model_transaction_policy: { decoupled: true } }),
    ).toThrow("Response Cache does not currently support model m with 'decoupled' transaction policy. Please disable the response cache.");
  });
});

describe('the core with a response cache', () => {
  let tc: TestCore | undefined;
  afterEach(async () => {
    await tc?.close();
    tc = undefined;
  });

  const cachedSimple = { ...SIMPLE_TEST_MODEL, config: `${SIMPLE_TEST_MODEL.config}\nresponse_cache { enable: true }` };
  const req = (a: number, id = ''): InferRequest => ({
    modelName: 'simple',
    modelVersion: '',
    id,
    parameters: {},
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: i32(...new Array(16).fill(a)) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: i32(...new Array(16).fill(1)) },
    ],
  });
  const stats = () => tc!.core.statistics('simple', '1')[0]!;

  it('answers a repeated request from the cache without running the model, and counts it as Triton does', async () => {
    tc = await startTestCore([cachedSimple], { responseCache: new ResponseCache(1 << 20) });
    const ran = executions.length;
    const first = await tc.core.infer(req(5, 'one'));
    expect(executions.length).toBe(ran + 1);
    const second = await tc.core.infer(req(5, 'two'));
    expect(executions.length).toBe(ran + 1); // not executed
    expect(second.id).toBe('two');
    expect(second.outputs.map((o) => [o.name, o.datatype, o.shape, [...o.data]])).toEqual(
      first.outputs.map((o) => [o.name, o.datatype, o.shape, [...o.data]]),
    );
    expect([...new Int32Array(new Uint8Array(second.outputs[0]!.data).buffer)]).toEqual(new Array(16).fill(6));
    // A different input misses and runs.
    await tc.core.infer(req(6));
    expect(executions.length).toBe(ran + 2);

    const s = stats();
    expect(s.inference_stats.cache_hit.count).toBe(1);
    expect(s.inference_stats.cache_miss.count).toBe(2);
    expect(s.inference_stats.cache_hit.ns).toBeGreaterThan(0);
    expect(s.inference_stats.cache_miss.ns).toBeGreaterThan(0);
    expect(s.inference_stats.success.count).toBe(3);
    // Triton: hits are not inferences or executions; queue and compute counts follow success.
    expect(s.inference_count).toBe(2);
    expect(s.execution_count).toBe(2);
    expect(s.inference_stats.queue.count).toBe(3);
    expect(s.inference_stats.compute_infer.count).toBe(3);

    const text = await buildRegistry(tc.core).metrics();
    expect(text).toMatch(/^nv_cache_num_hits_per_model\{model="simple",version="1"\} 1$/m);
    expect(text).toMatch(/^nv_cache_num_misses_per_model\{model="simple",version="1"\} 2$/m);
    expect(text).toMatch(/^nv_cache_hit_duration_per_model\{model="simple",version="1"\} \d+$/m);
    expect(text).toMatch(/^nv_cache_miss_duration_per_model\{model="simple",version="1"\} \d+$/m);
    expect(text).toMatch(/^nv_inference_count\{model="simple",version="1"\} 2$/m);
  });

  it('keys on the requested outputs and classification: a different ask is a miss', async () => {
    tc = await startTestCore([cachedSimple], { responseCache: new ResponseCache(1 << 20) });
    const ran = executions.length;
    await tc.core.infer({ ...req(3), outputs: [{ name: 'OUTPUT0' }] });
    const one = await tc.core.infer({ ...req(3), outputs: [{ name: 'OUTPUT1' }] });
    expect(one.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
    await tc.core.infer({ ...req(3), outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }] });
    expect(executions.length).toBe(ran + 3);
    const again = await tc.core.infer({ ...req(3), outputs: [{ name: 'OUTPUT1' }] });
    expect(again.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
    expect(executions.length).toBe(ran + 3);
    expect(stats().inference_stats.cache_hit.count).toBe(1);
  });

  it('caches top-level requests of an ensemble whose config enables it: no step runs on a hit', async () => {
    const spec = { ...doubleSimple('double_cached'), extra: 'response_cache { enable: true }' };
    tc = await startTestCore([SIMPLE_TEST_MODEL, { name: spec.name, config: ensembleConfig(spec), model: SIMPLE_TEST_MODEL.model }], {
      responseCache: new ResponseCache(1 << 20),
    });
    const ens = (a: number): InferRequest => ({
      modelName: 'double_cached',
      modelVersion: '',
      id: '',
      parameters: {},
      inputs: [
        { name: 'IN0', datatype: 'INT32', shape: [1, 16], data: i32(...new Array(16).fill(a)) },
        { name: 'IN1', datatype: 'INT32', shape: [1, 16], data: i32(...new Array(16).fill(2)) },
      ],
    });
    const ran = executions.length;
    const first = await tc.core.infer(ens(4));
    expect(executions.length).toBe(ran + 2); // two steps
    const second = await tc.core.infer(ens(4));
    expect(executions.length).toBe(ran + 2);
    expect(second.outputs.map((o) => [...o.data])).toEqual(first.outputs.map((o) => [...o.data]));
    expect([...new Int32Array(new Uint8Array(second.outputs[0]!.data).buffer)]).toEqual(new Array(16).fill(8));
    const s = tc.core.statistics('double_cached', '1')[0]!;
    expect(s.inference_stats.cache_hit.count).toBe(1);
    expect(s.inference_stats.cache_miss.count).toBe(1);
    expect(s.inference_stats.success.count).toBe(2);
    // The composing model's own config does not enable the cache: it ran twice and counts no cache use.
    const inner = tc.core.statistics('simple', '1')[0]!;
    expect(inner.execution_count).toBe(2);
    expect(inner.inference_stats.cache_miss.count).toBe(0);
  });

  it('a failed request is not stored', async () => {
    tc = await startTestCore([cachedSimple], { responseCache: new ResponseCache(1 << 20) });
    const bad = { ...req(1), inputs: [req(1).inputs[0]!] };
    await expect(tc.core.infer(bad)).rejects.toThrow();
    await expect(tc.core.infer(bad)).rejects.toThrow();
    expect(stats().inference_stats.cache_hit.count).toBe(0);
  });

  it('is not used without a server cache, nor for models that do not enable it; their metrics have no cache series', async () => {
    tc = await startTestCore([cachedSimple]);
    const ran = executions.length;
    await tc.core.infer(req(2));
    await tc.core.infer(req(2));
    expect(executions.length).toBe(ran + 2);
    expect(stats().inference_stats.cache_hit.count).toBe(0);
    expect(stats().inference_stats.cache_miss.count).toBe(0);
    expect(await buildRegistry(tc.core).metrics()).not.toMatch(/^nv_cache_num_hits_per_model\{/m);
    await tc.close();

    tc = await startTestCore([identityTestModel('plain', 'INT32', [4], 8)], { responseCache: new ResponseCache(1 << 20) });
    const before = executions.length;
    const r: InferRequest = {
      modelName: 'plain',
      modelVersion: '',
      id: '',
      parameters: {},
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 4], data: i32(1, 2, 3, 4) }],
    };
    await tc.core.infer(r);
    await tc.core.infer(r);
    expect(executions.length).toBe(before + 2);
    expect(tc.core.statistics('plain', '1')[0]!.inference_stats.cache_miss.count).toBe(0);
  });
});
