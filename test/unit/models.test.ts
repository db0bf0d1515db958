/**
 * Runs every model of the bundled example repository (model_repository/, made
 * by tools/gen_models.ts) in onnxruntime-node and checks real results, and
 * checks that regenerating gives byte-identical files.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { fromFloat16Bits, modelProtoType, Prng, toFloat16Bits } from '../../tools/onnx/builder.js';
import { FOOD11_LABELS, generateModels, IDENTITY_TYPES, MODELS } from '../../tools/onnx/models.js';

const REPO = resolve(import.meta.dirname, '..', '..', 'model_repository');
/** Model folders written by hand, not by tools/gen_models.ts: regenerating leaves them alone. */
const HAND_WRITTEN = new Set([
  'food_classifier',
  'food_pipeline',
  'preprocess',
  'postprocess',
  'repeat_int32',
  'square_int32',
  'text_generator',
]);
const generated = (f: string): boolean => !HAND_WRITTEN.has(f.split(/[\\/]/)[0]!);
const rng = new Prng(12345);

const sessions: ort.InferenceSession[] = [];
async function load(name: string): Promise<ort.InferenceSession> {
  const s = await ort.InferenceSession.create(join(REPO, name, '1', 'model.onnx'), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
  });
  sessions.push(s);
  return s;
}
afterAll(async () => {
  for (const s of sessions) await s.release();
});

function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

describe('model_repository layout', () => {
  it('has config.pbtxt and 1/model.onnx for every model, and nothing else unexpected', () => {
    const expected = MODELS.flatMap((m) => [join(m.name, 'config.pbtxt'), join(m.name, '1', 'model.onnx')]);
    expected.push(join('image_classifier', 'labels.txt'));
    // food_pipeline (an ensemble: an empty version folder), its two Python steps and food_classifier, written by hand.
    expected.push(join('food_pipeline', 'config.pbtxt'), join('food_pipeline', '1', '.gitkeep'));
    // The decoupled Python examples (repeat_int32, square_int32, text_generator), written by hand too.
    for (const m of ['food_classifier', 'preprocess', 'postprocess', 'repeat_int32', 'square_int32', 'text_generator']) {
      expected.push(join(m, 'config.pbtxt'), join(m, '1', 'model.py'));
    }
    expected.push(join('postprocess', 'labels.txt'), join('food_classifier', 'labels.txt'));
    expect(listFiles(REPO)).toEqual(expected.sort());
  });

  it('stays small (a few MB)', () => {
    const total = listFiles(REPO).reduce((n, f) => n + statSync(join(REPO, f)).size, 0);
    expect(total).toBeLessThan(10 * 1024 * 1024);
    expect(statSync(join(REPO, 'image_classifier', '1', 'model.onnx')).size).toBeLessThan(1024 * 1024);
  });

  it('writes ONNX IR 8 / opset 17 models whose configs name the model', () => {
    for (const m of MODELS) {
      const model = modelProtoType().decode(readFileSync(join(REPO, m.name, '1', 'model.onnx'))) as unknown as {
        irVersion: { toNumber(): number } | number;
        opsetImport: { domain: string; version: { toNumber(): number } | number }[];
      };
      expect(Number(model.irVersion)).toBe(8);
      expect(model.opsetImport.map((o) => [o.domain, Number(o.version)])).toEqual([['', 17]]);
      const config = readFileSync(join(REPO, m.name, 'config.pbtxt'), 'utf8');
      expect(config).toContain(`name: "${m.name}"`);
      expect(config).toMatch(/platform: "onnxruntime_onnx"|backend: "onnxruntime"/);
    }
  });
});

describe('simple', () => {
  it('computes INPUT0+INPUT1 and INPUT0-INPUT1 on random int32 batches', async () => {
    const s = await load('simple');
    for (const batch of [1, 3, 8]) {
      const n = batch * 16;
      const a = Int32Array.from({ length: n }, () => rng.int(-1e9, 1e9));
      const b = Int32Array.from({ length: n }, () => rng.int(-1e9, 1e9));
      const r = await s.run({
        INPUT0: new ort.Tensor('int32', a, [batch, 16]),
        INPUT1: new ort.Tensor('int32', b, [batch, 16]),
      });
      expect(r.OUTPUT0!.dims).toEqual([batch, 16]);
      expect(r.OUTPUT1!.dims).toEqual([batch, 16]);
      expect(Array.from(r.OUTPUT0!.data as Int32Array)).toEqual(Array.from(a, (x, i) => x + b[i]!));
      expect(Array.from(r.OUTPUT1!.data as Int32Array)).toEqual(Array.from(a, (x, i) => x - b[i]!));
    }
  });
});

describe('simple_string', () => {
  it('adds and subtracts decimal-integer strings', async () => {
    const s = await load('simple_string');
    const batch = 2;
    const a = Array.from({ length: batch * 16 }, () => rng.int(-1e6, 1e6));
    const b = Array.from({ length: batch * 16 }, () => rng.int(-1e6, 1e6));
    a[0] = 0;
    b[0] = 0;
    const r = await s.run({
      INPUT0: new ort.Tensor('string', a.map(String), [batch, 16]),
      INPUT1: new ort.Tensor('string', b.map(String), [batch, 16]),
    });
    expect(r.OUTPUT0!.type).toBe('string');
    expect(r.OUTPUT0!.dims).toEqual([batch, 16]);
    expect(r.OUTPUT0!.data).toEqual(a.map((x, i) => String(x + b[i]!)));
    expect(r.OUTPUT1!.data).toEqual(a.map((x, i) => String(x - b[i]!)));
  });
});

describe('identity models', () => {
  const f16 = [0x0000, 0x8000, 0x3c00, 0xbc00, 0x7bff, 0x0001, 0x03ff, 0x7c00, 0xfc00, 0x7e01, 0x3555, toFloat16Bits(-2.5)];
  const f32 = new Float32Array(12);
  new Uint32Array(f32.buffer).set([0x80000000, 0x00000001, 0x7f7fffff, 0x7fc00123, 0xff800000]);
  // biome-ignore lint/suspicious/noApproximativeNumericConstant: an arbitrary FP32 value, not π
  f32.set([3.14159, -1e-30, 65504, 1 / 3, 0.1, -7, 42], 5);
  const f64 = Float64Array.from([0, -0, Math.PI, -1e300, 5e-324, Number.MAX_VALUE, NaN, Infinity, -Infinity, 1 / 3, 2 ** 60, -1]);

  const inputs: Record<string, { type: ort.Tensor.Type; data: ort.Tensor.DataType; dims: number[] }> = {
    bool: { type: 'bool', data: Uint8Array.from([1, 0, 0, 1, 1, 1]), dims: [2, 3] },
    uint8: { type: 'uint8', data: Uint8Array.from([0, 1, 127, 128, 254, 255]), dims: [3, 2] },
    uint16: { type: 'uint16', data: Uint16Array.from([0, 1, 0x7fff, 0x8000, 0xfffe, 0xffff]), dims: [2, 3] },
    uint32: { type: 'uint32', data: Uint32Array.from([0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1]), dims: [2, 3] },
    uint64: {
      type: 'uint64',
      data: BigUint64Array.from([0n, 1n, 2n ** 53n + 1n, 2n ** 63n, 2n ** 64n - 1n, 12345678901234567891n]),
      dims: [2, 3],
    },
    int8: { type: 'int8', data: Int8Array.from([-128, -1, 0, 1, 126, 127]), dims: [1, 6] },
    int16: { type: 'int16', data: Int16Array.from([-32768, -1, 0, 1, 32766, 32767]), dims: [2, 3] },
    int32: { type: 'int32', data: Int32Array.from([-(2 ** 31), -1, 0, 1, 2 ** 31 - 2, 2 ** 31 - 1]), dims: [2, 3] },
    int64: {
      type: 'int64',
      data: BigInt64Array.from([-(2n ** 63n), -(2n ** 53n) - 3n, -1n, 0n, 2n ** 53n + 1n, 2n ** 63n - 1n]),
      dims: [2, 3],
    },
    fp16: { type: 'float16', data: Uint16Array.from(f16), dims: [2, 6] },
    fp32: { type: 'float32', data: f32, dims: [3, 4] },
    fp64: { type: 'float64', data: f64, dims: [4, 3] },
    string: {
      type: 'string',
      data: ['', 'hello', 'naïve café', '日本語', '🦊 emoji 👩‍👩‍👧', 'tab\tnew\nline', 'a'.repeat(1000), '\u00e9\u0301'],
      dims: [2, 4],
    },
  };

  /** Byte view of typed-array data, to compare float bit patterns (NaN payloads, -0) exactly. */
  const bytes = (d: ArrayBufferView): number[] => Array.from(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));

  for (const t of IDENTITY_TYPES) {
    it(`identity_${t.suffix} returns its input exactly`, async () => {
      const input = inputs[t.suffix]!;
      expect(input.type).toBe(t.elem);
      const s = await load(`identity_${t.suffix}`);
      const r = await s.run({ INPUT0: new ort.Tensor(input.type, input.data as never, input.dims) });
      const out = r.OUTPUT0!;
      expect(out.type).toBe(t.elem);
      expect(out.dims).toEqual(input.dims);
      if (t.elem === 'string') {
        expect(out.data).toEqual(input.data);
      } else {
        // (float16 may come back as Float16Array where the runtime has one.)
        if (t.elem !== 'float16') expect(out.data.constructor).toBe((input.data as ArrayBufferView).constructor);
        expect(bytes(out.data as ArrayBufferView)).toEqual(bytes(input.data as ArrayBufferView));
      }
      if (t.elem === 'uint64') expect((out.data as BigUint64Array)[2]).toBe(9007199254740993n);
      if (t.elem === 'float16') expect(fromFloat16Bits((out.data as Uint16Array)[11]!)).toBe(-2.5);
    });
  }
});

describe('image_classifier', () => {
  it('has the 11 Food-11 labels', () => {
    const labels = readFileSync(join(REPO, 'image_classifier', 'labels.txt'), 'utf8');
    expect(labels.split('\n')).toEqual([...FOOD11_LABELS, '']);
    expect(FOOD11_LABELS).toHaveLength(11);
    expect(readFileSync(join(REPO, 'image_classifier', 'config.pbtxt'), 'utf8')).toContain('label_filename: "labels.txt"');
  });

  it('outputs [N, 11] probabilities that sum to 1', async () => {
    const s = await load('image_classifier');
    const batch = 2;
    const x = Float32Array.from({ length: batch * 3 * 224 * 224 }, () => rng.next());
    const r = await s.run({ INPUT: new ort.Tensor('float32', x, [batch, 3, 224, 224]) });
    const out = r.OUTPUT!;
    expect(out.dims).toEqual([batch, 11]);
    const p = out.data as Float32Array;
    for (let i = 0; i < batch; i++) {
      const row = Array.from(p.subarray(i * 11, (i + 1) * 11));
      for (const v of row) {
        expect(v).toBeGreaterThan(0);
        expect(v).toBeLessThan(1);
      }
      expect(row.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
    }
  });
});

describe('ranker_mlp', () => {
  it('outputs [N, 1] scores strictly inside (0, 1)', async () => {
    const s = await load('ranker_mlp');
    for (const batch of [1, 5]) {
      const x = Float32Array.from({ length: batch * 512 }, () => rng.uniform(-1, 1));
      const r = await s.run({ INPUT: new ort.Tensor('float32', x, [batch, 512]) });
      expect(r.OUTPUT!.dims).toEqual([batch, 1]);
      for (const v of r.OUTPUT!.data as Float32Array) {
        expect(v).toBeGreaterThan(0.001);
        expect(v).toBeLessThan(0.999);
      }
    }
  });

  it('depends on its input', async () => {
    const s = await load('ranker_mlp');
    const x = Float32Array.from({ length: 2 * 512 }, () => rng.uniform(-1, 1));
    const r = await s.run({ INPUT: new ort.Tensor('float32', x, [2, 512]) });
    const [a, b] = r.OUTPUT!.data as Float32Array;
    expect(a).not.toBe(b);
  });
});

describe('generator', () => {
  it('converts float16 with round-to-nearest-even', () => {
    expect(toFloat16Bits(1)).toBe(0x3c00);
    expect(toFloat16Bits(65504)).toBe(0x7bff);
    expect(toFloat16Bits(65520)).toBe(0x7c00); // rounds up to inf
    expect(toFloat16Bits(2 ** -24)).toBe(0x0001);
    expect(toFloat16Bits(2 ** -25)).toBe(0x0000); // tie -> even (0)
    expect(toFloat16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie -> even
    expect(toFloat16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie -> even (up)
    expect(toFloat16Bits(-0)).toBe(0x8000);
    expect(Number.isNaN(fromFloat16Bits(toFloat16Bits(NaN)))).toBe(true);
    for (let h = 0; h < 0x7c00; h += 7) expect(toFloat16Bits(fromFloat16Bits(h))).toBe(h);
  });

  it('regenerates byte-identical files', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'serval-gen-models-'));
    try {
      generateModels(tmp);
      const files = listFiles(tmp);
      expect(files).toEqual(listFiles(REPO).filter(generated));
      for (const f of files) {
        const fresh = readFileSync(join(tmp, f));
        const committed = readFileSync(join(REPO, f));
        expect(fresh.equals(committed), `${f} differs from model_repository (run npm run gen-models)`).toBe(true);
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
