/**
 * ragged_sum: ragged batching (Triton's allow_ragged_batch + batch_input + batch_output).
 *
 * Each request sends INPUT (FP32, any length). The dynamic batcher concatenates the requests'
 * INPUTs into one 1-D tensor and adds two batch inputs built from them: INDEX (the accumulated
 * element count per request, BATCH_ACCUMULATED_ELEMENT_COUNT) and COUNT (each request's element
 * count, BATCH_ELEMENT_COUNT). The graph cuts the concatenation back apart with INDEX:
 *   SUM[i]  = sum of request i's elements         (shape [1] per request)
 *   MEAN[i] = SUM[i] / COUNT[i]                    (shape [1] per request)
 *   DOUBLED = 2 * INPUT, scattered back to each request in its INPUT's shape
 *             (batch_output BATCH_SCATTER_WITH_INPUT_SHAPE).
 */
import { DataType, GraphBuilder } from './builder.js';
import type { GeneratedModel } from './models.js';

const CONFIG = `name: "ragged_sum"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "INPUT"
    data_type: TYPE_FP32
    dims: [ -1 ]
    allow_ragged_batch: true
  }
]
batch_input [
  {
    kind: BATCH_ACCUMULATED_ELEMENT_COUNT
    target_name: "INDEX"
    data_type: TYPE_INT32
    source_input: "INPUT"
  },
  {
    kind: BATCH_ELEMENT_COUNT
    target_name: "COUNT"
    data_type: TYPE_INT32
    source_input: "INPUT"
  }
]
output [
  {
    name: "SUM"
    data_type: TYPE_FP32
    dims: [ 1 ]
  },
  {
    name: "MEAN"
    data_type: TYPE_FP32
    dims: [ 1 ]
  },
  {
    name: "DOUBLED"
    data_type: TYPE_FP32
    dims: [ -1 ]
  }
]
batch_output [
  {
    target_name: "DOUBLED"
    kind: BATCH_SCATTER_WITH_INPUT_SHAPE
    source_input: "INPUT"
  }
]
dynamic_batching {
  max_queue_delay_microseconds: 50000
}
instance_group [
  {
    count: 1
    kind: KIND_CPU
  }
]
`;

export function buildRaggedSum(): GeneratedModel {
  const g = new GraphBuilder('ragged_sum');
  // Ragged input and batch inputs reach the model 1-D (Triton's ONNX Runtime backend does the same).
  g.input('INPUT', 'float32', ['elements']);
  g.input('INDEX', 'int32', ['requests']);
  g.input('COUNT', 'int32', ['requests']);
  const zero = g.initializer('zero', 'float32', [1], Float32Array.of(0));
  const zeroIndex = g.int64s('zero_index', [0]);
  const axis = g.initializer('axis', 'int64', [], BigInt64Array.of(0n));
  // prefix[k] = sum of the first k elements of the batch.
  const prefix = g.op('CumSum', [g.op('Concat', [zero, 'INPUT'], { axis: 0 }), axis]);
  const ends = g.op('Cast', ['INDEX'], { to: DataType.INT64 });
  const starts = g.op('Concat', [zeroIndex, g.op('Slice', [ends, g.int64s('from', [0]), g.int64s('to', [-1])])], { axis: 0 });
  const sum = g.op('Sub', [g.op('Gather', [prefix, ends], { axis: 0 }), g.op('Gather', [prefix, starts], { axis: 0 })]);
  const perRequest = g.int64s('per_request', [1]);
  g.op('Unsqueeze', [sum, perRequest], {}, 'SUM');
  const mean = g.op('Div', [sum, g.op('Cast', ['COUNT'], { to: DataType.FLOAT })]);
  g.op('Unsqueeze', [mean, perRequest], {}, 'MEAN');
  g.op('Mul', ['INPUT', g.initializer('two', 'float32', [1], Float32Array.of(2))], {}, 'DOUBLED');
  g.output('SUM', 'float32', ['requests', 1]);
  g.output('MEAN', 'float32', ['requests', 1]);
  g.output('DOUBLED', 'float32', ['elements']);
  return {
    name: 'ragged_sum',
    onnx: g.encode({ docString: 'Ragged batching: per-request SUM and MEAN of a concatenated INPUT, DOUBLED = 2 * INPUT' }),
    config: CONFIG,
  };
}
