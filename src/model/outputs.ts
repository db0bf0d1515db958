// What a client gets back for each output: the config's dims (an output `reshape` undone) and,
// when asked for (classification extension), the top classes instead of the tensor.
import type { ResolvedOutput } from '../config/resolved.js';
import { type DataType, elementCount, halfToFloat, joinBytes, typedView } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import type { InferOutputTensor } from '../kernel/types.js';
import type { ScheduledOutput } from '../scheduler/scheduler.js';

/** Undo an output `reshape`: clients see the config's `dims` (after the batch dimension). */
export function clientShape(out: ScheduledOutput, cfg: ResolvedOutput, batchSize: number): InferOutputTensor {
  if (!cfg.reshaped) return { name: out.name, datatype: out.datatype, shape: out.shape, data: out.data };
  const count = elementCount(batchSize > 0 ? out.shape.slice(1) : out.shape);
  const fixed = elementCount(cfg.dims.filter((d) => d !== -1));
  const shape = cfg.dims.map((d) => (d === -1 ? count / fixed : d));
  return { name: out.name, datatype: out.datatype, shape: batchSize > 0 ? [batchSize, ...shape] : shape, data: out.data };
}

/** Classification extension: the top-k entries per batch item as "value:index[:label]" BYTES. */
export function classify(t: InferOutputTensor, k: number, batched: boolean, labels: readonly string[] | undefined): InferOutputTensor {
  if (t.datatype === 'BYTES') throw ServalError.invalidArg("class result not available for output due to unsupported type 'BYTES'");
  const values = numericValues(t.datatype, t.data);
  const rows = batched ? t.shape[0]! : 1;
  const per = values.length / Math.max(1, rows);
  const top = Math.min(k, per);
  const strings: string[] = [];
  for (let r = 0; r < rows; r++) {
    const idx = Array.from({ length: per }, (_, i) => i);
    const base = r * per;
    idx.sort((a, b) => values[base + b]! - values[base + a]! || a - b);
    for (const i of idx.slice(0, top)) {
      const label = labels?.[i];
      strings.push(`${values[base + i]!.toFixed(6)}:${i}${label !== undefined ? `:${label}` : ''}`);
    }
  }
  return { name: t.name, datatype: 'BYTES', shape: batched ? [rows, top] : [top], data: joinBytes(strings) };
}

function numericValues(dt: Exclude<DataType, 'BYTES'>, data: Uint8Array): number[] {
  const view = typedView(dt, data);
  if (dt === 'FP16') return Array.from(view as Uint16Array, halfToFloat);
  return Array.from(view as ArrayLike<number | bigint>, (x) => Number(x));
}
