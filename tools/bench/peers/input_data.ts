/**
 * perf_analyzer input data (`--input-data FILE`) for the peer benchmark: one request's tensors
 * of finite pseudo-random values, the same for every server.
 *
 * perf_analyzer's default "random" data fills FP32 tensors with random bit patterns, NaN and
 * infinities included; MLServer's NumpyCodec turns a NaN output into JSON null and then cannot
 * pack it into gRPC raw_output_contents ("struct.error: required argument is not a float"), so
 * every such request fails. Finite values in [-1, 1) avoid that for both servers alike.
 */
import type { ModelConfig } from '../../../src/config/types.js';
import { rng as prng } from '../../../test/helpers/tensors.js';

const FLOATS = new Set(['TYPE_FP16', 'TYPE_FP32', 'TYPE_FP64', 'TYPE_BF16']);
const INTS = new Set(['TYPE_INT8', 'TYPE_INT16', 'TYPE_INT32', 'TYPE_INT64', 'TYPE_UINT8', 'TYPE_UINT16', 'TYPE_UINT32', 'TYPE_UINT64']);

/** `{"data": [{INPUT: [...]}]}` with one value per element of each input's dims (no batch dimension). */
export function inputDataJson(config: ModelConfig, seed = 1): { data: Record<string, number[]>[] } {
  const next = prng(seed);
  const step: Record<string, number[]> = {};
  for (const input of config.input ?? []) {
    const dims = (input.dims ?? []).map(Number);
    if (!input.name || dims.some((d) => d < 0)) throw new Error(`input ${input.name ?? '?'}: needs a name and fixed dims`);
    const n = dims.reduce((a, b) => a * b, 1);
    const t = input.data_type ?? 'TYPE_INVALID';
    const values = new Array<number>(n);
    // Never a whole number: perf_analyzer reads a JSON integer (0, -1) as no float data.
    if (FLOATS.has(t)) for (let i = 0; i < n; i++) values[i] = (Math.floor(next() * 2e4) - 1e4 + 0.5) / 1e4;
    else if (INTS.has(t)) for (let i = 0; i < n; i++) values[i] = Math.floor(next() * 100);
    else throw new Error(`input ${input.name}: no generated data for ${t}`);
    step[input.name] = values;
  }
  return { data: [step] };
}
