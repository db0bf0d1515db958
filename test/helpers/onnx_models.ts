// Small ONNX graphs that more than one test reads.
import { GraphBuilder, modelProtoType } from '../../tools/onnx/builder.js';

/** Y = X·W where the weight W is also listed among the graph's inputs, as IR < 4 models list their weights. */
export function weightsListedAsInputs(name = 'weights'): Uint8Array {
  const g = new GraphBuilder(name);
  g.input('X', 'float32', ['n', 2]);
  g.initializer('W', 'float32', [2, 2], Float32Array.from([1, 0, 0, 1]));
  g.op('MatMul', ['X', 'W'], {}, 'Y');
  g.output('Y', 'float32', ['n', 2]);
  const model = g.toModelObject({ irVersion: 3, opset: 9 }) as { graph: { input: unknown[] } };
  model.graph.input.push({ name: 'W', type: { tensorType: { elemType: 1, shape: { dim: [{ dimValue: 2 }, { dimValue: 2 }] } } } });
  const T = modelProtoType();
  return T.encode(T.fromObject(model)).finish();
}
