// The stateful example models (tools/onnx/sequence_models.ts) in onnxruntime-node, fed the way the
// sequence batcher feeds them: what each graph computes from its control and state inputs, and
// that their configs resolve against their own model files.
import ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { parseOnnxSignature } from '../../src/backends/onnxruntime/signature.js';
import { parseModelConfigText } from '../../src/config/pbtxt.js';
import type { GeneratedModel } from '../../tools/onnx/models.js';
import { buildRunningSum, buildSimpleDynaSequence, buildSimpleSequence } from '../../tools/onnx/sequence_models.js';
import { resolveForTest } from '../helpers/resolve.js';

const sessions: ort.InferenceSession[] = [];
async function session(m: GeneratedModel): Promise<ort.InferenceSession> {
  const s = await ort.InferenceSession.create(m.onnx, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  sessions.push(s);
  return s;
}
afterAll(async () => {
  for (const s of sessions) await s.release();
});

const col = (values: number[]): ort.Tensor => new ort.Tensor('int32', Int32Array.from(values), [values.length, 1]);
const ints = (t: ort.Tensor | undefined): number[] => Array.from(t!.data as Int32Array);

describe('stateful example models', () => {
  it('simple_sequence: OUTPUT = (INPUT + START) * READY', async () => {
    const s = await session(buildSimpleSequence());
    const r = await s.run({ INPUT: col([0, 11, -7, 9]), START: col([1, 0, 0, 1]), READY: col([1, 1, 1, 0]) });
    expect(ints(r.OUTPUT)).toEqual([1, 11, -7, 0]);
  });

  it('simple_dyna_sequence: OUTPUT = (INPUT + START + END * low 32 bits of CORRID) * READY', async () => {
    const s = await session(buildSimpleDynaSequence());
    const r = await s.run({
      INPUT: col([0, 1, -1, 5]),
      START: col([1, 0, 0, 0]),
      END: col([0, 1, 1, 0]),
      READY: col([1, 1, 1, 0]),
      CORRID: new ort.Tensor('uint64', BigUint64Array.of(1002n, 1002n, 2n ** 63n + 1003n, 9n), [4, 1]),
    });
    expect(ints(r.OUTPUT)).toEqual([1, 1003, 1002, 0]);
  });

  it('simple_string_dyna_sequence: the same with a string CORRID read as a decimal number', async () => {
    const s = await session(buildSimpleDynaSequence('simple_string_dyna_sequence', 'TYPE_STRING'));
    const r = await s.run({
      INPUT: col([0, 1, -1]),
      START: col([1, 0, 0]),
      END: col([0, 1, 1]),
      READY: col([1, 1, 1]),
      CORRID: new ort.Tensor('string', ['1002', '1002', '-5'], [3, 1]),
    });
    expect(ints(r.OUTPUT)).toEqual([1, 1003, -6]);
  });

  it('running_sum: OUTPUT = SUM_OUT = SUM_IN + INPUT', async () => {
    const s = await session(buildRunningSum());
    const r = await s.run({ INPUT: col([3, -4]), SUM_IN: col([10, 20]) });
    expect(ints(r.OUTPUT)).toEqual([13, 16]);
    expect(ints(r.SUM_OUT)).toEqual([13, 16]);
  });

  it('their configs resolve against their model files, with the strategies the examples use', () => {
    const strategies: Record<string, string> = {};
    const stringDyna = buildSimpleDynaSequence('simple_string_dyna_sequence', 'TYPE_STRING');
    for (const m of [buildSimpleSequence(), buildSimpleDynaSequence(), stringDyna, buildRunningSum()]) {
      const c = resolveForTest(parseModelConfigText(m.config), { signature: parseOnnxSignature(m.onnx) });
      strategies[m.name] = `${c.sequence!.strategy}:${c.sequence!.controls.map((x) => x.kind).join(',')}:${c.sequence!.states.length}`;
    }
    expect(strategies).toEqual({
      simple_sequence: 'direct:START,READY:0',
      simple_dyna_sequence: 'oldest:START,END,READY,CORRID:0',
      simple_string_dyna_sequence: 'oldest:START,END,READY,CORRID:0',
      running_sum: 'direct::1',
    });
  });
});
