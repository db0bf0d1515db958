// Small fixture model repositories in temporary folders, for the cases the example repository
// does not cover (broken configs, mismatched names, several versions, reshape, slow models).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GraphBuilder } from '../../tools/onnx/builder.js';

export interface FixtureModel {
  name: string;
  /** config.pbtxt text; omitted: no config file. */
  config?: string;
  /** model.onnx bytes per version folder. */
  versions: Record<number, Uint8Array>;
  /** Extra files in the model folder (labels). */
  files?: Record<string, string>;
}

export interface Repo {
  dir: string;
  cleanup(): void;
}

export function makeRepo(models: FixtureModel[]): Repo {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-fixture-'));
  for (const m of models) {
    const mdir = path.join(dir, m.name);
    mkdirSync(mdir, { recursive: true });
    if (m.config !== undefined) writeFileSync(path.join(mdir, 'config.pbtxt'), m.config);
    for (const [v, bytes] of Object.entries(m.versions)) {
      mkdirSync(path.join(mdir, v), { recursive: true });
      writeFileSync(path.join(mdir, v, 'model.onnx'), bytes);
    }
    for (const [f, text] of Object.entries(m.files ?? {})) writeFileSync(path.join(mdir, f), text);
  }
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** OUTPUT0 = INPUT0 * k (INT32, [batch, 4]); versions of one model differ by k. */
export function scaleModel(k: number): Uint8Array {
  const g = new GraphBuilder(`scale_${k}`);
  g.input('INPUT0', 'int32', ['batch', 4]);
  const c = g.initializer('k', 'int32', [1], Int32Array.of(k));
  g.op('Mul', ['INPUT0', c], {}, 'OUTPUT0');
  g.output('OUTPUT0', 'int32', ['batch', 4]);
  return g.encode();
}

export function scaleConfig(name: string, versionPolicy = ''): string {
  return `name: "${name}"
backend: "onnxruntime"
max_batch_size: 8
${versionPolicy}
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
}

/** OUTPUT = transpose of INPUT over the last two axes (INT32, model shape [batch, 4, 4]). */
export function transposeModel(): Uint8Array {
  const g = new GraphBuilder('transpose');
  g.input('INPUT', 'int32', ['batch', 4, 4]);
  g.op('Transpose', ['INPUT'], { perm: [0, 2, 1] }, 'OUTPUT');
  g.output('OUTPUT', 'int32', ['batch', 4, 4]);
  return g.encode();
}

/**
 * A single-thread image classifier with `instances` instances (default one): a batch of 16 takes
 * ~100+ ms, long enough to keep an instance busy while a test queues, cancels or times out other
 * requests. `extraConfig` is appended to its config.pbtxt (e.g. a dynamic_batching section).
 */
export function slowClassifier(name: string, onnx: Uint8Array, extraConfig = '', instances = 1): FixtureModel {
  return {
    name,
    config: `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 11 ] } ]
instance_group [ { count: ${instances} kind: KIND_CPU } ]
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
${extraConfig}`,
    versions: { 1: onnx },
  };
}
