/**
 * Writes Triton model configurations (config.pbtxt, protobuf text format) for
 * the example models. Only the fields the generators use are supported.
 */

import type { DataType } from '../../src/config/types.js';

/** Triton data type names the generators write (model_config.proto DataType). */
export type TritonDataType = Exclude<DataType, 'TYPE_INVALID' | 'TYPE_BF16'>;

export interface TensorConfig {
  name: string;
  dataType: TritonDataType;
  /** Dimensions without the batch dimension; -1 = variable. */
  dims: readonly number[];
  /** Output only: file in the model directory with one class label per line. */
  labelFilename?: string;
}

export interface ModelConfig {
  name: string;
  /** Either `platform: "onnxruntime_onnx"` or `backend: "onnxruntime"`; both select ONNX Runtime. */
  platform?: 'onnxruntime_onnx';
  backend?: 'onnxruntime';
  maxBatchSize: number;
  inputs: readonly TensorConfig[];
  outputs: readonly TensorConfig[];
  /** Adds `dynamic_batching { }`. */
  dynamicBatching?: boolean;
  /** CPU instance count; adds `instance_group [ { count: N kind: KIND_CPU } ]`. */
  cpuInstances?: number;
}

const q = (s: string): string => JSON.stringify(s);

function tensorBlock(t: TensorConfig, last: boolean): string[] {
  const lines = ['  {', `    name: ${q(t.name)}`, `    data_type: ${t.dataType}`, `    dims: [ ${t.dims.join(', ')} ]`];
  if (t.labelFilename !== undefined) lines.push(`    label_filename: ${q(t.labelFilename)}`);
  lines.push(last ? '  }' : '  },');
  return lines;
}

export function renderConfig(c: ModelConfig): string {
  if ((c.platform === undefined) === (c.backend === undefined)) {
    throw new Error(`${c.name}: set exactly one of platform and backend`);
  }
  const lines = [`name: ${q(c.name)}`];
  if (c.platform) lines.push(`platform: ${q(c.platform)}`);
  if (c.backend) lines.push(`backend: ${q(c.backend)}`);
  lines.push(`max_batch_size: ${c.maxBatchSize}`);
  lines.push('input [');
  for (const [i, t] of c.inputs.entries()) lines.push(...tensorBlock(t, i === c.inputs.length - 1));
  lines.push(']');
  lines.push('output [');
  for (const [i, t] of c.outputs.entries()) lines.push(...tensorBlock(t, i === c.outputs.length - 1));
  lines.push(']');
  if (c.dynamicBatching) lines.push('dynamic_batching { }');
  if (c.cpuInstances !== undefined) {
    lines.push('instance_group [');
    lines.push('  {');
    lines.push(`    count: ${c.cpuInstances}`);
    lines.push('    kind: KIND_CPU');
    lines.push('  }');
    lines.push(']');
  }
  return `${lines.join('\n')}\n`;
}
