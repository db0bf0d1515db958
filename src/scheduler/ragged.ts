// Ragged batching in a batch: the batch_input tensors built from the requests' source inputs, and
// batch_output tensors split back by each request's source input shape (Triton's BatchInput and
// BatchOutput kinds, see docs/batching.md).
import type { BatchInputSpec, BatchOutputSpec } from '../config/resolved.js';
import { type DataType, elementCount, elementSize } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';

/** What the batch inputs need of a request: its tensors' names and shapes (batch dimension first). */
export interface ShapedRequest {
  inputs: readonly { name: string; shape: readonly number[] }[];
}

export interface BuiltTensor {
  name: string;
  datatype: DataType;
  dims: number[];
  data: Uint8Array;
}

function shapeOf(r: ShapedRequest, input: string): readonly number[] {
  const t = r.inputs.find((i) => i.name === input);
  // An optional source input left out counts as empty.
  return t ? t.shape : [0];
}

function encode(datatype: DataType, values: readonly number[]): Uint8Array {
  const typed = datatype === 'FP32' ? Float32Array.from(values) : Int32Array.from(values);
  return new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
}

/** One batch_input tensor for a batch of requests, as Triton builds it for its kind. */
export function batchInputTensor(spec: BatchInputSpec, reqs: readonly ShapedRequest[]): BuiltTensor {
  const shapes = reqs.map((r) => shapeOf(r, spec.sourceInput));
  const counts = shapes.map((s) => elementCount(s));
  const build = (dims: number[], values: readonly number[]): BuiltTensor => ({
    name: spec.targetName,
    datatype: spec.datatype,
    dims,
    data: encode(spec.datatype, values),
  });
  const accumulated = (): number[] => {
    let sum = 0;
    return counts.map((c) => (sum += c));
  };
  switch (spec.kind) {
    case 'BATCH_ELEMENT_COUNT':
      return build([counts.length], counts);
    case 'BATCH_ACCUMULATED_ELEMENT_COUNT':
      return build([counts.length], accumulated());
    case 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO':
      return build([counts.length + 1], [0, ...accumulated()]);
    case 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE': {
      // Only the shape carries information; Triton leaves the data uninitialized, here it is zeros.
      const max = Math.max(0, ...counts);
      return build([max], new Array<number>(max).fill(0));
    }
    case 'BATCH_ITEM_SHAPE':
    case 'BATCH_ITEM_SHAPE_FLATTEN': {
      // One row per batch item: a request of batch b contributes its item shape b times.
      const rows = shapes.flatMap((s) => Array.from({ length: s[0] ?? 0 }, () => s.slice(1)));
      const rank = shapes[0] ? shapes[0].length - 1 : 0;
      const dims = spec.kind === 'BATCH_ITEM_SHAPE' ? [rows.length, rank] : [rows.length * rank];
      return build(dims, rows.flat());
    }
  }
}

/** Total elements of a ragged input across the batch: its 1-D length for the model. */
export function raggedLength(reqs: readonly ShapedRequest[], input: string): number {
  let n = 0;
  for (const r of reqs) n += elementCount(shapeOf(r, input));
  return n;
}

/**
 * Splits a batch output (BATCH_SCATTER_WITH_INPUT_SHAPE): request i gets as many elements as its
 * source input has, in that input's shape.
 */
export function scatterBatchOutput(
  out: { name: string; datatype: DataType; data: Uint8Array },
  spec: BatchOutputSpec,
  reqs: readonly ShapedRequest[],
): { name: string; datatype: DataType; shape: number[]; data: Uint8Array }[] {
  if (out.datatype === 'BYTES') throw ServalError.internal(`batch output '${out.name}' cannot be BYTES`);
  const size = elementSize(out.datatype);
  const shapes = reqs.map((r) => [...shapeOf(r, spec.sourceInput)]);
  const total = shapes.reduce((s, sh) => s + elementCount(sh), 0);
  if (out.data.byteLength !== total * size) {
    throw ServalError.internal(
      `batch output '${out.name}' has ${out.data.byteLength / size} elements but its source input '${spec.sourceInput}' has ${total} across the batch`,
    );
  }
  let offset = 0;
  return shapes.map((shape) => {
    const len = elementCount(shape) * size;
    const data = out.data.subarray(offset, offset + len);
    offset += len;
    return { name: out.name, datatype: out.datatype, shape, data };
  });
}
