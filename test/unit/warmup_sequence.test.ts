// Warm-up samples of sequence models (src/model/warmup.ts with the sequence batcher's
// standaloneSequenceInputs). As in Triton core (TritonModelInstance::GenerateWarmupData), a sample
// may name the control inputs (START, END, READY, CORRID) and implicit state inputs, which go to the
// model unchecked (override inputs); warm-up bypasses the sequence batcher. The ones a sample leaves
// out get the values of a request that is a whole sequence by itself.
import { afterEach, describe, expect, it } from 'vitest';
import { parseOnnxSignature } from '../../src/backends/onnxruntime/signature.js';
import { parseModelConfigText } from '../../src/config/pbtxt.js';
import type { ResolvedModelConfig } from '../../src/config/resolved.js';
import { warmupRequests } from '../../src/model/warmup.js';
import type { ScheduledInput } from '../../src/scheduler/scheduler.js';
import type { GeneratedModel } from '../../tools/onnx/models.js';
import { buildRunningSum, buildSimpleDynaSequence, buildSimpleSequence } from '../../tools/onnx/sequence_models.js';
import { expectServalErrorAsync } from '../helpers/errors.js';
import { resolveForTest, signatureOf } from '../helpers/resolve.js';
import { executions } from '../helpers/test_backend.js';
import { identityTestModel, startTestCore, type TestCore } from '../helpers/test_core.js';

const NO_DIR = '/nonexistent-model-dir';

const zero = (name: string, type = 'TYPE_INT32', dims = '[ 1 ]', source = 'zero_data: true'): string =>
  `inputs { key: "${name}" value { data_type: ${type} dims: ${dims} ${source} } }`;
const sample = (inputs: string, batch = 1): string => `model_warmup [{ name: "s" batch_size: ${batch} ${inputs} }]`;

/** One of the example sequence models' configs with `extra` appended, resolved against its ONNX file. */
function cfg(m: GeneratedModel, extra: string): ResolvedModelConfig {
  return resolveForTest(parseModelConfigText(m.config + extra), { signature: parseOnnxSignature(m.onnx) });
}

/** Every input of the one sample, by name: [datatype, shape, values]. */
async function inputsOf(c: ResolvedModelConfig, initialStates?: Parameters<typeof warmupRequests>[2]) {
  const samples = await warmupRequests(c, NO_DIR, initialStates);
  expect(samples).toHaveLength(1);
  return Object.fromEntries(samples[0]!.req.inputs.map((i) => [i.name, [i.datatype, i.shape, values(i)]]));
}

function values(i: ScheduledInput): number[] | bigint[] {
  const b = i.data;
  if (i.datatype === 'UINT64') return [...new BigUint64Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))];
  if (i.datatype === 'FP32') return [...new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))];
  if (i.datatype === 'INT32') return [...new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))];
  return [...b];
}

describe('control inputs', () => {
  it('direct: START and READY left out are true, one per batch row', async () => {
    const c = cfg(buildSimpleSequence(), sample(zero('INPUT'), 3));
    expect(await inputsOf(c)).toStrictEqual({
      INPUT: ['INT32', [3, 1], [0, 0, 0]],
      START: ['INT32', [3, 1], [1, 1, 1]],
      READY: ['INT32', [3, 1], [1, 1, 1]],
    });
  });

  it('uses the values of controls the sample names, unchecked, with a batch dimension (Triton override inputs)', async () => {
    // START given as zeros in FP32 and [2]: passed to the model as given; READY still filled.
    const c = cfg(buildSimpleSequence(), sample(zero('INPUT') + zero('START', 'TYPE_FP32', '[ 2 ]'), 2));
    expect(await inputsOf(c)).toStrictEqual({
      INPUT: ['INT32', [2, 1], [0, 0]],
      START: ['FP32', [2, 2], [0, 0, 0, 0]],
      READY: ['INT32', [2, 1], [1, 1]],
    });
  });

  it('oldest: END true and CORRID 0 in its own type; *_false_true values of other types', async () => {
    const c = cfg(buildSimpleDynaSequence(), sample(zero('INPUT', 'TYPE_INT32', '[ 1 ]', 'random_data: true')));
    const got = await inputsOf(c);
    expect(got.START).toStrictEqual(['INT32', [1, 1], [1]]);
    expect(got.END).toStrictEqual(['INT32', [1, 1], [1]]);
    expect(got.READY).toStrictEqual(['INT32', [1, 1], [1]]);
    expect(got.CORRID).toStrictEqual(['UINT64', [1, 1], [0n]]);

    const other = parseModelConfigText(`name: "m" max_batch_size: 0
      input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
      output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
      sequence_batching { control_input [
        { name: "S" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0.5, 2.5 ] } ] },
        { name: "R" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
        { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] } ] }
      ${sample(zero('INPUT'))}`);
    const sig = signatureOf(other);
    const controls = (
      [
        ['S', 'FP32'],
        ['R', 'BOOL'],
        ['C', 'BYTES'],
      ] as const
    ).map(([name, dt]) => ({
      name,
      datatype: dt,
      rawType: dt,
      dims: [1],
    }));
    // max_batch_size 0: no batch dimension.
    expect(await inputsOf(resolveForTest(other, { signature: { ...sig, inputs: [...sig.inputs, ...controls] } }))).toStrictEqual({
      INPUT: ['INT32', [1], [0]],
      S: ['FP32', [1], [2.5]],
      R: ['BOOL', [1], [1]],
      C: ['BYTES', [1], [1, 0, 0, 0, 0x30]], // the string "0"
    });
  });
});

describe('implicit state', () => {
  it('gives a state input left out its initial value: zeros, or the initial_state data file', async () => {
    const c = cfg(buildRunningSum(), sample(zero('INPUT'), 2));
    expect(await inputsOf(c)).toStrictEqual({ INPUT: ['INT32', [2, 1], [0, 0]], SUM_IN: ['INT32', [2, 1], [0, 0]] });
    const fromFile = new Map([['SUM_IN', { shape: [1], data: new Uint8Array(Int32Array.of(42).buffer) }]]);
    expect((await inputsOf(c, fromFile)).SUM_IN).toStrictEqual(['INT32', [2, 1], [42, 42]]);
  });

  it('uses the state value the sample names', async () => {
    const c = cfg(buildRunningSum(), sample(zero('INPUT') + zero('SUM_IN', 'TYPE_INT32', '[ 1 ]', 'random_data: true'), 2));
    const got = await inputsOf(c);
    const v = got.SUM_IN![2] as number[];
    expect(got.SUM_IN!.slice(0, 2)).toStrictEqual(['INT32', [2, 1]]);
    expect(v[1]).toBe(v[0]); // one sample, repeated per row
  });
});

describe('invalid samples still fail', () => {
  it('names the control and state inputs when an input is unknown', async () => {
    const c = cfg(buildSimpleDynaSequence(), sample(zero('INPUT') + zero('STATE')));
    expect((await expectServalErrorAsync(() => warmupRequests(c, NO_DIR), 'INVALID_ARG')).message).toBe(
      "model 'simple_dyna_sequence': warmup sample 's': unknown input 'STATE'; the model's inputs are ['INPUT']" +
        " and its sequence control and state inputs ['START', 'END', 'READY', 'CORRID']",
    );
  });

  it('checks the model inputs as for a request', async () => {
    const c = cfg(buildSimpleSequence(), sample(zero('INPUT', 'TYPE_FP32') + zero('START')));
    expect((await expectServalErrorAsync(() => warmupRequests(c, NO_DIR), 'INVALID_ARG')).message).toBe(
      "model 'simple_sequence': warmup sample 's': inference input 'INPUT' data-type is 'FP32', but model 'simple_sequence' expects 'INT32'",
    );
    const missing = cfg(buildSimpleSequence(), sample(zero('START')));
    expect((await expectServalErrorAsync(() => warmupRequests(missing, NO_DIR), 'INVALID_ARG')).message).toBe(
      "model 'simple_sequence': warmup sample 's': no data for required input(s) ['INPUT']",
    );
  });
});

describe('loading', () => {
  let tc: TestCore | undefined;
  afterEach(async () => {
    await tc?.close();
    tc = undefined;
  });

  it('runs each sample count times on every instance of a sequence model, outside the sequence batcher', async () => {
    executions.length = 0;
    const extra = [
      'instance_group [ { count: 2 kind: KIND_CPU } ]',
      'sequence_batching { direct { } control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ] }',
      `model_warmup [{ name: "w" batch_size: 2 count: 3 ${zero('INPUT0') + zero('START')} }]`,
    ].join('\n');
    const m = identityTestModel('seqwarm', 'INT32', [1], 8, { extraConfig: extra });
    m.model.inputs.push({ name: 'START', datatype: 'INT32', rawType: 'INT32', dims: [-1, 1] });
    tc = await startTestCore([m]);
    expect(tc.lines.join('\n')).not.toMatch(/failed/);
    expect(tc.core.isModelReady('seqwarm', '')).toBe(true);
    const ran = executions.filter(([inst]) => inst.startsWith('seqwarm'));
    expect(ran.map(([inst]) => inst).sort()).toStrictEqual([
      'seqwarm_0_0',
      'seqwarm_0_0',
      'seqwarm_0_0',
      'seqwarm_0_1',
      'seqwarm_0_1',
      'seqwarm_0_1',
    ]);
    expect(ran.every(([, dims]) => dims.join() === '2,1')).toBe(true);
  });
});
