// sequence_batching → the sequence batcher's policy, with Triton's load-time checks and texts
// (core model_config_utils.cc ValidateModelConfig / NormalizeModelConfig, backend_common.cc
// Get*SequenceControlProperties, sequence_batch_scheduler.cc GenerateInitialStateData). It also
// writes Triton's normalisations into the config, so the config endpoints report them:
// max_sequence_idle_microseconds 0 → 1 s, oldest preferred_batch_size [] → [max_batch_size].
import { type DataType, fromConfigType, toConfigType } from '../kernel/datatypes.js';
import { ServalError } from '../kernel/errors.js';
import type { ResolvedTensor, SequenceControl, SequencePolicy, SequenceStateConfig } from './resolved.js';
import type { ModelConfig, ModelSequenceBatching, ModelSequenceState, SequenceControlKind } from './types.js';

/** Triton's SEQUENCE_IDLE_DEFAULT_MICROSECONDS. */
export const SEQUENCE_IDLE_DEFAULT_US = 1_000_000;
/** Triton's kInitialStateFolder: initial_state data files live here, in the model's folder. */
export const INITIAL_STATE_FOLDER = 'initial_state';

const KIND_NAMES: Record<SequenceControl['kind'], SequenceControlKind> = {
  START: 'CONTROL_SEQUENCE_START',
  END: 'CONTROL_SEQUENCE_END',
  READY: 'CONTROL_SEQUENCE_READY',
  CORRID: 'CONTROL_SEQUENCE_CORRID',
};

export interface ResolvedSequence {
  policy: SequencePolicy;
  /** Tensors the model file must have besides the configured ones: controls and state inputs. */
  modelInputs: ResolvedTensor[];
  /** State outputs not also configured as outputs. */
  modelOutputs: ResolvedTensor[];
}

const invalid = (msg: string): ServalError => ServalError.invalidArg(msg);

const CONTROL_KINDS: readonly SequenceControlKind[] = [
  'CONTROL_SEQUENCE_START',
  'CONTROL_SEQUENCE_END',
  'CONTROL_SEQUENCE_READY',
  'CONTROL_SEQUENCE_CORRID',
];
const CORRID_CONFIG_TYPES: readonly string[] = ['TYPE_UINT64', 'TYPE_INT64', 'TYPE_UINT32', 'TYPE_INT32', 'TYPE_STRING'];

/**
 * The sequence_batching part of Triton's ValidateModelConfig, in its order and with its texts:
 * each boolean control kind (START, END, READY: GetBooleanSequenceControlProperties walks every
 * control input once per kind), then CORRID (GetTypedSequenceControlProperties) and its type,
 * then the oldest strategy's preferred sizes and the direct strategy's slot utilisation. Like the
 * rest of that function it runs when the repository is polled, before any version folder.
 */
export function validateSequenceBatching(sb: ModelSequenceBatching, model: string, maxBatch: number): void {
  for (const kindName of CONTROL_KINDS) {
    const tensors = new Set<string>();
    let seen = false;
    let corridType = '';
    for (const ci of sb.control_input ?? []) {
      const name = ci.name ?? '';
      if (!name) throw invalid(`sequence batching control tensor must have a name for ${model}`);
      if (tensors.has(name))
        throw invalid(`sequence batching control tensor '${name}' is specified for multiple control kinds for ${model}`);
      tensors.add(name);
      for (const c of ci.control ?? []) {
        if ((c.kind ?? 'CONTROL_SEQUENCE_START') !== kindName) continue;
        if (seen) throw invalid(`sequence batching specifies multiple ${kindName} tensors for ${model}`);
        seen = true;
        const sizes = [c.int32_false_true?.length ?? 0, c.fp32_false_true?.length ?? 0, c.bool_false_true?.length ?? 0];
        const given = sizes.filter((n) => n > 0).length;
        if (kindName === 'CONTROL_SEQUENCE_CORRID') {
          corridType = c.data_type ?? 'TYPE_INVALID';
          if (given) {
            throw invalid(
              `sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for ${kindName} for ${model}`,
            );
          }
          continue;
        }
        if (given === 0) {
          throw invalid(
            `sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for ${kindName} for ${model}`,
          );
        }
        if (given > 1) {
          throw invalid(
            `sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and 'bool_false_true' for ${kindName} for ${model}`,
          );
        }
        const field = sizes[0] ? 'int32_false_true' : sizes[1] ? 'fp32_false_true' : 'bool_false_true';
        if ((sizes[0] || sizes[1] || sizes[2]) !== 2) {
          throw invalid(`sequence batching control '${field}' must have exactly 2 entries for ${kindName} for ${model}`);
        }
      }
    }
    if (seen && kindName === 'CONTROL_SEQUENCE_CORRID' && !CORRID_CONFIG_TYPES.includes(corridType)) {
      throw invalid(
        `unexpected data type for control ${kindName} for ${model}. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING`,
      );
    }
  }
  for (const p of sb.oldest?.preferred_batch_size ?? []) {
    if (p <= 0) throw invalid(`sequence batching preferred batch size must be positive for ${model}`);
    if (p > maxBatch) throw invalid(`sequence batching preferred batch size must be <= max batch size for ${model}`);
  }
  if (sb.direct) {
    const util = sb.direct.minimum_slot_utilization ?? 0;
    if (!(util >= 0 && util <= 1)) throw invalid(`sequence batching minimum slot utilization must be in range (0.0, 1.0] for ${model}`);
  }
}

/**
 * Checks `config.sequence_batching` (present) and fills Triton's defaults into it. `inputs` and
 * `outputs` are the configured tensor names: controls and state inputs must not be among the
 * inputs (the batcher provides them), a state output may be an output (clients may then request it).
 */
export function resolveSequenceBatching(config: ModelConfig, inputs: ReadonlySet<string>, outputs: ReadonlySet<string>): ResolvedSequence {
  const sb = config.sequence_batching!;
  const model = config.name ?? '';
  const maxBatch = config.max_batch_size ?? 0;
  sb.max_sequence_idle_microseconds ||= SEQUENCE_IDLE_DEFAULT_US;
  const controls = sequenceControls(sb, model, inputs);
  const states = sb.state?.map((s) => stateConfig(s, model, inputs)) ?? [];
  const seen = new Set<string>();
  for (const s of states) {
    for (const n of [`in:${s.inputName}`, `out:${s.outputName}`]) {
      if (seen.has(n))
        throw invalid(`State ${n.startsWith('in') ? 'input' : 'output'} name '${n.slice(n.indexOf(':') + 1)}' specified more than once.`);
      seen.add(n);
    }
    if (controls.some((c) => c.input === s.inputName)) {
      throw invalid(`state input '${s.inputName}' is also a sequence batching control tensor for ${model}`);
    }
  }

  let policy: SequencePolicy;
  if (sb.oldest) {
    const o = sb.oldest;
    const candidates = o.max_candidate_sequences ?? 0;
    if (!Number.isInteger(candidates) || candidates <= 0) {
      throw invalid(`sequence batching oldest strategy needs max_candidate_sequences > 0 for ${model}`);
    }
    o.preferred_batch_size ??= []; // checked by validateSequenceBatching
    if (o.preferred_batch_size.length === 0 && maxBatch > 0) o.preferred_batch_size.push(maxBatch);
    policy = {
      strategy: 'oldest',
      maxSequenceIdleUs: Number(sb.max_sequence_idle_microseconds),
      slotsPerInstance: candidates,
      maxQueueDelayNs: Number(o.max_queue_delay_microseconds ?? 0) * 1000,
      minimumSlotUtilization: 0,
      preferredBatchSizes: [...o.preferred_batch_size],
      preserveOrdering: o.preserve_ordering ?? false,
      ...(sb.iterative_sequence && { iterative: true }),
      controls,
      states,
    };
  } else {
    const d = sb.direct ?? {};
    const util = d.minimum_slot_utilization ?? 0; // checked by validateSequenceBatching
    policy = {
      strategy: 'direct',
      maxSequenceIdleUs: Number(sb.max_sequence_idle_microseconds),
      slotsPerInstance: Math.max(1, maxBatch),
      maxQueueDelayNs: Number(d.max_queue_delay_microseconds ?? 0) * 1000,
      minimumSlotUtilization: util,
      preferredBatchSizes: [],
      preserveOrdering: false,
      ...(sb.iterative_sequence && { iterative: true }),
      controls,
      states,
    };
  }

  const tensor = (name: string, datatype: DataType, dims: readonly number[]): ResolvedTensor => ({
    name,
    index: -1,
    datatype,
    dims: [...dims],
    modelDims: [...dims],
    reshaped: false,
  });
  return {
    policy,
    modelInputs: [...controls.map((c) => tensor(c.input, c.datatype, [1])), ...states.map((s) => tensor(s.inputName, s.datatype, s.dims))],
    modelOutputs: states.filter((s) => !outputs.has(s.outputName)).map((s) => tensor(s.outputName, s.datatype, s.dims)),
  };
}

/** The control inputs, one control each, with Triton's checks per kind. */
function sequenceControls(sb: ModelSequenceBatching, model: string, inputs: ReadonlySet<string>): SequenceControl[] {
  const out: SequenceControl[] = [];
  const tensors = new Set<string>();
  for (const ci of sb.control_input ?? []) {
    const name = ci.name ?? '';
    if (!name) throw invalid(`sequence batching control tensor must have a name for ${model}`);
    // Triton rejects a tensor listed twice; one entry carrying two kinds would feed one tensor
    // two values, so it is refused the same way.
    if (tensors.has(name) || (ci.control?.length ?? 0) > 1) {
      throw invalid(`sequence batching control tensor '${name}' is specified for multiple control kinds for ${model}`);
    }
    tensors.add(name);
    if (inputs.has(name)) {
      throw invalid(
        `sequence batching control tensor '${name}' is also declared as an input of ${model}; the sequence batcher provides it, so remove it from 'input'`,
      );
    }
    const c = ci.control?.[0];
    if (!c) continue;
    const kindName = c.kind ?? 'CONTROL_SEQUENCE_START';
    const kind = (Object.keys(KIND_NAMES) as SequenceControl['kind'][]).find((k) => KIND_NAMES[k] === kindName)!;
    if (out.some((o) => o.kind === kind)) throw invalid(`sequence batching specifies multiple ${kindName} tensors for ${model}`);
    // validateSequenceBatching has checked the values and the CORRID type with Triton's texts.
    const i32 = c.int32_false_true ?? [];
    const f32 = c.fp32_false_true ?? [];
    if (kind === 'CORRID') {
      out.push({ kind, input: name, datatype: fromConfigType(c.data_type ?? 'TYPE_INVALID')!, falseTrue: [0, 0] });
      continue;
    }
    const [values, datatype]: [readonly (number | boolean)[], DataType] =
      i32.length > 0 ? [i32, 'INT32'] : f32.length > 0 ? [f32, 'FP32'] : [c.bool_false_true ?? [], 'BOOL'];
    out.push({ kind, input: name, datatype, falseTrue: [Number(values[0]), Number(values[1])] });
  }
  return out;
}

function stateConfig(s: ModelSequenceState, model: string, inputs: ReadonlySet<string>): SequenceStateConfig {
  const inputName = s.input_name ?? '';
  const outputName = s.output_name ?? '';
  if (!inputName || !outputName) throw invalid(`sequence batching state must have an 'input_name' and an 'output_name' for ${model}`);
  if (inputs.has(inputName)) {
    throw invalid(
      `state input '${inputName}' is also declared as an input of ${model}; the sequence batcher provides it, so remove it from 'input'`,
    );
  }
  const configType = s.data_type ?? 'TYPE_INVALID';
  const datatype = fromConfigType(configType);
  if (!datatype) throw invalid(`state '${inputName}' has unsupported data_type ${configType} for ${model}`);
  const dims = (s.dims ?? []).map(Number);
  for (const d of dims) {
    if (!(d === -1 || (Number.isInteger(d) && d > 0))) {
      throw invalid(
        `state '${inputName}' has invalid dimension ${d} in dims [${dims.join(',')}] for ${model}; dimensions must be positive or -1`,
      );
    }
  }
  if (s.use_growable_memory) {
    throw ServalError.unsupported(
      `model '${model}': state '${inputName}' sets use_growable_memory, which needs KIND_GPU instances; not supported by Serval`,
    );
  }
  const list = s.initial_state ?? [];
  if (list.length > 1) {
    throw invalid(
      `initial_state field for state input '${inputName}' must contain exactly one or zero element. Found '${list.length}' elements.`,
    );
  }
  const init = list[0];
  if (!init) return { inputName, outputName, datatype, dims, initial: { kind: 'zero', dims: dims.map((d) => (d === -1 ? 1 : d)) } };
  if ((init.data_type ?? 'TYPE_INVALID') !== toConfigType(datatype)) {
    throw invalid(`The data type used for 'initial_state' field of state '${inputName}' does not match the state data type.`);
  }
  if (!init.name) throw invalid(`Field 'name' must be set when using initial_state for state input '${inputName}'.`);
  const initDims = (init.dims ?? []).map(Number);
  if (initDims.length !== dims.length) {
    throw invalid(
      `Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input '${inputName}'. ${initDims.length} != ${dims.length}`,
    );
  }
  initDims.forEach((d, i) => {
    if (d === -1) throw invalid(`'initial_state' field for state input name '${inputName}' contains variable dimensions.`);
    if (dims[i] !== -1 && d !== dims[i]) {
      throw invalid(`'initial_state' dim for input name '${inputName}' doesn't match 'state' dim description. ${d} != ${dims[i]}`);
    }
  });
  if (init.data_file !== undefined && init.data_file !== '') {
    return { inputName, outputName, datatype, dims, initial: { kind: 'file', dims: initDims, file: init.data_file } };
  }
  if (init.zero_data === undefined) throw invalid(`initial_state setting expects state '${inputName}' to have state_data set`);
  return { inputName, outputName, datatype, dims, initial: { kind: 'zero', dims: initDims } };
}
