/**
 * cached_mlp: the example model for Triton's response cache (docs/response_cache.md). A stack of
 * Tanh(x · W) layers that all share one 512x512 weight matrix, so the file stays small (the weights
 * are stored once, as float16) while every request costs a few milliseconds of compute: enough
 * that an answer from the cache is visibly cheaper than running the model. Its config enables
 * `response_cache`; the server uses it only when started with `--cache-config local,size=BYTES`.
 */
import { DataType, GraphBuilder, Prng, toFloat16Array } from './builder.js';
import type { GeneratedModel } from './models.js';
import { renderConfig } from './triton_config.js';

export const CACHED_MLP_WIDTH = 512;
export const CACHED_MLP_LAYERS = 32;

export function cachedMlpGraph(): GraphBuilder {
  const rng = new Prng(0x0cac_4e01);
  const g = new GraphBuilder('cached_mlp');
  let x = g.input('INPUT', 'float32', ['batch', CACHED_MLP_WIDTH]);
  // Variance 1/fan-in keeps Tanh out of saturation through the stack.
  const w16 = g.initializer(
    'weight_fp16',
    'float16',
    [CACHED_MLP_WIDTH, CACHED_MLP_WIDTH],
    toFloat16Array(rng.uniformArray(CACHED_MLP_WIDTH * CACHED_MLP_WIDTH, Math.sqrt(3 / CACHED_MLP_WIDTH))),
  );
  const w = g.op('Cast', [w16], { to: DataType.FLOAT }, 'weight');
  for (let l = 0; l < CACHED_MLP_LAYERS; l++) {
    x = g.op('MatMul', [x, w]);
    x = g.op('Tanh', [x], {}, l === CACHED_MLP_LAYERS - 1 ? 'OUTPUT' : undefined);
  }
  g.output('OUTPUT', 'float32', ['batch', CACHED_MLP_WIDTH]);
  return g;
}

export function buildCachedMlp(): GeneratedModel {
  const config = renderConfig({
    name: 'cached_mlp',
    platform: 'onnxruntime_onnx',
    maxBatchSize: 8,
    inputs: [{ name: 'INPUT', dataType: 'TYPE_FP32', dims: [CACHED_MLP_WIDTH] }],
    outputs: [{ name: 'OUTPUT', dataType: 'TYPE_FP32', dims: [CACHED_MLP_WIDTH] }],
    dynamicBatching: true,
    cpuInstances: 1,
  });
  return {
    name: 'cached_mlp',
    onnx: cachedMlpGraph().encode({
      docString: `Tanh(x W) x${CACHED_MLP_LAYERS} with one shared ${CACHED_MLP_WIDTH}x${CACHED_MLP_WIDTH} random weight (float16 + Cast).`,
    }),
    config: `${config}response_cache {\n  enable: true\n}\n`,
  };
}
