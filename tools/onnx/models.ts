/**
 * Definitions of Serval's bundled example models (ONNX graph + Triton config).
 * tools/gen_models.ts writes them into a Triton-style model repository.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataType, type ElemType, float, GraphBuilder, Prng, toFloat16Array } from './builder.js';
import { buildCachedMlp } from './cached_model.js';
import { buildRaggedSum } from './ragged_models.js';
import { buildRunningSum, buildSimpleDynaSequence, buildSimpleSequence } from './sequence_models.js';
import { renderConfig, type TritonDataType } from './triton_config.js';

/** Everything that goes into one model directory. */
export interface GeneratedModel {
  name: string;
  /** config.pbtxt text. */
  config: string;
  /** Bytes of 1/model.onnx. */
  onnx: Uint8Array;
  /** Other files in the model directory (e.g. labels.txt). */
  files?: Record<string, string>;
}

export interface ModelSpec {
  name: string;
  build: () => GeneratedModel;
}

const BATCH = 'batch';
const CPU1 = 1;

// ---------------------------------------------------------------------------
// simple / simple_string

export function buildSimple(): GeneratedModel {
  const g = new GraphBuilder('simple');
  g.input('INPUT0', 'int32', [BATCH, 16]);
  g.input('INPUT1', 'int32', [BATCH, 16]);
  g.op('Add', ['INPUT0', 'INPUT1'], {}, 'OUTPUT0');
  g.op('Sub', ['INPUT0', 'INPUT1'], {}, 'OUTPUT1');
  g.output('OUTPUT0', 'int32', [BATCH, 16]);
  g.output('OUTPUT1', 'int32', [BATCH, 16]);
  const io = (name: string) => ({ name, dataType: 'TYPE_INT32' as const, dims: [16] });
  return {
    name: 'simple',
    onnx: g.encode({ docString: 'OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (int32)' }),
    config: renderConfig({
      name: 'simple',
      platform: 'onnxruntime_onnx',
      maxBatchSize: 8,
      inputs: [io('INPUT0'), io('INPUT1')],
      outputs: [io('OUTPUT0'), io('OUTPUT1')],
      cpuInstances: CPU1,
    }),
  };
}

export function buildSimpleString(): GeneratedModel {
  const g = new GraphBuilder('simple_string');
  g.input('INPUT0', 'string', [BATCH, 16]);
  g.input('INPUT1', 'string', [BATCH, 16]);
  const a = g.op('Cast', ['INPUT0'], { to: DataType.INT32 });
  const b = g.op('Cast', ['INPUT1'], { to: DataType.INT32 });
  const sum = g.op('Add', [a, b]);
  const diff = g.op('Sub', [a, b]);
  g.op('Cast', [sum], { to: DataType.STRING }, 'OUTPUT0');
  g.op('Cast', [diff], { to: DataType.STRING }, 'OUTPUT1');
  g.output('OUTPUT0', 'string', [BATCH, 16]);
  g.output('OUTPUT1', 'string', [BATCH, 16]);
  const io = (name: string) => ({ name, dataType: 'TYPE_STRING' as const, dims: [16] });
  return {
    name: 'simple_string',
    onnx: g.encode({
      docString: 'Decimal-integer strings: OUTPUT0 = str(int(INPUT0) + int(INPUT1)), OUTPUT1 = str(int(INPUT0) - int(INPUT1))',
    }),
    config: renderConfig({
      name: 'simple_string',
      backend: 'onnxruntime',
      maxBatchSize: 8,
      inputs: [io('INPUT0'), io('INPUT1')],
      outputs: [io('OUTPUT0'), io('OUTPUT1')],
      cpuInstances: CPU1,
    }),
  };
}

// ---------------------------------------------------------------------------
// identity_<type>

export const IDENTITY_TYPES: ReadonlyArray<{ suffix: string; elem: ElemType; triton: TritonDataType }> = [
  { suffix: 'bool', elem: 'bool', triton: 'TYPE_BOOL' },
  { suffix: 'uint8', elem: 'uint8', triton: 'TYPE_UINT8' },
  { suffix: 'uint16', elem: 'uint16', triton: 'TYPE_UINT16' },
  { suffix: 'uint32', elem: 'uint32', triton: 'TYPE_UINT32' },
  { suffix: 'uint64', elem: 'uint64', triton: 'TYPE_UINT64' },
  { suffix: 'int8', elem: 'int8', triton: 'TYPE_INT8' },
  { suffix: 'int16', elem: 'int16', triton: 'TYPE_INT16' },
  { suffix: 'int32', elem: 'int32', triton: 'TYPE_INT32' },
  { suffix: 'int64', elem: 'int64', triton: 'TYPE_INT64' },
  { suffix: 'fp16', elem: 'float16', triton: 'TYPE_FP16' },
  { suffix: 'fp32', elem: 'float32', triton: 'TYPE_FP32' },
  { suffix: 'fp64', elem: 'float64', triton: 'TYPE_FP64' },
  { suffix: 'string', elem: 'string', triton: 'TYPE_STRING' },
];

export function buildIdentity(suffix: string, elem: ElemType, triton: TritonDataType): GeneratedModel {
  const name = `identity_${suffix}`;
  const g = new GraphBuilder(name);
  g.input('INPUT0', elem, [BATCH, 'n']);
  g.op('Identity', ['INPUT0'], {}, 'OUTPUT0');
  g.output('OUTPUT0', elem, [BATCH, 'n']);
  return {
    name,
    onnx: g.encode({ docString: `OUTPUT0 = INPUT0 (${elem})` }),
    config: renderConfig({
      name,
      backend: 'onnxruntime',
      maxBatchSize: 8,
      inputs: [{ name: 'INPUT0', dataType: triton, dims: [-1] }],
      outputs: [{ name: 'OUTPUT0', dataType: triton, dims: [-1] }],
      cpuInstances: CPU1,
    }),
  };
}

// ---------------------------------------------------------------------------
// image_classifier

export const FOOD11_LABELS = [
  'Bread',
  'Dairy product',
  'Dessert',
  'Egg',
  'Fried food',
  'Meat',
  'Noodles/Pasta',
  'Rice',
  'Seafood',
  'Soup',
  'Vegetable/Fruit',
] as const;

export interface ClassifierOptions {
  /** Output channels of the four Conv3x3+Relu+MaxPool stages. */
  channels?: readonly number[];
  seed?: number;
}

/**
 * Tuned so that one 3x224x224 image costs ~7 ms (~130-140 images/s at batch 1
 * with 2 intra-op threads on the 2-core dev machine); 16/32/64/128 measured
 * ~2.3 ms. Channel counts that are multiples of 8 run markedly faster in ORT's
 * NCHWc kernels than e.g. 36.
 */
export const IMAGE_CLASSIFIER_CHANNELS = [40, 64, 96, 128] as const;

/** ONNX graph of the image classifier (exported separately for benchmarking channel variants). */
export function imageClassifierGraph(opts: ClassifierOptions = {}): GraphBuilder {
  const channels = opts.channels ?? IMAGE_CLASSIFIER_CHANNELS;
  const rng = new Prng(opts.seed ?? 0x1ada_0011);
  const g = new GraphBuilder('image_classifier');
  let x = g.input('INPUT', 'float32', [BATCH, 3, 224, 224]);
  let cin = 3;
  channels.forEach((cout, s) => {
    const fanIn = cin * 9;
    const w = g.initializer(`stage${s}.conv.weight`, 'float32', [cout, cin, 3, 3], rng.heUniform(cout * cin * 9, fanIn));
    const b = g.initializer(`stage${s}.conv.bias`, 'float32', [cout], rng.uniformArray(cout, 0.01));
    x = g.op('Conv', [x, w, b], { kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [1, 1] });
    x = g.op('Relu', [x]);
    x = g.op('MaxPool', [x], { kernel_shape: [2, 2], strides: [2, 2] });
    cin = cout;
  });
  x = g.op('GlobalAveragePool', [x]);
  x = g.op('Flatten', [x], { axis: 1 });
  const n = FOOD11_LABELS.length;
  // Small logits keep the softmax well away from one-hot on random inputs.
  const fcW = g.initializer('fc.weight', 'float32', [n, cin], rng.uniformArray(n * cin, Math.sqrt(3 / cin)));
  const fcB = g.initializer('fc.bias', 'float32', [n], new Float32Array(n));
  x = g.op('Gemm', [x, fcW, fcB], { transB: 1, alpha: float(1), beta: float(1) });
  g.op('Softmax', [x], { axis: 1 }, 'OUTPUT');
  g.output('OUTPUT', 'float32', [BATCH, n]);
  return g;
}

export function buildImageClassifier(): GeneratedModel {
  const g = imageClassifierGraph();
  return {
    name: 'image_classifier',
    onnx: g.encode({
      docString:
        `Small CNN with random weights (4x Conv3x3+Relu+MaxPool, ${IMAGE_CLASSIFIER_CHANNELS.join('/')} channels, GAP, Gemm, Softmax). ` +
        'Input NCHW float32 3x224x224; output: probabilities over the 11 Food-11 classes in labels.txt.',
    }),
    config: renderConfig({
      name: 'image_classifier',
      platform: 'onnxruntime_onnx',
      maxBatchSize: 16,
      inputs: [{ name: 'INPUT', dataType: 'TYPE_FP32', dims: [3, 224, 224] }],
      outputs: [{ name: 'OUTPUT', dataType: 'TYPE_FP32', dims: [FOOD11_LABELS.length], labelFilename: 'labels.txt' }],
      dynamicBatching: true,
      cpuInstances: CPU1,
    }),
    files: { 'labels.txt': `${FOOD11_LABELS.join('\n')}\n` },
  };
}

// ---------------------------------------------------------------------------
// ranker_mlp

export const RANKER_INPUT = 512;
export const RANKER_HIDDEN = [1024, 1024, 1024, 1024] as const;

/**
 * MLP 512 -> 4x1024 (MatMul+Add+Relu) -> 1 -> Sigmoid.
 * With `fp16Weights` (the default) weight matrices are stored as float16
 * initializers followed by Cast(to=FLOAT); ONNX Runtime constant-folds those
 * Casts when the session is created, so inference runs in float32 while the
 * file is half the size. Biases are tiny and stay float32.
 */
export function rankerGraph(opts: { fp16Weights?: boolean; seed?: number } = {}): GraphBuilder {
  const fp16 = opts.fp16Weights ?? true;
  const rng = new Prng(opts.seed ?? 0x7a4c_e512);
  const g = new GraphBuilder('ranker_mlp');
  let x = g.input('INPUT', 'float32', [BATCH, RANKER_INPUT]);
  const widths = [RANKER_INPUT, ...RANKER_HIDDEN, 1];
  for (let l = 0; l + 1 < widths.length; l++) {
    const fin = widths[l]!;
    const fout = widths[l + 1]!;
    const last = l + 2 === widths.length;
    // He init for the ReLU layers; LeCun-uniform (variance 1/fanIn) for the logit layer.
    const w32 = last ? rng.uniformArray(fin * fout, Math.sqrt(3 / fin)) : rng.heUniform(fin * fout, fin);
    let w: string;
    if (fp16) {
      const w16 = g.initializer(`fc${l}.weight_fp16`, 'float16', [fin, fout], toFloat16Array(w32));
      w = g.op('Cast', [w16], { to: DataType.FLOAT }, `fc${l}.weight`);
    } else {
      w = g.initializer(`fc${l}.weight`, 'float32', [fin, fout], w32);
    }
    const b = g.initializer(`fc${l}.bias`, 'float32', [fout], rng.uniformArray(fout, 0.01));
    x = g.op('MatMul', [x, w]);
    x = g.op('Add', [x, b]);
    x = last ? g.op('Sigmoid', [x], {}, 'OUTPUT') : g.op('Relu', [x]);
  }
  g.output('OUTPUT', 'float32', [BATCH, 1]);
  return g;
}

export function buildRanker(): GeneratedModel {
  return {
    name: 'ranker_mlp',
    onnx: rankerGraph().encode({
      docString:
        'Ranking MLP with random weights: 512 -> 4x1024 ReLU -> 1 -> Sigmoid. ' +
        'Weights stored as float16 + Cast (folded to float32 by ONNX Runtime at load).',
    }),
    config: renderConfig({
      name: 'ranker_mlp',
      platform: 'onnxruntime_onnx',
      maxBatchSize: 64,
      inputs: [{ name: 'INPUT', dataType: 'TYPE_FP32', dims: [RANKER_INPUT] }],
      outputs: [{ name: 'OUTPUT', dataType: 'TYPE_FP32', dims: [1] }],
      dynamicBatching: true,
      cpuInstances: CPU1,
    }),
  };
}

// ---------------------------------------------------------------------------

export const MODELS: readonly ModelSpec[] = [
  { name: 'simple', build: buildSimple },
  { name: 'simple_string', build: buildSimpleString },
  ...IDENTITY_TYPES.map((t) => ({ name: `identity_${t.suffix}`, build: () => buildIdentity(t.suffix, t.elem, t.triton) })),
  { name: 'image_classifier', build: buildImageClassifier },
  { name: 'ranker_mlp', build: buildRanker },
  { name: 'simple_sequence', build: buildSimpleSequence },
  { name: 'simple_dyna_sequence', build: () => buildSimpleDynaSequence() },
  { name: 'simple_string_dyna_sequence', build: () => buildSimpleDynaSequence('simple_string_dyna_sequence', 'TYPE_STRING') },
  { name: 'running_sum', build: buildRunningSum },
  { name: 'ragged_sum', build: buildRaggedSum },
  { name: 'cached_mlp', build: buildCachedMlp },
];

/** Writes <out>/<name>/config.pbtxt, <out>/<name>/1/model.onnx and extra files. Returns the paths written. */
export function writeModel(outDir: string, m: GeneratedModel): string[] {
  const dir = join(outDir, m.name);
  mkdirSync(join(dir, '1'), { recursive: true });
  const written: string[] = [];
  const put = (rel: string, data: string | Uint8Array): void => {
    const p = join(dir, rel);
    writeFileSync(p, data);
    written.push(p);
  };
  put('config.pbtxt', m.config);
  put(join('1', 'model.onnx'), m.onnx);
  for (const [rel, text] of Object.entries(m.files ?? {})) put(rel, text);
  return written;
}

/** Generates the named models (default: all) into outDir. */
export function generateModels(outDir: string, names?: readonly string[]): string[] {
  const unknown = (names ?? []).filter((n) => !MODELS.some((m) => m.name === n));
  if (unknown.length) throw new Error(`unknown model(s): ${unknown.join(', ')}`);
  const specs = names ? MODELS.filter((m) => names.includes(m.name)) : MODELS;
  return specs.flatMap((s) => writeModel(outDir, s.build()));
}
