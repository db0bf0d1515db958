// Ensemble configs for tests, written as config.pbtxt text (what a user writes), and the ensemble
// the tests use most: Triton's "simple" run twice, so that OUT0 = 2·IN0 and OUT1 = 2·IN1.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface TensorSpec {
  name: string;
  /** TYPE_* name. */
  type: string;
  dims: number[];
  optional?: boolean;
}

export interface StepSpec {
  model: string;
  /** model_version; -1 (the latest) when not given. */
  version?: number;
  /** model input → ensemble tensor */
  inputs: Record<string, string>;
  /** model output → ensemble tensor */
  outputs: Record<string, string>;
}

export interface EnsembleSpec {
  name: string;
  maxBatchSize: number;
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  steps: StepSpec[];
  /** More config.pbtxt text, appended. */
  extra?: string;
}

const tensorText = (t: TensorSpec): string =>
  `{ name: "${t.name}" data_type: ${t.type} dims: [ ${t.dims.join(', ')} ]${t.optional ? ' optional: true' : ''} }`;

const mapText = (field: string, m: Record<string, string>): string =>
  Object.entries(m)
    .map(([k, v]) => `      ${field} { key: "${k}" value: "${v}" }`)
    .join('\n');

/** config.pbtxt text of an ensemble. */
export function ensembleConfig(spec: EnsembleSpec): string {
  const steps = spec.steps
    .map(
      (s) => `    {
      model_name: "${s.model}"
      model_version: ${s.version ?? -1}
${mapText('input_map', s.inputs)}
${mapText('output_map', s.outputs)}
    }`,
    )
    .join(',\n');
  return `name: "${spec.name}"
platform: "ensemble"
max_batch_size: ${spec.maxBatchSize}
input [ ${spec.inputs.map(tensorText).join(', ')} ]
output [ ${spec.outputs.map(tensorText).join(', ')} ]
ensemble_scheduling {
  step [
${steps}
  ]
}
${spec.extra ?? ''}`;
}

const int16 = (name: string): TensorSpec => ({ name, type: 'TYPE_INT32', dims: [16] });

/**
 * `model` (Triton's simple: sum and difference) run twice: the second step adds and subtracts
 * the first's sum and difference, so OUT0 = 2·IN0 and OUT1 = 2·IN1.
 */
export function doubleSimple(name = 'double_simple', model = 'simple', maxBatchSize = 8): EnsembleSpec {
  return {
    name,
    maxBatchSize,
    inputs: [int16('IN0'), int16('IN1')],
    outputs: [int16('OUT0'), int16('OUT1')],
    steps: [
      { model, inputs: { INPUT0: 'IN0', INPUT1: 'IN1' }, outputs: { OUTPUT0: 'sum', OUTPUT1: 'diff' } },
      { model, inputs: { INPUT0: 'sum', INPUT1: 'diff' }, outputs: { OUTPUT0: 'OUT0', OUTPUT1: 'OUT1' } },
    ],
  };
}

/** An ensemble's folder in repository `dir`: its config.pbtxt and an empty version folder 1. */
export function writeEnsemble(dir: string, name: string, config: string): void {
  mkdirSync(path.join(dir, name, '1'), { recursive: true });
  writeFileSync(path.join(dir, name, 'config.pbtxt'), config);
}
