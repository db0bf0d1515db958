/**
 * Writes a ResNet-50 with torchvision's architecture and random weights, as a
 * Triton model directory:
 *
 *   <out>/resnet50/config.pbtxt
 *   <out>/resnet50/1/model.onnx      (~100 MB, float32)
 *
 * Usage: node dist/tools/gen_resnet50.js --out DIR
 *
 * Graph and shapes follow torchvision.models.resnet50 (v1.5: the stride of a
 * bottleneck sits on its 3x3 conv): conv1 7x7/2 + maxpool 3x3/2, bottleneck
 * stages of [3, 4, 6, 3] blocks with widths 64/128/256/512 and 4x expansion,
 * 1x1 projection shortcuts on the first block of each stage, global average
 * pool, fc 2048 -> 1000 (logits, no softmax). BatchNorm is folded into the
 * convolutions (every Conv has a bias), as an exported-and-optimized
 * torchvision model would look. Weights come from the seeded PRNG, so the
 * output is deterministic. It is too large to commit; use it for load and
 * throughput testing.
 */
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { float, GraphBuilder, Prng } from './onnx/builder.js';
import { renderConfig } from './onnx/triton_config.js';

const BATCH = 'batch';
export const RESNET50_BLOCKS = [3, 4, 6, 3] as const;
export const RESNET50_WIDTHS = [64, 128, 256, 512] as const;
const EXPANSION = 4;

export function resnet50Graph(seed = 0x5e5_0050): GraphBuilder {
  const rng = new Prng(seed);
  const g = new GraphBuilder('resnet50');

  /** Conv (BatchNorm folded in as the bias), optionally followed by Relu. */
  const conv = (x: string, name: string, cin: number, cout: number, k: number, stride: number, relu: boolean, gain = 1): string => {
    const pad = (k - 1) >> 1;
    const fanIn = cin * k * k;
    const w = g.initializer(`${name}.weight`, 'float32', [cout, cin, k, k], rng.heUniform(cout * fanIn, fanIn, gain));
    const b = g.initializer(`${name}.bias`, 'float32', [cout], rng.uniformArray(cout, 0.01));
    const y = g.op('Conv', [x, w, b], {
      kernel_shape: [k, k],
      strides: [stride, stride],
      pads: [pad, pad, pad, pad],
      dilations: [1, 1],
      group: 1,
    });
    return relu ? g.op('Relu', [y]) : y;
  };

  let x = g.input('INPUT', 'float32', [BATCH, 3, 224, 224]);
  x = conv(x, 'conv1', 3, 64, 7, 2, true);
  x = g.op('MaxPool', [x], { kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1] });

  let cin = 64;
  RESNET50_BLOCKS.forEach((blocks, stage) => {
    const width = RESNET50_WIDTHS[stage]!;
    const cout = width * EXPANSION;
    for (let i = 0; i < blocks; i++) {
      const name = `layer${stage + 1}.${i}`;
      const stride = i === 0 && stage > 0 ? 2 : 1;
      let y = conv(x, `${name}.conv1`, cin, width, 1, 1, true);
      y = conv(y, `${name}.conv2`, width, width, 3, stride, true);
      // A small gain on the last conv of each residual branch keeps the
      // activations from growing block after block with random weights.
      y = conv(y, `${name}.conv3`, width, cout, 1, 1, false, 0.2);
      const shortcut = i === 0 ? conv(x, `${name}.downsample`, cin, cout, 1, stride, false) : x;
      x = g.op('Relu', [g.op('Add', [y, shortcut])]);
      cin = cout;
    }
  });

  x = g.op('GlobalAveragePool', [x]);
  x = g.op('Flatten', [x], { axis: 1 });
  const fcW = g.initializer('fc.weight', 'float32', [1000, cin], rng.uniformArray(1000 * cin, Math.sqrt(1 / cin)));
  const fcB = g.initializer('fc.bias', 'float32', [1000], rng.uniformArray(1000, 0.01));
  g.op('Gemm', [x, fcW, fcB], { transB: 1, alpha: float(1), beta: float(1) }, 'OUTPUT');
  g.output('OUTPUT', 'float32', [BATCH, 1000]);
  return g;
}

export function resnet50Config(): string {
  return renderConfig({
    name: 'resnet50',
    platform: 'onnxruntime_onnx',
    maxBatchSize: 16,
    inputs: [{ name: 'INPUT', dataType: 'TYPE_FP32', dims: [3, 224, 224] }],
    outputs: [{ name: 'OUTPUT', dataType: 'TYPE_FP32', dims: [1000] }],
    dynamicBatching: true,
    cpuInstances: 1,
  });
}

/** Writes <outDir>/resnet50/{config.pbtxt,1/model.onnx}; returns the model path. */
export function writeResnet50(outDir: string): string {
  const dir = join(outDir, 'resnet50');
  mkdirSync(join(dir, '1'), { recursive: true });
  writeFileSync(join(dir, 'config.pbtxt'), resnet50Config());
  const bytes = resnet50Graph().encode({
    docString:
      'ResNet-50 (torchvision architecture, BatchNorm folded into Conv) with random weights. ' +
      'Input NCHW float32 3x224x224; output 1000 logits.',
  });
  const modelPath = join(dir, '1', 'model.onnx');
  writeFileSync(modelPath, bytes);
  return modelPath;
}

function main(): void {
  const argv = process.argv.slice(2);
  let out: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--out' || a === '-o') out = argv[++i];
    else if (a.startsWith('--out=')) out = a.slice(6);
    else if (a === '--help' || a === '-h') {
      console.log('usage: gen-resnet50 --out DIR');
      return;
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!out) throw new Error('usage: gen-resnet50 --out DIR');
  const t0 = performance.now();
  const p = writeResnet50(resolve(out));
  console.log(`${p}: ${statSync(p).size} bytes in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    main();
  } catch (e) {
    console.error(`gen-resnet50: ${(e as Error).message}`);
    process.exit(1);
  }
}
