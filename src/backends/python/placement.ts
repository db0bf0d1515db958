// Instance groups of a Python model: one stub process per instance. The stub runs whatever the
// model's code does; KIND_GPU only tells the model which device it was given
// (args["model_instance_kind"] / args["model_instance_device_id"]), as in Triton.

import { toTritonConfigJson } from '../../config/config_json.js';
import type { InstancePlacement, PlacedInstances } from '../../config/resolved.js';
import type { ModelConfig, ModelInstanceGroup } from '../../config/types.js';
import { ServalError } from '../../kernel/errors.js';
import { EXECUTION_ENV_PATH } from './interpreter.js';

/** What every instance of a Python model starts with. */
export interface PythonSettings {
  /** args["model_config"]: the completed config in Triton's JSON form. */
  modelConfigJson: string;
  /** The model's EXECUTION_ENV_PATH parameter, if any (resolved against its folder at start). */
  executionEnvPath: string | undefined;
  /** model_transaction_policy.decoupled: responses go through the requests' senders. */
  decoupled: boolean;
  /** sequence_batching.iterative_sequence: the model may reschedule its requests. */
  iterative: boolean;
}

export function placePythonModel(config: ModelConfig): PlacedInstances<PythonSettings> {
  const name = config.name ?? '';
  const list: ModelInstanceGroup[] = config.instance_group?.length ? config.instance_group : [{ kind: 'KIND_AUTO' }];
  const groups: ModelInstanceGroup[] = [];
  const placements: InstancePlacement[] = [];
  list.forEach((g, gi) => {
    const groupName = g.name || `${name}_${gi}`;
    const count = g.count ?? 1;
    if (!Number.isInteger(count) || count < 0) {
      throw ServalError.invalidArg(`instance group '${groupName}' of model '${name}' has invalid count ${count}`);
    }
    const kind = (g.kind ?? 'KIND_AUTO') === 'KIND_AUTO' ? 'KIND_CPU' : g.kind!;
    if (kind === 'KIND_CPU') {
      if (g.gpus?.length) {
        throw ServalError.invalidArg(`instance group ${groupName} of model ${name} has kind KIND_CPU but specifies one or more GPUs`); // Triton's text
      }
      for (let c = 0; c < count; c++) placements.push({ name: `${groupName}_${c}`, kind: 'KIND_CPU', deviceId: -1 });
    } else if (kind === 'KIND_GPU') {
      for (const d of g.gpus?.length ? g.gpus : [0]) {
        for (let c = 0; c < count; c++) placements.push({ name: `${groupName}_${c}_gpu${d}`, kind: 'KIND_GPU', deviceId: d });
      }
    } else {
      throw ServalError.unsupported(
        `instance group '${groupName}' of model '${name}' has kind ${kind}, which the python backend does not support`,
      );
    }
    groups.push({ ...g, name: groupName, kind, count });
  });
  if (placements.length === 0) throw ServalError.invalidArg(`model '${name}' has no model instances (every instance group has count 0)`);
  const env = config.parameters?.[EXECUTION_ENV_PATH]?.string_value;
  return {
    groups,
    placements,
    settings: {
      // resolve.ts sets instance_group from `groups` and reports this same config.
      modelConfigJson: JSON.stringify(toTritonConfigJson({ ...config, instance_group: groups } as Record<string, unknown>)),
      executionEnvPath: env || undefined,
      decoupled: config.model_transaction_policy?.decoupled ?? false,
      iterative: config.sequence_batching?.iterative_sequence === true,
    },
  };
}
