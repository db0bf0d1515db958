// A large ONNX file's signature is read at positions (field headers, names, the inputs' and
// outputs' own bytes) instead of whole: the same answer as reading it whole, the same errors.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseOnnxSignature, readOnnxSignature } from '../../src/backends/onnxruntime/signature.js';
import { projectRoot } from '../../src/kernel/paths.js';
import { weightsListedAsInputs } from '../helpers/onnx_models.js';

const REPO = path.join(projectRoot(), 'model_repository');

describe('readOnnxSignature at positions', () => {
  it('gives every bundled model the signature the whole-file parser gives', async () => {
    const models = readdirSync(REPO).filter((m) => {
      try {
        return readdirSync(path.join(REPO, m, '1')).includes('model.onnx');
      } catch {
        return false;
      }
    });
    expect(models.length).toBeGreaterThan(5);
    for (const m of models) {
      const file = path.join(REPO, m, '1', 'model.onnx');
      expect(await readOnnxSignature(file, file, 0)).toEqual(parseOnnxSignature(readFileSync(file)));
    }
  });

  it('skips initializers, sparse ones included, listed among the inputs', async () => {
    const bytes = weightsListedAsInputs('mm');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-sig-'));
    const file = path.join(dir, 'model.onnx');
    writeFileSync(file, bytes);
    try {
      const sig = await readOnnxSignature(file, 'mm.onnx', 0);
      expect(sig.inputs.map((i) => i.name)).toEqual(['X']);
      expect(sig).toEqual(parseOnnxSignature(bytes));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a file that is not an ONNX model, naming it, as the whole-file reader does', async () => {
    const file = path.join(projectRoot(), 'package.json');
    await expect(readOnnxSignature(file, 'package.json', 0)).rejects.toThrow(/^package\.json is not a valid ONNX model/);
  });
});
