/**
 * Generates Serval's bundled example model repository (Triton layout):
 *
 *   <out>/<model>/config.pbtxt
 *   <out>/<model>/1/model.onnx
 *   <out>/image_classifier/labels.txt
 *
 * Usage: node dist/tools/gen_models.js [--out model_repository] [--only name,name]
 *
 * The ONNX files are written with protobufjs (tools/onnx/builder.ts); weights
 * come from a seeded PRNG, so regenerating gives byte-identical files.
 * Model definitions live in tools/onnx/models.ts.
 */
import { statSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { generateModels } from './onnx/models.js';

export function parseArgs(argv: readonly string[]): { out: string; only?: string[] } {
  let out = 'model_repository';
  let only: string[] | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--out' || a === '-o') out = value();
    else if (a.startsWith('--out=')) out = a.slice(6);
    else if (a === '--only') only = value().split(',').filter(Boolean);
    else if (a === '--help' || a === '-h') {
      console.log('usage: gen-models [--out DIR] [--only name[,name...]]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return only ? { out, only } : { out };
}

function main(): void {
  const { out, only } = parseArgs(process.argv.slice(2));
  const outDir = resolve(out);
  let total = 0;
  for (const p of generateModels(outDir, only)) {
    const size = statSync(p).size;
    total += size;
    console.log(`${String(size).padStart(10)}  ${relative(process.cwd(), p)}`);
  }
  console.log(`${String(total).padStart(10)}  total`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    main();
  } catch (e) {
    console.error(`gen-models: ${(e as Error).message}`);
    process.exit(1);
  }
}
