// Ensemble configs for tests, written as config.pbtxt text (what a user writes), and the ensemble
// the tests use most: Triton's "simple" run twice, so that OUT0 = 2·IN0 and OUT1 = 2·IN1. Also
// composing models faked as loaded versions whose requests the test answers (FakeVersion).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseTextProto } from '../../src/config/pbtxt.js';
import type { ResolvedModelConfig } from '../../src/config/resolved.js';
import { modelConfigType } from '../../src/config/schema.js';
import type { ModelConfig } from '../../src/config/types.js';
import { ServalError } from '../../src/kernel/errors.js';
import type { InferOutputTensor, InferRequest, InferResponse, ResponseSink } from '../../src/kernel/types.js';
import type { LoadedVersion } from '../../src/model/loaded_version.js';
import { ModelStats } from '../../src/stats/model_stats.js';

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

/** A config.pbtxt text parsed as the repository parses it. */
export const parseConfig = (text: string): ModelConfig => parseTextProto(text, modelConfigType(), 'config.pbtxt') as ModelConfig;

/** One request a FakeVersion was given: what it asked, and how the test answers it. */
export interface FakeCall {
  req: InferRequest;
  /** A response with these outputs (final unless told), or the final flag alone (undefined). */
  respond(outputs: InferOutputTensor[] | undefined, final?: boolean): void;
  fail(e: ServalError, final?: boolean): void;
}

/**
 * A loaded composing model the test drives: each request (infer() for a model that is not
 * decoupled, stream() for one that is) waits in `calls` until the test answers it. infer() takes
 * one final answer; stream() any number, as a decoupled model sends them.
 */
export class FakeVersion implements LoadedVersion {
  readonly stats = new ModelStats();
  readonly version = 1;
  readonly calls: FakeCall[] = [];

  constructor(public config: ResolvedModelConfig) {}

  get name(): string {
    return this.config.name;
  }

  get decoupled(): boolean {
    return this.config.decoupled;
  }

  private response(req: InferRequest, outputs: InferOutputTensor[]): InferResponse {
    return { modelName: this.name, modelVersion: '1', id: req.id, outputs };
  }

  infer(req: InferRequest): Promise<InferResponse> {
    return new Promise((resolve, reject) => {
      this.calls.push({
        req,
        respond: (outputs) => resolve(this.response(req, outputs ?? [])),
        fail: (e) => reject(e),
      });
    });
  }

  stream(req: InferRequest, _requestStartNs: bigint, sink: ResponseSink): void {
    if (!this.decoupled) throw ServalError.internal(`fake model '${this.name}' is not decoupled`);
    this.calls.push({
      req,
      respond: (outputs, final = true) => sink.response(outputs && this.response(req, outputs), final),
      fail: (e, final = true) => sink.error(e, final),
    });
  }

  unload(): Promise<void> {
    return Promise.resolve();
  }
}
