// Output shapes known before a run, from the shapes the model file declares: a fixed dimension,
// or a named (symbolic) one that an input of this run fixes (`batch`, `n`, ...). With them the
// worker gives ONNX Runtime the output memory itself (worker.ts): for a large execution that
// keeps ONNX Runtime's allocator from growing (and holding) a block as large as the output.

export type DeclaredDim = number | string;

/**
 * The dims of an output declared as `declared`, given each input's declared and actual dims;
 * undefined when one is not known (an unnamed dynamic dimension, or a name the inputs give
 * two different values, or do not give at all).
 */
export function knownDims(
  inputs: readonly { declared: readonly DeclaredDim[]; dims: readonly number[] }[],
  declared: readonly DeclaredDim[],
): number[] | undefined {
  const bound = new Map<string, number>();
  const ambiguous = new Set<string>();
  for (const { declared: shape, dims } of inputs) {
    if (shape.length !== dims.length) continue;
    shape.forEach((d, i) => {
      if (typeof d !== 'string' || d === '') return;
      const had = bound.get(d);
      if (had !== undefined && had !== dims[i]) ambiguous.add(d);
      bound.set(d, dims[i]!);
    });
  }
  const out: number[] = [];
  for (const d of declared) {
    if (typeof d === 'number') {
      if (d < 0) return undefined;
      out.push(d);
    } else {
      const v = bound.get(d);
      if (d === '' || v === undefined || ambiguous.has(d)) return undefined;
      out.push(v);
    }
  }
  return out;
}
