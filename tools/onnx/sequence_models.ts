/**
 * Stateful example models for the sequence batcher (tools/gen_models.ts writes them):
 *
 *  - simple_sequence: Triton's example of that name (direct strategy; controls START and READY).
 *    OUTPUT = (INPUT + START) * READY: the first request of a sequence adds 1, which is what
 *    Triton's simple_*_sequence_*_client.py examples expect ([0, 11, 7] → [1, 11, 7]).
 *  - simple_dyna_sequence: Triton's example of that name (oldest strategy; START, END, READY and a
 *    UINT64 CORRID). OUTPUT = (INPUT + START + END * int32(CORRID)) * READY: the last request of a
 *    sequence adds its correlation ID, as the examples run with --dyna expect.
 *  - simple_string_dyna_sequence: the same with a TYPE_STRING CORRID, as Triton's qa builds it for
 *    the examples' `-d` runs: the string ID is read as a decimal number (Cast string→int32, as
 *    Triton's dyna_sequence backend decodes it), so ID "1002" adds 1002 at the end.
 *  - running_sum: implicit state. OUTPUT = SUM_IN + INPUT and SUM_OUT = OUTPUT, where the server
 *    feeds each request's SUM_OUT back as the next request's SUM_IN (zero at START): the running
 *    sum of a sequence's inputs, kept by the server, not the client.
 */
import { DataType, GraphBuilder } from './builder.js';
import type { GeneratedModel } from './models.js';
import { renderConfig } from './triton_config.js';

const BATCH = 'batch';
const io = (name: string) => ({ name, dataType: 'TYPE_INT32' as const, dims: [1] });

/** A boolean control with int32 false/true values 0 and 1. */
function control(name: string, kind: 'START' | 'END' | 'READY'): string {
  return `    {\n      name: "${name}"\n      control [ { kind: CONTROL_SEQUENCE_${kind} int32_false_true: [ 0, 1 ] } ]\n    }`;
}

export function buildSimpleSequence(): GeneratedModel {
  const g = new GraphBuilder('simple_sequence');
  for (const n of ['INPUT', 'START', 'READY']) g.input(n, 'int32', [BATCH, 1]);
  const sum = g.op('Add', ['INPUT', 'START']);
  g.op('Mul', [sum, 'READY'], {}, 'OUTPUT');
  g.output('OUTPUT', 'int32', [BATCH, 1]);
  const base = renderConfig({
    name: 'simple_sequence',
    platform: 'onnxruntime_onnx',
    maxBatchSize: 8,
    inputs: [io('INPUT')],
    outputs: [io('OUTPUT')],
    cpuInstances: 1,
  });
  return {
    name: 'simple_sequence',
    onnx: g.encode({ docString: "OUTPUT = (INPUT + START) * READY (int32); Triton's simple_sequence example" }),
    config: `${base}sequence_batching {\n  max_sequence_idle_microseconds: 5000000\n  direct { }\n  control_input [\n${[
      control('START', 'START'),
      control('READY', 'READY'),
    ].join(',\n')}\n  ]\n}\n`,
  };
}

export function buildSimpleDynaSequence(
  name = 'simple_dyna_sequence',
  corridType: 'TYPE_UINT64' | 'TYPE_STRING' = 'TYPE_UINT64',
): GeneratedModel {
  const g = new GraphBuilder(name);
  for (const n of ['INPUT', 'START', 'END', 'READY']) g.input(n, 'int32', [BATCH, 1]);
  g.input('CORRID', corridType === 'TYPE_STRING' ? 'string' : 'uint64', [BATCH, 1]);
  // Cast keeps the low 32 bits of the correlation ID (or reads a string one as a number), as
  // Triton's dyna_sequence backend does.
  const corrid = g.op('Cast', ['CORRID'], { to: DataType.INT32 });
  const atEnd = g.op('Mul', ['END', corrid]);
  const sum = g.op('Add', [g.op('Add', ['INPUT', 'START']), atEnd]);
  g.op('Mul', [sum, 'READY'], {}, 'OUTPUT');
  g.output('OUTPUT', 'int32', [BATCH, 1]);
  const base = renderConfig({
    name,
    platform: 'onnxruntime_onnx',
    maxBatchSize: 8,
    inputs: [io('INPUT')],
    outputs: [io('OUTPUT')],
    cpuInstances: 1,
  });
  const corridControl = `    {\n      name: "CORRID"\n      control [ { kind: CONTROL_SEQUENCE_CORRID data_type: ${corridType} } ]\n    }`;
  return {
    name,
    onnx: g.encode({ docString: `OUTPUT = (INPUT + START + END * int32(CORRID)) * READY (int32); Triton's ${name} example` }),
    config: `${base}sequence_batching {\n  max_sequence_idle_microseconds: 10000000\n  oldest {\n    max_candidate_sequences: 1024\n  }\n  control_input [\n${[
      control('START', 'START'),
      control('END', 'END'),
      control('READY', 'READY'),
      corridControl,
    ].join(',\n')}\n  ]\n}\n`,
  };
}

export function buildRunningSum(): GeneratedModel {
  const g = new GraphBuilder('running_sum');
  g.input('INPUT', 'int32', [BATCH, 1]);
  g.input('SUM_IN', 'int32', [BATCH, 1]);
  g.op('Add', ['SUM_IN', 'INPUT'], {}, 'OUTPUT');
  g.op('Identity', ['OUTPUT'], {}, 'SUM_OUT');
  g.output('OUTPUT', 'int32', [BATCH, 1]);
  g.output('SUM_OUT', 'int32', [BATCH, 1]);
  const base = renderConfig({
    name: 'running_sum',
    platform: 'onnxruntime_onnx',
    maxBatchSize: 8,
    inputs: [io('INPUT')],
    outputs: [io('OUTPUT')],
    cpuInstances: 1,
  });
  const state = [
    '  state [',
    '    {',
    '      input_name: "SUM_IN"',
    '      output_name: "SUM_OUT"',
    '      data_type: TYPE_INT32',
    '      dims: [ 1 ]',
    '      initial_state: { name: "zero" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true }',
    '    }',
    '  ]',
  ].join('\n');
  return {
    name: 'running_sum',
    onnx: g.encode({
      docString: 'OUTPUT = SUM_OUT = SUM_IN + INPUT (int32); SUM_IN/SUM_OUT are implicit state: the running sum of a sequence',
    }),
    config: `${base}sequence_batching {\n  max_sequence_idle_microseconds: 5000000\n  direct { }\n${state}\n}\n`,
  };
}
