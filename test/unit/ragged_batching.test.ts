// Ragged batching: the batch_input tensors of every kind (src/scheduler/ragged.ts), a ragged
// input flattened across the batch and the batch inputs appended by assemble, batch outputs split
// by the source input's shape, and the load-time resolution of allow_ragged_batch, batch_input and
// batch_output (src/config/ragged.ts, resolve.ts's signature check).
import { describe, expect, it } from 'vitest';
import type { ExecResult } from '../../src/backends/backend.js';
import type { BatchInputKind, BatchInputSpec, RaggedBatching } from '../../src/config/resolved.js';
import type { ModelConfig } from '../../src/config/types.js';
import { ServalError } from '../../src/kernel/errors.js';
import { batchInputTensor } from '../../src/scheduler/ragged.js';
import { assemble, type BatchInputs, scatter } from '../../src/scheduler/scheduler.js';
import { resolveForTest, signatureOf } from '../helpers/resolve.js';
import { rawOf, valuesOf } from '../helpers/tensors.js';

/** A request with a FP32 input X of the given full shape (values 1, 2, …). */
function request(shape: number[], outputs = ['Y']): BatchInputs {
  const n = shape.reduce((a, b) => a * b, 1);
  return {
    inputs: [
      {
        name: 'X',
        datatype: 'FP32',
        shape,
        data: rawOf(
          'FP32',
          Array.from({ length: n }, (_, i) => i + 1),
        ),
      },
    ],
    outputs,
  };
}

const spec = (kind: BatchInputKind, datatype: BatchInputSpec['datatype'] = 'INT32'): BatchInputSpec => ({
  kind,
  targetName: 'B',
  datatype,
  sourceInput: 'X',
});

describe('batch_input tensors (Triton BatchInput kinds)', () => {
  // Triton's examples: a batch-2 request of shape [2, 3, 1]… here: [1,3], [1,5], [2,2].
  const reqs = [request([1, 3]), request([1, 5]), request([2, 2])];
  const built = (kind: BatchInputKind, dt: BatchInputSpec['datatype'] = 'INT32') => {
    const t = batchInputTensor(spec(kind, dt), reqs);
    return { dims: t.dims, values: valuesOf(dt as 'INT32', t.data).map(Number), datatype: t.datatype };
  };

  it('BATCH_ELEMENT_COUNT: each request element count, shape [requests]', () => {
    expect(built('BATCH_ELEMENT_COUNT')).toEqual({ dims: [3], values: [3, 5, 4], datatype: 'INT32' });
  });
  it('BATCH_ACCUMULATED_ELEMENT_COUNT: running totals, shape [requests]', () => {
    expect(built('BATCH_ACCUMULATED_ELEMENT_COUNT')).toMatchObject({ dims: [3], values: [3, 8, 12] });
  });
  it('BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO: a leading 0, shape [requests + 1]', () => {
    expect(built('BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO')).toMatchObject({ dims: [4], values: [0, 3, 8, 12] });
  });
  it('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE: the largest element count as the shape', () => {
    expect(built('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE').dims).toEqual([5]);
  });
  it('BATCH_ITEM_SHAPE: one row per batch item with its shape, shape [items, rank]', () => {
    expect(built('BATCH_ITEM_SHAPE')).toMatchObject({ dims: [4, 1], values: [3, 5, 2, 2] });
  });
  it('BATCH_ITEM_SHAPE_FLATTEN: the same, flat', () => {
    expect(built('BATCH_ITEM_SHAPE_FLATTEN')).toMatchObject({ dims: [4], values: [3, 5, 2, 2] });
  });
  it('FP32 batch inputs carry the same values', () => {
    expect(built('BATCH_ACCUMULATED_ELEMENT_COUNT', 'FP32').values).toEqual([3, 8, 12]);
  });
  it('BATCH_ITEM_SHAPE of a two-dimensional item: Triton example [2,3,1] + [1,2,2] → [[3,1],[3,1],[2,2]]', () => {
    const t = batchInputTensor(spec('BATCH_ITEM_SHAPE'), [request([2, 3, 1]), request([1, 2, 2])]);
    expect(t.dims).toEqual([3, 2]);
    expect(valuesOf('INT32', t.data)).toEqual([3, 1, 3, 1, 2, 2]);
  });
});

const RAGGED: RaggedBatching = {
  raggedInputs: new Set(['X']),
  batchInputs: [spec('BATCH_ACCUMULATED_ELEMENT_COUNT')],
  batchOutputs: [{ targetName: 'Y', sourceInput: 'X' }],
};

describe('assemble and scatter with ragged batching', () => {
  it('concatenates a ragged input into one 1-D tensor and appends the batch inputs', () => {
    const reqs = [request([1, 3]), request([1, 2])];
    const batch = assemble(reqs, 2, undefined, RAGGED);
    expect(batch.inputs.map((t) => [t.name, t.dims])).toEqual([
      ['X', [5]],
      ['B', [2]],
    ]);
    const slot = (name: string) => batch.inputs.find((t) => t.name === name)!;
    const view = (name: string) => batch.data.subarray(slot(name).offset, slot(name).offset + slot(name).byteLength);
    expect(valuesOf('FP32', view('X'))).toEqual([1, 2, 3, 1, 2]);
    expect(valuesOf('INT32', view('B'))).toEqual([3, 5]);
    expect(slot('B').offset % 64).toBe(0);
  });

  it('BATCH_SCATTER_WITH_INPUT_SHAPE: each request gets its share in its source input shape', () => {
    const reqs = [request([1, 3]), request([1, 2])];
    const result: ExecResult = {
      outputs: [
        { name: 'Y', datatype: 'FP32', dims: [5], data: rawOf('FP32', [10, 20, 30, 40, 50]) },
        { name: 'S', datatype: 'FP32', dims: [2, 1], data: rawOf('FP32', [60, 90]) },
      ],
      computeInputNs: 0,
      computeInferNs: 0,
      computeOutputNs: 0,
    };
    const per = scatter(result, [1, 1], true, { spec: RAGGED, reqs });
    expect(per.map((outs) => outs.map((o) => [o.name, o.shape, valuesOf('FP32', o.data)]))).toEqual([
      [
        ['Y', [1, 3], [10, 20, 30]],
        ['S', [1, 1], [60]],
      ],
      [
        ['Y', [1, 2], [40, 50]],
        ['S', [1, 1], [90]],
      ],
    ]);
  });

  it('a batch output whose size does not match its source input is an internal error', () => {
    const reqs = [request([1, 3])];
    const result: ExecResult = {
      outputs: [{ name: 'Y', datatype: 'FP32', dims: [2], data: rawOf('FP32', [1, 2]) }],
      computeInputNs: 0,
      computeInferNs: 0,
      computeOutputNs: 0,
    };
    expect(() => scatter(result, [1], true, { spec: RAGGED, reqs })).toThrow(/batch output 'Y' has 2 elements/);
  });
});

const raggedConfig = (extra: Partial<ModelConfig> = {}): ModelConfig => ({
  name: 'r',
  max_batch_size: 8,
  input: [{ name: 'INPUT', data_type: 'TYPE_FP32', dims: [-1], allow_ragged_batch: true }],
  output: [{ name: 'OUT', data_type: 'TYPE_FP32', dims: [-1] }],
  batch_input: [{ kind: 'BATCH_ACCUMULATED_ELEMENT_COUNT', target_name: ['INDEX'], data_type: 'TYPE_INT32', source_input: ['INPUT'] }],
  batch_output: [{ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['OUT'], source_input: ['INPUT'] }],
  dynamic_batching: {},
  ...extra,
});
/** The model file as Triton's ONNX Runtime backend expects it: ragged input, batch input and output 1-D. */
const flatSignature = {
  inputs: [
    { name: 'INPUT', datatype: 'FP32' as const, rawType: 'float', dims: [-1] },
    { name: 'INDEX', datatype: 'INT32' as const, rawType: 'int32', dims: [-1] },
  ],
  outputs: [{ name: 'OUT', datatype: 'FP32' as const, rawType: 'float', dims: [-1] }],
};

describe('resolving allow_ragged_batch, batch_input and batch_output', () => {
  it('loads a ragged model whose file has 1-D ragged input, batch input and batch output', () => {
    const r = resolveForTest(raggedConfig(), { signature: flatSignature });
    expect([...r.batching.ragged!.raggedInputs]).toEqual(['INPUT']);
    expect(r.batching.ragged!.batchInputs).toEqual([
      { kind: 'BATCH_ACCUMULATED_ELEMENT_COUNT', targetName: 'INDEX', datatype: 'INT32', sourceInput: 'INPUT' },
    ]);
    expect(r.batching.ragged!.batchOutputs).toEqual([{ targetName: 'OUT', sourceInput: 'INPUT' }]);
  });

  it('works without dynamic batching too (each request is a batch of one)', () => {
    const r = resolveForTest(raggedConfig({ dynamic_batching: undefined }), { signature: flatSignature });
    expect(r.batching.ragged?.batchInputs).toHaveLength(1);
  });

  it('a model without ragged batching resolves no ragged section', () => {
    const cfg: ModelConfig = { name: 'p', max_batch_size: 8, input: [{ name: 'I', data_type: 'TYPE_FP32', dims: [4] }], output: [] };
    expect(resolveForTest(cfg, { signature: signatureOf(cfg) }).batching.ragged).toBeUndefined();
  });

  const refuses = (cfg: ModelConfig, text: RegExp) => {
    let err: unknown;
    try {
      resolveForTest(cfg, { signature: flatSignature });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ServalError);
    expect((err as ServalError).code).toBe('INVALID_ARG');
    expect((err as ServalError).message).toMatch(text);
  };

  it('refuses a batch input whose source is not an input', () => {
    refuses(
      raggedConfig({
        batch_input: [{ kind: 'BATCH_ELEMENT_COUNT', target_name: ['INDEX'], data_type: 'TYPE_INT32', source_input: ['NOPE'] }],
      }),
      /^unknown source input name 'NOPE' for r$/,
    );
  });
  it('refuses a batch input with an unsupported data type', () => {
    refuses(
      raggedConfig({
        batch_input: [{ kind: 'BATCH_ELEMENT_COUNT', target_name: ['INDEX'], data_type: 'TYPE_FP16', source_input: ['INPUT'] }],
      }),
      /^batch input data type must be TYPE_INT32 or TYPE_FP32 for r$/,
    );
  });
  it('refuses a batch input the model file does not have', () => {
    refuses(
      raggedConfig({
        batch_input: [{ kind: 'BATCH_ELEMENT_COUNT', target_name: ['OTHER'], data_type: 'TYPE_INT32', source_input: ['INPUT'] }],
      }),
      /batch input 'OTHER' is not an input of the model file/,
    );
  });
  it('refuses a batch output that is not a configured output', () => {
    refuses(
      raggedConfig({ batch_output: [{ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['NOPE'], source_input: ['INPUT'] }] }),
      /^unknown target output name 'NOPE' for r$/,
    );
  });
  it.each<[string, Partial<ModelConfig>, RegExp]>([
    [
      'an unknown batch input kind',
      {
        batch_input: [
          { kind: 'BATCH_NOPE' as 'BATCH_ELEMENT_COUNT', target_name: ['INDEX'], data_type: 'TYPE_INT32', source_input: ['INPUT'] },
        ],
      },
      /^unknown batch input kind 'BATCH_NOPE' for r$/,
    ],
    [
      'a batch input with two sources',
      { batch_input: [{ kind: 'BATCH_ITEM_SHAPE', target_name: ['INDEX'], data_type: 'TYPE_INT32', source_input: ['INPUT', 'INPUT'] }] },
      /^batch input kind 'BATCH_ITEM_SHAPE' expects 1 source input, got 2 for r$/,
    ],
    [
      'a batch output with no source',
      { batch_output: [{ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['OUT'], source_input: [] }] },
      /^batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 0 for r$/,
    ],
    [
      'a batch input without a target name (Serval)',
      { batch_input: [{ kind: 'BATCH_ELEMENT_COUNT', target_name: [], data_type: 'TYPE_INT32', source_input: ['INPUT'] }] },
      /^batch input kind 'BATCH_ELEMENT_COUNT' does not specify a target name for r$/,
    ],
    [
      'a batch input named like an input (Serval)',
      { batch_input: [{ kind: 'BATCH_ELEMENT_COUNT', target_name: ['INPUT'], data_type: 'TYPE_INT32', source_input: ['INPUT'] }] },
      /^batch input target name 'INPUT' is already used by another input for r$/,
    ],
    [
      'batch inputs on a model that does not batch (Serval)',
      { max_batch_size: 0, dynamic_batching: undefined },
      /^batch_input and batch_output require max_batch_size > 0 for r$/,
    ],
  ])('refuses %s', (_what, extra, text) => refuses(raggedConfig(extra), text));
  it('refuses ragged batching on a backend other than ONNX Runtime', () => {
    refuses(raggedConfig({ backend: 'python' }), /ONNX Runtime models only, not backend 'python'/);
  });
  it('without batch_input the model file input INDEX is undeclared', () => {
    refuses(raggedConfig({ batch_input: [] }), /'INDEX'|expects 1 inputs, model provides 2/);
  });
});
