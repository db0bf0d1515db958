// src/config/resolve.ts: raw config + the model file's signature → the resolved config. Every
// check of a config happens here, before any instance starts; the raw config is never changed.
import { describe, expect, it } from 'vitest';
import { type BackendFacts, resolveConfig } from '../../src/config/resolve.js';
import type { PlacedInstances } from '../../src/config/resolved.js';
import type { ModelSignature } from '../../src/config/signature.js';
import type { ModelConfig } from '../../src/config/types.js';
import { ServalError } from '../../src/kernel/errors.js';
import { expectServalError } from '../helpers/errors.js';
import { signatureOf } from '../helpers/resolve.js';
import { simpleConfig } from '../helpers/simple.js';

const backend = (place?: (c: ModelConfig) => PlacedInstances<string>): BackendFacts<string> => ({
  name: 'onnxruntime',
  platforms: ['onnxruntime_onnx'],
  defaultModelFilename: 'model.onnx',
  placeInstances:
    place ??
    ((c) => ({
      groups: [{ name: `${c.name}_0`, kind: 'KIND_CPU', count: 2 }],
      placements: [
        { name: `${c.name}_0_0`, kind: 'KIND_CPU', deviceId: -1 },
        { name: `${c.name}_0_1`, kind: 'KIND_CPU', deviceId: -1 },
      ],
      settings: 'threads=1',
    })),
});

/** `simple` named by its folder (no name of its own), with a label file for OUTPUT0. */
function simple(): ModelConfig {
  const { name: _, ...config } = simpleConfig();
  config.output![0]!.label_filename = 'labels.txt';
  return config;
}

function resolve(config: ModelConfig, signature: ModelSignature = signatureOf(config), folderName = 'm') {
  return resolveConfig(config, { folderName, backend: backend(), signature, labels: new Map([['labels.txt', ['a', 'b']]]) });
}

function resolveError(config: ModelConfig, signature?: ModelSignature, folderName?: string): ServalError {
  return expectServalError(() => resolve(config, signature, folderName));
}

describe('resolveConfig', () => {
  it('fills Triton defaults and describes every tensor once, without touching the raw config', () => {
    const raw = simple();
    const before = structuredClone(raw);
    const r = resolve(raw);
    expect(raw).toStrictEqual(before);
    expect(r).toMatchObject({
      name: 'm',
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      maxBatchSize: 8,
      defaultModelFilename: 'model.onnx',
    });
    expect(r.inputs.map((t) => [t.name, t.index, t.datatype, t.dims, t.modelDims, t.reshaped, t.optional])).toEqual([
      ['INPUT0', 0, 'INT32', [16], [16], false, false],
      ['INPUT1', 1, 'INT32', [16], [16], false, false],
    ]);
    expect(r.outputByName.get('OUTPUT0')?.labels).toEqual(['a', 'b']);
    expect(r.outputByName.get('OUTPUT1')?.labels).toBeUndefined();
    expect(r.instances.map((p) => p.name)).toEqual(['m_0_0', 'm_0_1']);
    expect(r.instanceSettings).toBe('threads=1');
    expect(r.batching).toMatchObject({ maxBatchSize: 8, dynamic: false, queue: { levels: 1, defaultLevel: 1 } });
  });

  it('keeps the completed config in Triton JSON form, with the backend’s instance groups', () => {
    const r = resolve({ ...simple(), dynamic_batching: { max_queue_delay_microseconds: 100 } });
    expect(r.json).toMatchObject({
      name: 'm',
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      max_batch_size: 8,
      default_model_filename: 'model.onnx',
      version_policy: { latest: { num_versions: 1 } },
      instance_group: [{ name: 'm_0', kind: 'KIND_CPU', count: 2 }],
      // Triton's normalisation: no preferred sizes means max_batch_size.
      dynamic_batching: { preferred_batch_size: [8], max_queue_delay_microseconds: 100 },
    });
    expect(r.batching.maxQueueDelayNs).toBe(100_000);
  });

  it('applies reshape: clients see dims, the model sees the reshape', () => {
    const cfg: ModelConfig = {
      max_batch_size: 4,
      input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [6, -1], reshape: { shape: [2, 3, -1] } }],
      output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [1], reshape: { shape: [] } }],
    };
    const r = resolve(cfg);
    expect(r.inputs[0]).toMatchObject({ dims: [6, -1], modelDims: [2, 3, -1], reshaped: true });
    expect(r.outputs[0]).toMatchObject({ dims: [1], modelDims: [], reshaped: true });
  });

  it.each<[string, (c: ModelConfig) => void, string, string?]>([
    [
      'a config name that is not the folder',
      (c) => (c.name = 'other'),
      "unexpected directory name 'm' for model 'other', directory name must equal model name",
    ],
    ['a negative max_batch_size', (c) => (c.max_batch_size = -1), "'max_batch_size' must be non-negative value for m"],
    ['an input without a name', (c) => (c.input![0]!.name = ''), "model input must specify 'name' for m"],
    ['a duplicate output', (c) => (c.output![1]!.name = 'OUTPUT0'), "model 'm': output 'OUTPUT0' is declared more than once"],
    [
      'an unsupported data type',
      (c) => (c.input![0]!.data_type = 'TYPE_BF16'),
      "model 'm': input 'INPUT0' has unsupported data_type TYPE_BF16",
    ],
    [
      'a zero dimension',
      (c) => (c.input![1]!.dims = [0]),
      "model input 'INPUT1' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m",
    ],
    [
      'a reshape of another size',
      (c) => (c.input![0]!.reshape = { shape: [4, 5] }),
      "model input 'INPUT0' has different size for dims and reshape for m",
    ],
    [
      'dynamic batching without batching',
      (c) => Object.assign(c, { max_batch_size: 0, dynamic_batching: {} }),
      "model 'm': dynamic batching requires max_batch_size > 0",
    ],
    [
      'a preferred size over max_batch_size',
      (c) => (c.dynamic_batching = { preferred_batch_size: [4, 16] }),
      'dynamic batching preferred size must be <= max batch size for m',
    ],
    [
      'per-level policies without levels',
      (c) => (c.dynamic_batching = { priority_queue_policy: { '1': {} } }),
      "model 'm': priority_queue_policy requires priority_levels > 0",
    ],
    [
      'a default level out of range',
      (c) => (c.dynamic_batching = { priority_levels: 2, default_priority_level: 3 }),
      'default priority level must be in range [1, 2] for m',
    ],
    [
      'a policy for a level that does not exist',
      (c) => (c.dynamic_batching = { priority_levels: 2, default_priority_level: 1, priority_queue_policy: { '5': {} } }),
      'priority queue policy must have priority level in range [1, 2] for m',
    ],
    [
      'ensemble scheduling on a platform other than ensemble',
      (c) => (c.ensemble_scheduling = {}),
      "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble",
    ],
  ])('refuses %s', (_what, edit, message, code = 'INVALID_ARG') => {
    const good = simple();
    const cfg = simple();
    edit(cfg);
    const e = resolveError(cfg, signatureOf(good));
    expect([e.code, e.message]).toEqual([code, message]);
  });

  it('refuses a label file the caller did not read', () => {
    const cfg = simple();
    cfg.output![1]!.label_filename = 'missing.txt';
    expect(resolveError(cfg).message).toBe("model 'm': label file 'missing.txt' of output 'OUTPUT1' was not read");
  });

  it('checks the config against the model file', () => {
    const sig = signatureOf(simple());
    const named = (edit: (s: ModelSignature) => void): ModelSignature => {
      const s = structuredClone(sig);
      edit(s);
      return s;
    };
    expect(
      resolveError(
        simple(),
        named((s) => (s.inputs[1]!.name = 'B')),
      ).message,
    ).toBe("unexpected inference input 'INPUT1', allowed inputs are: B, INPUT0");
    expect(
      resolveError(
        simple(),
        named((s) => Object.assign(s.outputs[0]!, { datatype: 'FP32' })),
      ).message,
    ).toBe("unable to load model 'm', configuration expects datatype TYPE_INT32 for output 'OUTPUT0', model provides TYPE_FP32");
    expect(
      resolveError(
        simple(),
        named((s) => Object.assign(s.outputs[0]!, { datatype: undefined, rawType: 'bfloat16' })),
      ).message,
    ).toBe("unable to load model 'm', configuration expects datatype TYPE_INT32 for output 'OUTPUT0', model provides TYPE_INVALID");
    expect(
      resolveError(
        simple(),
        named((s) => (s.inputs[0]!.dims = [-1, 8])),
      ).message,
    ).toBe(
      "model 'm', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,8]) but the model configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [-1,16])",
    );
    // A fixed batch dimension smaller than max_batch_size cannot hold a full batch.
    expect(
      resolveError(
        simple(),
        named((s) => (s.inputs[0]!.dims = [4, 16])),
      ).message,
    ).toBe(
      "model 'm', tensor 'INPUT0': for the model to support batching the shape should have at least 1 dimension and the first dimension must be -1; but shape expected by the model is [4,16]",
    );
    expect(
      resolveError(
        { ...simple(), max_batch_size: 0 },
        named((s) => (s.inputs[0]!.dims = [16, 1])),
      ).message,
    ).toBe(
      "model 'm', tensor 'INPUT0': the model expects 2 dimensions (shape [16,1]) but the model configuration specifies 1 dimensions (shape [16])",
    );
    expect(
      resolveError(
        simple(),
        named((s) => s.inputs.push({ name: 'EXTRA', datatype: 'INT32', rawType: 'int32', dims: [-1] })),
      ).message,
    ).toBe("unable to load model 'm', configuration expects 2 inputs, model provides 3");
    // Unknown rank (no shape in the file): only names and types are checked.
    expect(
      resolve(
        simple(),
        named((s) => (s.inputs[0]!.dims = undefined)),
      ).name,
    ).toBe('m');
  });

  it('runs the backend placement on the completed config and lets its refusal through', () => {
    const refusing = backend(() => {
      throw ServalError.invalidArg("instance group 'g' of model 'm' has kind KIND_GPU, but this machine has no visible CUDA GPU");
    });
    expect(() =>
      resolveConfig(simple(), {
        folderName: 'm',
        backend: refusing,
        signature: signatureOf(simple()),
        labels: new Map([['labels.txt', []]]),
      }),
    ).toThrow('no visible CUDA GPU');
  });
});
