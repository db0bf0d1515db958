// Every config check Triton makes, with Triton's text (src/config/validate_config.ts through
// resolveConfig): the table in docs/config_checks.md names these cases by their first column.
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/config/types.js';
import { validateIo, validateModelConfig } from '../../src/config/validate_config.js';
import { expectServalError } from '../helpers/errors.js';
import { resolveForTest, signatureOf } from '../helpers/resolve.js';
import { simpleConfig } from '../helpers/simple.js';

/** `simple`, named as its folder `m`, edited; resolved against a model file that matches the unedited config. */
function resolveError(edit: (c: ModelConfig) => void): { code: string; message: string } {
  const good = { ...simpleConfig(), name: 'm' };
  const cfg = structuredClone(good);
  edit(cfg);
  const e = expectServalError(() => resolveForTest(cfg, { folderName: 'm', signature: signatureOf(good) }));
  return { code: e.code, message: e.message };
}

const input0 = (c: ModelConfig) => c.input![0]!;
const output0 = (c: ModelConfig) => c.output![0]!;

describe('Triton model-config checks, with Triton texts', () => {
  it.each<[string, (c: ModelConfig) => void, string]>([
    ['max_batch_size', (c) => (c.max_batch_size = -2), "'max_batch_size' must be non-negative value for m"],
    [
      'preferred_positive',
      (c) => (c.dynamic_batching = { preferred_batch_size: [0] }),
      'dynamic batching preferred size must be positive for m',
    ],
    [
      'preferred_max',
      (c) => (c.dynamic_batching = { preferred_batch_size: [2, 9] }),
      'dynamic batching preferred size must be <= max batch size for m',
    ],
    [
      'default_priority_level',
      (c) => (c.dynamic_batching = { priority_levels: 3 }),
      'default priority level must be in range [1, 3] for m',
    ],
    [
      'priority_queue_policy_level',
      (c) => (c.dynamic_batching = { priority_levels: 2, default_priority_level: 1, priority_queue_policy: { '3': {} } }),
      'priority queue policy must have priority level in range [1, 2] for m',
    ],
    [
      'preserve_ordering_levels',
      (c) => (c.dynamic_batching = { priority_levels: 2, default_priority_level: 1, preserve_ordering: true }),
      "Only one priority level is allowed when 'preserve_ordering' is true for m",
    ],
    [
      'preserve_ordering_delay',
      (c) =>
        (c.dynamic_batching = {
          preserve_ordering: true,
          default_queue_policy: { timeout_action: 'DELAY', default_timeout_microseconds: 100 },
        }),
      "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m",
    ],
    [
      'cache_sequence',
      (c) => Object.assign(c, { sequence_batching: {}, response_cache: { enable: true } }),
      'Response Cache does not currently support model m with sequence batching scheduler. Please disable the response cache.',
    ],
    [
      'ensemble_platform',
      (c) => (c.ensemble_scheduling = { step: [] }),
      "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble",
    ],
    ['directory_name', (c) => (c.name = 'other'), "unexpected directory name 'm' for model 'other', directory name must equal model name"],
    ['io_name', (c) => (input0(c).name = ''), "model input must specify 'name' for m"],
    ['io_data_type', (c) => delete input0(c).data_type, "model input 'INPUT0' must specify 'data_type' for m"],
    ['io_dims', (c) => (output0(c).dims = []), "model output 'OUTPUT0' must specify 'dims' for m"],
    [
      'io_empty_reshape',
      (c) => Object.assign(c, { max_batch_size: 0, input: [{ ...input0(c), dims: [1], reshape: { shape: [] } }] }),
      "model input 'INPUT0' cannot have empty reshape for non-batching model as scalar tensors are not supported for m",
    ],
    [
      'io_dim',
      (c) => (input0(c).dims = [0]),
      "model input 'INPUT0' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m",
    ],
    [
      'io_reshape_dim',
      (c) => (input0(c).reshape = { shape: [-2, 8] }),
      "model input 'INPUT0' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension for m",
    ],
    [
      'io_reshape_size',
      (c) => (output0(c).reshape = { shape: [4, 5] }),
      "model output 'OUTPUT0' has different size for dims and reshape for m",
    ],
    [
      'io_reshape_wildcards',
      (c) => Object.assign(input0(c), { dims: [4, -1], reshape: { shape: [-1, 4, -1] } }),
      "model input 'INPUT0' has different number of variable-size dimensions for dims and reshape for m",
    ],
    [
      'io_reshape_runs',
      (c) => Object.assign(input0(c), { dims: [2, 4, -1, 6], reshape: { shape: [4, -1, 12] } }),
      "model input 'INPUT0' has different size for dims and reshape for m",
    ],
    ['io_format', (c) => (input0(c).format = 'FORMAT_NCHW'), 'model input NHWC/NCHW require 3 dims for m'],
    ['io_shape_tensor', (c) => (output0(c).is_shape_tensor = true), 'shape tensors are only supported for TensorRT platform for m'],
    [
      'io_non_linear',
      (c) => (input0(c).is_non_linear_format_io = true),
      'Non-linear IO format is only supported for the TensorRT platform for m',
    ],
  ])('%s', (_id, edit, message) => {
    expect(resolveError(edit)).toEqual({ code: 'INVALID_ARG', message });
  });

  it('accepts what Triton accepts: reshapes whose fixed runs match, and an empty reshape of [1] when batching', () => {
    const cfg: ModelConfig = {
      name: 'm',
      max_batch_size: 4,
      input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [2, 4, -1, 6], reshape: { shape: [8, -1, 1, 6] } }],
      output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [1], reshape: { shape: [] } }],
    };
    expect(resolveForTest(cfg, { folderName: 'm' }).inputs[0]!.modelDims).toEqual([8, -1, 1, 6]);
  });

  it("checks in Triton's order: model level first, the folder name last of those, then the tensors", () => {
    // Two problems at once: the one Triton meets first is the one reported.
    expect(
      resolveError((c) => {
        c.name = 'other';
        c.max_batch_size = -1;
      }).message,
    ).toBe("'max_batch_size' must be non-negative value for other");
    expect(
      resolveError((c) => {
        input0(c).dims = [0];
        c.dynamic_batching = { preferred_batch_size: [99] };
      }).message,
    ).toBe('dynamic batching preferred size must be <= max batch size for m');
    expect(
      resolveError((c) => {
        input0(c).dims = [0];
        c.name = 'other';
      }).message,
    ).toBe("unexpected directory name 'm' for model 'other', directory name must equal model name");
  });

  it('model-level checks need neither the model file nor the tensors (the repository runs them before versions)', () => {
    const cfg: ModelConfig = { name: 'm', max_batch_size: 2, dynamic_batching: { preferred_batch_size: [4] } };
    const e = expectServalError(() => validateModelConfig(cfg, 'm'));
    expect(e.message).toBe('dynamic batching preferred size must be <= max batch size for m');
    // A config without a name takes the folder's.
    expect(() => validateModelConfig({ max_batch_size: 0 }, 'm')).not.toThrow();
  });

  it("checks the batch inputs and outputs last among the tensors, in ValidateBatchIO's order (what runs before versions with auto-complete off)", () => {
    const io = (edit: (c: ModelConfig) => void): string => {
      const cfg: ModelConfig = { ...simpleConfig(), name: 'm' };
      edit(cfg);
      return expectServalError(() => validateIo(cfg, 'm'), 'INVALID_ARG').message;
    };
    const badInput = { kind: 'BATCH_ELEMENT_COUNT' as const, target_name: ['N'], data_type: 'TYPE_INT32' as const, source_input: ['NOPE'] };
    expect(io((c) => (c.batch_input = [badInput]))).toBe("unknown source input name 'NOPE' for m");
    // A tensor problem is reported before a batch-input one.
    expect(
      io((c) => {
        c.batch_input = [badInput];
        output0(c).dims = [0];
      }),
    ).toMatch(/^model output 'OUTPUT0' dimension must be integer >= 1/);
    // Data type before the source name; every batch input before any batch output.
    expect(
      io((c) => {
        c.batch_output = [{ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['NOPE'], source_input: ['INPUT0'] }];
        c.batch_input = [{ ...badInput, data_type: 'TYPE_FP16' }];
      }),
    ).toBe('batch input data type must be TYPE_INT32 or TYPE_FP32 for m');
    expect(
      io(
        (c) =>
          (c.batch_output = [{ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['OUTPUT0', 'OUTPUT0'], source_input: ['INPUT0'] }]),
      ),
    ).toBe("target output name 'OUTPUT0' can only be specified once for m");
    expect(io((c) => (c.batch_output = [{ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['X'], source_input: ['Y'] }]))).toBe(
      "unknown source input name 'Y' for m",
    );
  });

  it("fills preferred_batch_size with max_batch_size when none is given, as Triton's normalisation does", () => {
    const r = resolveForTest({ ...simpleConfig(), dynamic_batching: {} }, { folderName: 'simple' });
    expect(r.batching.preferredBatchSizes).toEqual([8]);
    expect((r.json.dynamic_batching as { preferred_batch_size: number[] }).preferred_batch_size).toEqual([8]);
    const given = resolveForTest({ ...simpleConfig(), dynamic_batching: { preferred_batch_size: [2, 4] } }, { folderName: 'simple' });
    expect(given.batching.preferredBatchSizes).toEqual([2, 4]);
  });
});
