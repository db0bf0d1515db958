/**
 * Measures onnxruntime-node throughput of an ONNX model with float32 inputs
 * whose first dimension is the batch (symbolic) dimension, e.g. the bundled
 * image_classifier / ranker_mlp or gen-resnet50's output.
 *
 * Usage:
 *   node dist/tools/bench_onnx.js MODEL.onnx [--batch 1,32] [--threads 2]
 *        [--seconds 5] [--warmup 10] [--optimized-ops]
 *        [--opt-level disabled|basic|extended|all]
 *
 * --optimized-ops also lists the op types of the graph after ONNX Runtime's
 * optimizations (dumped via optimizedModelFilePath), e.g. to check that Cast
 * nodes on float16 initializers were constant-folded away.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { modelProtoType } from './onnx/builder.js';

interface Args {
  model: string;
  batches: number[];
  threads: number;
  seconds: number;
  warmup: number;
  optimizedOps: boolean;
  optLevel: 'disabled' | 'basic' | 'extended' | 'all';
}

function parseArgs(argv: readonly string[]): Args {
  const a: Args = { model: '', batches: [1], threads: 2, seconds: 5, warmup: 10, optimizedOps: false, optLevel: 'all' };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    const v = (): string => {
      const x = argv[++i];
      if (x === undefined) throw new Error(`${k} needs a value`);
      return x;
    };
    if (k === '--batch') a.batches = v().split(',').map(Number);
    else if (k === '--threads') a.threads = Number(v());
    else if (k === '--seconds') a.seconds = Number(v());
    else if (k === '--warmup') a.warmup = Number(v());
    else if (k === '--optimized-ops') a.optimizedOps = true;
    else if (k === '--opt-level') {
      const l = v();
      if (l !== 'disabled' && l !== 'basic' && l !== 'extended' && l !== 'all') throw new Error(`bad --opt-level ${l}`);
      a.optLevel = l;
    } else if (!k.startsWith('-') && !a.model) a.model = k;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.model) throw new Error('usage: bench-onnx MODEL.onnx [--batch 1,32] [--threads 2] [--seconds 5]');
  return a;
}

/** Op-type histogram of an ONNX file. */
export function opHistogram(bytes: Uint8Array): Record<string, number> {
  const m = modelProtoType().decode(bytes) as unknown as { graph?: { node?: { opType?: string }[] } };
  const h: Record<string, number> = {};
  for (const n of m.graph?.node ?? []) h[n.opType ?? '?'] = (h[n.opType ?? '?'] ?? 0) + 1;
  return h;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const opts: ort.InferenceSession.SessionOptions = {
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: args.optLevel,
    executionMode: 'sequential',
  };
  let tmp: string | undefined;
  if (args.optimizedOps) {
    tmp = mkdtempSync(join(tmpdir(), 'bench-onnx-'));
    opts.optimizedModelFilePath = join(tmp, 'optimized.onnx');
  }
  const t0 = performance.now();
  const session = await ort.InferenceSession.create(args.model, opts);
  const loadMs = performance.now() - t0;
  console.log(
    `${args.model}: session created in ${loadMs.toFixed(0)} ms, ${args.threads} intra-op threads, optimization level ${args.optLevel}`,
  );
  console.log(`  source ops: ${JSON.stringify(opHistogram(readFileSync(args.model)))}`);
  if (tmp) {
    console.log(`  optimized ops: ${JSON.stringify(opHistogram(readFileSync(opts.optimizedModelFilePath!)))}`);
    rmSync(tmp, { recursive: true, force: true });
  }

  for (const batch of args.batches) {
    const feeds: Record<string, ort.Tensor> = {};
    for (const meta of session.inputMetadata) {
      if (!meta.isTensor || meta.type !== 'float32') throw new Error(`input ${meta.name}: only float32 tensors supported`);
      const shape = meta.shape.map((d, i) => (i === 0 ? batch : typeof d === 'number' && d > 0 ? d : 1));
      const n = shape.reduce((x, y) => x * y, 1);
      const data = new Float32Array(n);
      for (let i = 0; i < n; i++) data[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
      feeds[meta.name] = new ort.Tensor('float32', data, shape);
    }
    for (let i = 0; i < args.warmup; i++) await session.run(feeds);
    let runs = 0;
    const times: number[] = [];
    const start = performance.now();
    while (performance.now() - start < args.seconds * 1000) {
      const s = performance.now();
      await session.run(feeds);
      times.push(performance.now() - s);
      runs++;
    }
    const elapsed = (performance.now() - start) / 1000;
    times.sort((x, y) => x - y);
    const p50 = times[Math.floor(times.length / 2)]!;
    console.log(
      `  batch ${String(batch).padStart(3)}: ${((runs * batch) / elapsed).toFixed(1).padStart(9)} items/s` +
        `  (${runs} runs, p50 ${p50.toFixed(2)} ms/run, ${(p50 / batch).toFixed(3)} ms/item)`,
    );
  }
  await session.release();
}

main().catch((e: unknown) => {
  console.error(`bench-onnx: ${(e as Error).message}`);
  process.exit(1);
});
