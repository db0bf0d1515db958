// Triton's "simple" model (INT32 INPUT0, INPUT1 [16] → OUTPUT0 = sum, OUTPUT1 = difference,
// max_batch_size 8) as the fixtures the tests compare against. The same model as a test-backend
// model (config.pbtxt and model.json) is SIMPLE_TEST_MODEL in test_core.ts; as ONNX it is in the
// generated example repository (tools/onnx/models.ts).
import type { ModelConfig } from '../../src/config/types.js';
import { i32 } from './tensors.js';

const INPUTS = ['INPUT0', 'INPUT1'] as const;
const OUTPUTS = ['OUTPUT0', 'OUTPUT1'] as const;

/** The raw model configuration of `simple`, as config.pbtxt would give it (config-level tests). */
export function simpleConfig(maxBatchSize = 8): ModelConfig {
  return {
    name: 'simple',
    max_batch_size: maxBatchSize,
    input: INPUTS.map((name) => ({ name, data_type: 'TYPE_INT32', dims: [16] })),
    output: OUTPUTS.map((name) => ({ name, data_type: 'TYPE_INT32', dims: [16] })),
  };
}

/**
 * The model metadata of `simple` (version 1), the batch dimension prepended to every shape: as
 * the HTTP front-end gives it (numbers), or as gRPC does (int64 dimensions as strings).
 */
export function simpleMetadata(platform: string, protocol: 'http' | 'grpc') {
  const shape = protocol === 'http' ? [-1, 16] : ['-1', '16'];
  const tensor = (name: string) => ({ name, datatype: 'INT32', shape });
  return { name: 'simple', versions: ['1'], platform, inputs: INPUTS.map(tensor), outputs: OUTPUTS.map(tensor) };
}

/** The inputs of a KServe v2 JSON inference request for `simple` (INPUT0 may be given another datatype). */
export function simpleJsonInputs(a: unknown, b: unknown, shapeA = [1, 16], shapeB = shapeA, datatypeA = 'INT32') {
  return [
    { name: 'INPUT0', datatype: datatypeA, shape: shapeA, data: a },
    { name: 'INPUT1', datatype: 'INT32', shape: shapeB, data: b },
  ];
}

/** A gRPC ModelInfer request for `simple`: rows of 16 INT32 values in raw_input_contents, plus `extra` fields. */
export function simpleGrpcRequest(a: number[], b: number[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  const rows = a.length / 16;
  return {
    model_name: 'simple',
    inputs: INPUTS.map((name) => ({ name, datatype: 'INT32', shape: [rows, 16] })),
    raw_input_contents: [i32(a), i32(b)],
    ...extra,
  };
}
