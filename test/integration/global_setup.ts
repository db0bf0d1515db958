// Runs once before the integration files: checks that the server is built and generates the
// example model repository (the same deterministic generator as tools/gen_models.ts) into a
// temporary folder, so the tests never depend on the state of model_repository/ in the tree.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { generateModels } from '../../tools/onnx/models.js';
import { CLI, WORKER } from '../helpers/paths.js';

declare module 'vitest' {
  export interface ProvidedContext {
    modelRepository: string;
  }
}

export default function setup(project: TestProject): () => void {
  for (const f of [CLI, WORKER]) {
    if (!existsSync(f)) {
      throw new Error(`${f} is missing: build the server first (npm run build, or npm test which builds)`);
    }
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-models-'));
  generateModels(dir);
  project.provide('modelRepository', dir);
  return () => rmSync(dir, { recursive: true, force: true });
}
