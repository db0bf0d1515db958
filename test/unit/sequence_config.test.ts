// sequence_batching in the resolved config (src/config/sequence_config.ts through resolveConfig):
// the policy, Triton's normalisations in the config JSON, the model-file checks of control and
// state tensors, and Triton's load-time errors.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { autoCompleteConfig } from '../../src/backends/onnxruntime/autocomplete.js';
import type { IoSignature, ModelSignature } from '../../src/config/signature.js';
import type { ModelConfig, ModelSequenceBatching } from '../../src/config/types.js';
import { validateModelConfig } from '../../src/config/validate_config.js';
import { readInitialStates, sequenceParameters } from '../../src/model/sequence_params.js';
import { expectServalError, expectServalErrorAsync } from '../helpers/errors.js';
import { resolveForTest } from '../helpers/resolve.js';
import { rawOf } from '../helpers/tensors.js';

const START = { name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START' as const, int32_false_true: [0, 1] }] };
const READY = { name: 'READY', control: [{ kind: 'CONTROL_SEQUENCE_READY' as const, fp32_false_true: [0, 1] }] };
const CORRID = { name: 'CORRID', control: [{ kind: 'CONTROL_SEQUENCE_CORRID' as const, data_type: 'TYPE_UINT64' as const }] };
const STATE = { input_name: 'S_IN', output_name: 'S_OUT', data_type: 'TYPE_FP32' as const, dims: [-1] };

function config(sb: ModelSequenceBatching, maxBatch = 8): ModelConfig {
  return {
    name: 'seq',
    platform: 'onnxruntime_onnx',
    max_batch_size: maxBatch,
    input: [{ name: 'INPUT', data_type: 'TYPE_INT32', dims: [1] }],
    output: [{ name: 'OUTPUT', data_type: 'TYPE_INT32', dims: [1] }],
    sequence_batching: sb,
  };
}

/** A model file with INPUT/OUTPUT, the given control tensors and S_IN/S_OUT (FP32 [batch, -1]). */
function signature(controls: Record<string, string>, maxBatch = 8): ModelSignature {
  const b = maxBatch > 0 ? [-1] : [];
  const t = (name: string, dt: string, dims: number[]): IoSignature => ({
    name,
    datatype: dt as 'INT32',
    rawType: dt,
    dims: [...b, ...dims],
  });
  return {
    inputs: [t('INPUT', 'INT32', [1]), ...Object.entries(controls).map(([n, dt]) => t(n, dt, [1])), t('S_IN', 'FP32', [-1])],
    outputs: [t('OUTPUT', 'INT32', [1]), t('S_OUT', 'FP32', [-1])],
  };
}

const ALL = { START: 'INT32', READY: 'FP32', CORRID: 'UINT64' };
const resolve = (sb: ModelSequenceBatching, controls: Record<string, string> = ALL, maxBatch = 8) =>
  resolveForTest(config(sb, maxBatch), { signature: signature(controls, maxBatch) });
const validateError = (sb: ModelSequenceBatching): string => expectServalError(() => validateModelConfig(config(sb), 'seq')).message;

describe('sequence_batching policy', () => {
  it('direct: one slot per batch row, controls with their false/true values, state with zero initial value', () => {
    const c = resolve({ control_input: [START, READY, CORRID], state: [STATE] });
    expect(c.sequence).toEqual({
      strategy: 'direct',
      maxSequenceIdleUs: 1_000_000,
      slotsPerInstance: 8,
      maxQueueDelayNs: 0,
      minimumSlotUtilization: 0,
      preferredBatchSizes: [],
      preserveOrdering: false,
      controls: [
        { kind: 'START', input: 'START', datatype: 'INT32', falseTrue: [0, 1] },
        { kind: 'READY', input: 'READY', datatype: 'FP32', falseTrue: [0, 1] },
        { kind: 'CORRID', input: 'CORRID', datatype: 'UINT64', falseTrue: [0, 0] },
      ],
      states: [{ inputName: 'S_IN', outputName: 'S_OUT', datatype: 'FP32', dims: [-1], initial: { kind: 'zero', dims: [1] } }],
    });
    // Triton's normalisation shows in the config endpoints: the idle default.
    expect((c.json.sequence_batching as Record<string, unknown>).max_sequence_idle_microseconds).toBe(1_000_000);
    // Clients see only the configured tensors.
    expect(c.inputs.map((t) => t.name)).toEqual(['INPUT']);
    // A model without batching still has one slot per instance.
    expect(resolve({ control_input: [START, READY, CORRID], state: [STATE] }, ALL, 0).sequence!.slotsPerInstance).toBe(1);
  });

  it('oldest: max_candidate_sequences slots, preferred_batch_size defaulting to max_batch_size', () => {
    const c = resolve({
      oldest: { max_candidate_sequences: 16, max_queue_delay_microseconds: 100, preserve_ordering: true },
      max_sequence_idle_microseconds: 5_000_000,
      control_input: [START, READY, CORRID],
      state: [STATE],
    });
    expect(c.sequence).toMatchObject({
      strategy: 'oldest',
      slotsPerInstance: 16,
      maxQueueDelayNs: 100_000,
      preferredBatchSizes: [8],
      preserveOrdering: true,
      maxSequenceIdleUs: 5_000_000,
    });
    expect((c.json.sequence_batching as { oldest: { preferred_batch_size: number[] } }).oldest.preferred_batch_size).toEqual([8]);
  });

  it('takes a bool control and an initial_state from a data file', () => {
    const c = resolve(
      {
        control_input: [{ name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', bool_false_true: [false, true] }] }],
        state: [{ ...STATE, initial_state: [{ name: 'init', data_type: 'TYPE_FP32', dims: [3], data_file: 'init.bin' }] }],
      },
      { START: 'BOOL' },
    );
    expect(c.sequence!.controls[0]).toEqual({ kind: 'START', input: 'START', datatype: 'BOOL', falseTrue: [0, 1] });
    expect(c.sequence!.states[0]!.initial).toEqual({ kind: 'file', dims: [3], file: 'init.bin' });
  });

  it('checks control and state tensors against the model file', () => {
    let e = expectServalError(() => resolve({ control_input: [START] }, {}), 'INVALID_ARG');
    expect(e.message).toContain("unexpected inference input 'START'");
    e = expectServalError(() => resolve({ control_input: [START] }, { START: 'FP32' }), 'INVALID_ARG');
    expect(e.message).toContain("configuration expects datatype TYPE_INT32 for input 'START', model provides TYPE_FP32");
    // A control the model file has but the config does not name is an undeclared input.
    e = expectServalError(() => resolve({ control_input: [START], state: [STATE] }, { START: 'INT32', END: 'INT32' }), 'INVALID_ARG');
    expect(e.message).toMatch(/configuration expects \d+ inputs, model provides \d+$/);
    e = expectServalError(() => resolve({ state: [{ ...STATE, data_type: 'TYPE_INT32' }] }, {}), 'INVALID_ARG');
    expect(e.message).toContain("configuration expects datatype TYPE_INT32 for input 'S_IN'");
  });
});

describe("sequence_batching errors (Triton's texts)", () => {
  const cases: [string, ModelSequenceBatching, string][] = [
    [
      'a control without a name',
      { control_input: [{ control: START.control }] },
      'sequence batching control tensor must have a name for seq',
    ],
    [
      'one tensor for two kinds',
      { control_input: [START, { ...READY, name: 'START' }] },
      "sequence batching control tensor 'START' is specified for multiple control kinds for seq",
    ],
    [
      'one kind twice',
      { control_input: [START, { ...START, name: 'START2' }] },
      'sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for seq',
    ],
    [
      'no false/true values',
      { control_input: [{ name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START' }] }] },
      "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_START for seq",
    ],
    [
      'two kinds of false/true values',
      {
        control_input: [
          { name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', int32_false_true: [0, 1], fp32_false_true: [0, 1] }] },
        ],
      },
      "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_START for seq",
    ],
    [
      'three false/true values',
      { control_input: [{ name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', int32_false_true: [0, 1, 2] }] }] },
      "sequence batching control 'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_START for seq",
    ],
    [
      'false/true values on CORRID',
      {
        control_input: [
          { name: 'CORRID', control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_UINT64', int32_false_true: [0, 1] }] },
        ],
      },
      "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_CORRID for seq",
    ],
    [
      'a CORRID of a float type',
      { control_input: [{ name: 'CORRID', control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_FP32' }] }] },
      'unexpected data type for control CONTROL_SEQUENCE_CORRID for seq. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING',
    ],
    [
      'a minimum slot utilization above 1',
      { direct: { minimum_slot_utilization: 1.5 } },
      'sequence batching minimum slot utilization must be in range (0.0, 1.0] for seq',
    ],
    [
      'a preferred batch size above max_batch_size',
      { oldest: { max_candidate_sequences: 4, preferred_batch_size: [16] } },
      'sequence batching preferred batch size must be <= max batch size for seq',
    ],
    [
      'a non-positive preferred batch size',
      { oldest: { max_candidate_sequences: 4, preferred_batch_size: [0] } },
      'sequence batching preferred batch size must be positive for seq',
    ],
    ['oldest without candidates', { oldest: {} }, 'sequence batching oldest strategy needs max_candidate_sequences > 0 for seq'],
    [
      'two initial states',
      { state: [{ ...STATE, initial_state: [{}, {}] }] },
      "initial_state field for state input 'S_IN' must contain exactly one or zero element. Found '2' elements.",
    ],
    [
      'an initial state of another type',
      { state: [{ ...STATE, initial_state: [{ name: 'i', data_type: 'TYPE_INT32', dims: [1], zero_data: true }] }] },
      "The data type used for 'initial_state' field of state 'S_IN' does not match the state data type.",
    ],
    [
      'an initial state without a name',
      { state: [{ ...STATE, initial_state: [{ data_type: 'TYPE_FP32', dims: [1], zero_data: true }] }] },
      "Field 'name' must be set when using initial_state for state input 'S_IN'.",
    ],
    [
      'an initial state of another rank',
      { state: [{ ...STATE, initial_state: [{ name: 'i', data_type: 'TYPE_FP32', dims: [1, 2], zero_data: true }] }] },
      "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input 'S_IN'. 2 != 1",
    ],
    [
      'an initial state with variable dims',
      { state: [{ ...STATE, initial_state: [{ name: 'i', data_type: 'TYPE_FP32', dims: [-1], zero_data: true }] }] },
      "'initial_state' field for state input name 'S_IN' contains variable dimensions.",
    ],
    [
      'an initial state that does not fit fixed dims',
      { state: [{ ...STATE, dims: [2], initial_state: [{ name: 'i', data_type: 'TYPE_FP32', dims: [3], zero_data: true }] }] },
      "'initial_state' dim for input name 'S_IN' doesn't match 'state' dim description. 3 != 2",
    ],
    [
      'an initial state without data',
      { state: [{ ...STATE, initial_state: [{ name: 'i', data_type: 'TYPE_FP32', dims: [1] }] }] },
      "initial_state setting expects state 'S_IN' to have state_data set",
    ],
    ['a state input named twice', { state: [STATE, { ...STATE, output_name: 'X' }] }, "State input name 'S_IN' specified more than once."],
  ];
  for (const [what, sb, message] of cases) {
    it(`refuses ${what}`, () => {
      const e = expectServalError(() => resolve(sb), 'INVALID_ARG');
      expect(e.message).toBe(message);
    });
  }

  // Triton's ValidateModelConfig: when the repository is polled, before any version folder.
  const pollTime = cases.slice(
    0,
    cases.findIndex(([what]) => what === 'oldest without candidates'),
  );
  it.each(pollTime)('refuses %s at poll time, with neither model file nor versions', (_what, sb, message) => {
    expect(expectServalError(() => validateModelConfig(config(sb), 'seq'), 'INVALID_ARG').message).toBe(message);
  });

  it("reports the first problem in Triton's order: kind by kind (START, END, READY, CORRID), not entry by entry", () => {
    const badEnd = { name: 'END', control: [{ kind: 'CONTROL_SEQUENCE_END' as const, int32_false_true: [0] }] };
    const badStart = { name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START' as const, fp32_false_true: [0, 1, 2] }] };
    const badCorrid = { name: 'CORRID', control: [{ kind: 'CONTROL_SEQUENCE_CORRID' as const, data_type: 'TYPE_FP32' as const }] };
    // The END entry comes first, but Triton checks every START control before any END control.
    expect(validateError({ control_input: [badCorrid, badEnd, badStart] })).toBe(
      "sequence batching control 'fp32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_START for seq",
    );
    expect(validateError({ control_input: [badCorrid, badEnd] })).toBe(
      "sequence batching control 'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_END for seq",
    );
    // A nameless entry anywhere is found while looking for START.
    expect(validateError({ control_input: [START, badEnd, { control: START.control }] })).toBe(
      'sequence batching control tensor must have a name for seq',
    );
    // The controls come before the strategy.
    expect(validateError({ control_input: [badCorrid], oldest: { preferred_batch_size: [0] } })).toMatch(
      /^unexpected data type for control/,
    );
    expect(() =>
      validateModelConfig(config({ control_input: [START, READY, CORRID], oldest: { preferred_batch_size: [8] } }), 'seq'),
    ).not.toThrow();
  });

  it('refuses control and state tensors that are also configured inputs (the batcher provides them)', () => {
    const withInput = (name: string): ModelConfig => ({
      ...config({ control_input: [START], state: [STATE] }),
      input: [
        { name: 'INPUT', data_type: 'TYPE_INT32', dims: [1] },
        { name, data_type: name === 'START' ? 'TYPE_INT32' : 'TYPE_FP32', dims: [1] },
      ],
    });
    for (const name of ['START', 'S_IN']) {
      const e = expectServalError(() => resolveForTest(withInput(name), { signature: signature({ START: 'INT32' }) }), 'INVALID_ARG');
      expect(e.message).toContain(`'${name}' is also declared as an input of seq`);
    }
  });

  it('does not support growable state memory', () => {
    expectServalError(() => resolve({ state: [{ ...STATE, use_growable_memory: true }] }), 'UNSUPPORTED');
  });

  it('marks an iterative sequence in the policy, with either strategy', () => {
    const sb = { control_input: [START, READY, CORRID], state: [STATE] };
    expect(resolve({ ...sb, iterative_sequence: true }).sequence!.iterative).toBe(true);
    expect(resolve({ ...sb, iterative_sequence: true, oldest: { max_candidate_sequences: 2 } }).sequence!.iterative).toBe(true);
    expect(resolve(sb).sequence!.iterative).toBeUndefined();
  });
});

describe('auto-complete of a sequence model', () => {
  it('lists neither the control and state inputs nor the state outputs the batcher handles', () => {
    const sig = signature(ALL);
    const out = autoCompleteConfig({ name: 'seq', sequence_batching: { control_input: [START, READY, CORRID], state: [STATE] } }, sig);
    expect(out.input!.map((t) => t.name)).toEqual(['INPUT']);
    expect(out.output!.map((t) => t.name)).toEqual(['OUTPUT']);
    // No dynamic batcher is added to a sequence model.
    expect(out.dynamic_batching).toBeUndefined();
    expect(resolveForTest(out, { signature: sig }).sequence!.strategy).toBe('direct');
  });
});

describe('request sequence parameters', () => {
  const params = (parameters: Record<string, string | number | boolean | bigint>) =>
    sequenceParameters({ modelName: 'm', modelVersion: '', id: '', inputs: [], parameters });

  it('reads uint64 and string correlation IDs and the START/END flags', () => {
    expect(params({})).toBeUndefined();
    expect(params({ sequence_id: 1000, sequence_start: true })).toEqual({ id: 1000n, start: true, end: false });
    expect(params({ sequence_id: 18446744073709551615n, sequence_end: true })).toEqual({ id: 2n ** 64n - 1n, start: false, end: true });
    expect(params({ sequence_id: 'a-b-c', sequence_start: false, sequence_end: false })).toEqual({ id: 'a-b-c', start: false, end: false });
    // Flags without an ID: no sequence (a sequence model then refuses it).
    expect(params({ sequence_start: true })).toEqual({ id: 0n, start: true, end: false });
  });

  it('refuses flags that are not booleans and IDs that are not unsigned integers or strings', () => {
    let e = expectServalError(() => params({ sequence_id: 1, sequence_start: 1 }), 'INVALID_ARG');
    expect(e.message).toBe(`invalid value type for 'sequence_start' parameter: expected a boolean, got "1"`);
    e = expectServalError(() => params({ sequence_id: 1, sequence_end: 'true' }), 'INVALID_ARG');
    expect(e.message).toContain("'sequence_end'");
    for (const bad of [-1, 1.5, true, 2n ** 64n]) {
      e = expectServalError(() => params({ sequence_id: bad }), 'INVALID_ARG');
      expect(e.message).toContain("invalid value for 'sequence_id' parameter");
    }
  });
});

describe('initial_state data files', () => {
  const withFile = (file: string) =>
    resolve({ state: [{ ...STATE, initial_state: [{ name: 'init', data_type: 'TYPE_FP32', dims: [2], data_file: file }] }] }, {});

  it("reads the state's bytes from the model's initial_state folder, cutting a longer file", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-seq-'));
    try {
      mkdirSync(path.join(dir, 'initial_state'));
      writeFileSync(path.join(dir, 'initial_state', 'init.bin'), rawOf('FP32', [1.5, -2, 99]));
      const states = await readInitialStates(withFile('init.bin'), dir);
      const s = states.get('S_IN')!;
      expect(s.shape).toEqual([2]);
      expect([...new Float32Array(Uint8Array.from(s.data).buffer)]).toEqual([1.5, -2]);
      writeFileSync(path.join(dir, 'initial_state', 'short.bin'), rawOf('FP32', [1]));
      const e = await expectServalErrorAsync(readInitialStates(withFile('short.bin'), dir), 'INVALID_ARG');
      expect(e.message).toContain('initial_state setting expects 8 bytes, but the data provided from short.bin only has 4 bytes.');
      await expectServalErrorAsync(readInitialStates(withFile('missing.bin'), dir), 'INVALID_ARG');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
