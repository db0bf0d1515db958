// src/backends/onnxruntime/signature.ts reads a model's inputs and outputs from the ONNX bytes,
// before any session exists. It must agree with what ONNX Runtime itself reports for the same file.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { sessionSignature } from '../../src/backends/onnxruntime/session_signature.js';
import { parseOnnxSignature, readOnnxSignature } from '../../src/backends/onnxruntime/signature.js';
import { GraphBuilder } from '../../tools/onnx/builder.js';
import { weightsListedAsInputs } from '../helpers/onnx_models.js';

const REPO = path.resolve(import.meta.dirname, '..', '..', 'model_repository');

async function expectSameAsOrt(bytes: Uint8Array): Promise<void> {
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 });
  try {
    const sig = parseOnnxSignature(bytes);
    expect(sig.inputs).toEqual(sessionSignature(session.inputMetadata));
    expect(sig.outputs).toEqual(sessionSignature(session.outputMetadata));
  } finally {
    await session.release();
  }
}

describe('parseOnnxSignature', () => {
  // Every bundled ONNX model (Python models and ensembles have no model.onnx).
  const onnxModels = readdirSync(REPO).filter((name) => existsSync(path.join(REPO, name, '1', 'model.onnx')));
  it.each(onnxModels)('agrees with ONNX Runtime on the bundled model %s', async (name) => {
    await expectSameAsOrt(readFileSync(path.join(REPO, name, '1', 'model.onnx')));
  });

  it('reads symbolic dimensions as -1 and every element type ORT names', async () => {
    const g = new GraphBuilder('types');
    g.input('A', 'float16', ['batch', 3]);
    g.input('B', 'uint64', [2, 'n']);
    g.op('Identity', ['A'], {}, 'A_OUT');
    g.op('Identity', ['B'], {}, 'B_OUT');
    g.output('A_OUT', 'float16', ['batch', 3]);
    g.output('B_OUT', 'uint64', [2, 'n']);
    const bytes = g.encode();
    expect(parseOnnxSignature(bytes).inputs).toEqual([
      { name: 'A', datatype: 'FP16', rawType: 'float16', dims: [-1, 3] },
      { name: 'B', datatype: 'UINT64', rawType: 'uint64', dims: [2, -1] },
    ]);
    await expectSameAsOrt(bytes);
  });

  it('leaves out graph inputs that are initializers (IR < 4 models list weights as inputs)', async () => {
    const bytes = weightsListedAsInputs('weights');
    expect(parseOnnxSignature(bytes).inputs.map((i) => i.name)).toEqual(['X']);
    await expectSameAsOrt(bytes);
  });

  it('refuses a file that is not an ONNX model, naming it', async () => {
    const dir = path.join(REPO, '..', 'package.json');
    await expect(readOnnxSignature(dir)).rejects.toThrow(/package\.json is not a valid ONNX model/);
    await expect(readOnnxSignature('/nonexistent/model.onnx')).rejects.toThrow('model file /nonexistent/model.onnx does not exist');
  });
});
