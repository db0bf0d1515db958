// A small in-process backend for tests: it proves the backend seam (it plugs in through the
// registry alone, like any backend) and lets front-end and core tests run without ONNX Runtime
// workers. A model is a `model.json` describing its tensors and one operation, computed in JS on
// the main thread:
//   { "inputs": [{ "name", "datatype", "dims" }], "outputs": [...], "op": "add_sub" | "identity",
//     "delayMs"?: number }
// add_sub: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (INT32 or FP32, like Triton's
// "simple"); identity: output i is input i. A batch dimension is -1 first when the model batches.
import { readFile } from 'node:fs/promises';
import type { Backend, ExecResult, Execution, ModelInstance, Reservation } from '../../src/backends/backend.js';
import type { InstancePlacement } from '../../src/config/resolved.js';
import type { IoSignature, ModelSignature } from '../../src/config/signature.js';
import type { DataType as ConfigDataType, ModelConfig } from '../../src/config/types.js';
import { isDataType, toConfigType, typedView } from '../../src/kernel/datatypes.js';
import { ServalError } from '../../src/kernel/errors.js';

export interface TestModelFile {
  inputs: IoSignature[];
  outputs: IoSignature[];
  op: 'add_sub' | 'identity';
  /** Milliseconds each execution takes (a timer, not CPU), to hold executions in flight. */
  delayMs?: number;
}

interface Settings {
  op: TestModelFile['op'];
  delayMs: number;
}

/** Every execution the test backend ran, across instances: [instance name, batch dims of input 0]. */
export const executions: [string, number[]][] = [];

/** When each execution ran (performance.now() ms), across instances: for tests of overlap. */
export const spans: { instance: string; start: number; end: number }[] = [];

class TestInstance implements ModelInstance {
  readonly capacity = 1;
  private busy = false;
  private closed = false;

  constructor(
    readonly placement: InstancePlacement,
    private readonly settings: Settings,
  ) {}

  reserve(byteLength: number): Reservation {
    if (this.closed) throw ServalError.internal(`instance ${this.placement.name} is closed`);
    if (this.busy) throw ServalError.internal(`instance ${this.placement.name} is busy`);
    this.busy = true;
    const buffer = new Uint8Array(byteLength);
    let open = true;
    return {
      buffer,
      execute: (layout): Execution => {
        if (!open) throw ServalError.internal('reservation used twice');
        open = false;
        const result = this.run(buffer, layout.inputs, layout.outputs).finally(() => {
          this.busy = false;
        });
        return { result, held: false, withdraw: () => false };
      },
      release: () => {
        if (open) this.busy = open = false;
      },
    };
  }

  private async run(buffer: Uint8Array, inputs: Parameters<Reservation['execute']>[0]['inputs'], outputs: string[]): Promise<ExecResult> {
    const start = performance.now();
    if (this.settings.delayMs > 0) await new Promise((r) => setTimeout(r, this.settings.delayMs));
    else await Promise.resolve();
    spans.push({ instance: this.placement.name, start, end: performance.now() });
    executions.push([this.placement.name, [...(inputs[0]?.dims ?? [])]]);
    const bytes = inputs.map((t) => buffer.slice(t.offset, t.offset + t.byteLength));
    const produced = new Map<string, Uint8Array>();
    if (this.settings.op === 'add_sub') {
      const [a, b] = inputs.map((t, i) => typedView(t.datatype as 'INT32', bytes[i]!)) as [Int32Array, Int32Array];
      const Ctor = a.constructor as Int32ArrayConstructor;
      const sum = new Ctor(a.length);
      const diff = new Ctor(a.length);
      for (let i = 0; i < a.length; i++) {
        sum[i] = a[i]! + b[i]!;
        diff[i] = a[i]! - b[i]!;
      }
      produced.set('OUTPUT0', new Uint8Array(sum.buffer));
      produced.set('OUTPUT1', new Uint8Array(diff.buffer));
    } else {
      for (const [i, b] of bytes.entries()) produced.set(`OUTPUT${i}`, b);
    }
    const first = inputs[0]!;
    return {
      outputs: outputs.map((name) => {
        const data = produced.get(name);
        if (!data) throw ServalError.internal(`test model has no output '${name}'`);
        return { name, datatype: first.datatype, dims: [...first.dims], data };
      }),
      computeInputNs: 1000,
      computeInferNs: 2000,
      computeOutputNs: 3000,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

async function readModel(modelPath: string): Promise<TestModelFile> {
  let doc: TestModelFile;
  try {
    doc = JSON.parse(await readFile(modelPath, 'utf8')) as TestModelFile;
  } catch (e) {
    throw ServalError.invalidArg(`cannot read test model ${modelPath}: ${(e as Error).message}`);
  }
  for (const t of [...doc.inputs, ...doc.outputs]) {
    if (!isDataType(t.datatype))
      throw ServalError.invalidArg(`test model ${modelPath}: tensor '${t.name}' has datatype ${String(t.datatype)}`);
    t.rawType = t.datatype;
  }
  return doc;
}

export const testBackend: Backend<Settings> = {
  name: 'serval_test',
  platforms: [],
  displayName: 'test',
  defaultModelFilename: 'model.json',
  async readSignature(files): Promise<ModelSignature> {
    const doc = await readModel(files.modelPath);
    return { inputs: doc.inputs, outputs: doc.outputs };
  },
  autoComplete(config: ModelConfig, signature: ModelSignature): ModelConfig {
    const out = structuredClone(config);
    const batching = (out.max_batch_size ?? 0) > 0;
    const tensor = (s: IoSignature) => ({
      name: s.name,
      data_type: toConfigType(s.datatype!) as ConfigDataType,
      dims: (s.dims ?? []).slice(batching ? 1 : 0),
    });
    if (!out.input?.length) out.input = signature.inputs.map(tensor);
    if (!out.output?.length) out.output = signature.outputs.map(tensor);
    return out;
  },
  placeInstances(config) {
    const groups = (config.instance_group?.length ? config.instance_group : [{}]).map((g, i) => ({
      ...g,
      name: g.name || `${config.name}_${i}`,
      kind: 'KIND_CPU' as const,
      count: g.count ?? 1,
    }));
    const placements = groups.flatMap((g) =>
      Array.from({ length: g.count }, (_, c): InstancePlacement => ({ name: `${g.name}_${c}`, kind: 'KIND_CPU', deviceId: -1 })),
    );
    if (!placements.length) throw ServalError.invalidArg(`model '${config.name}' has no model instances`);
    return { groups, placements, settings: { op: 'add_sub', delayMs: 0 } };
  },
  async startInstance(placement, settings, files) {
    const doc = await readModel(files.modelPath);
    return new TestInstance(placement, { ...settings, op: doc.op, delayMs: doc.delayMs ?? 0 });
  },
};
