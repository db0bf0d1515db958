// The resolved model config: what a loaded model version runs by. Built once per load by
// resolve.ts from the raw config and the model file's signature; readonly and fully defaulted, so
// nothing after load re-defaults a field or asserts that one is present.
import type { DataType } from '../kernel/datatypes.js';
import type { ModelInstanceGroup, ModelWarmup } from './types.js';

export interface ResolvedTensor {
  readonly name: string;
  /** Its position in the config's input or output list. */
  readonly index: number;
  /** The datatype on the wire. */
  readonly datatype: DataType;
  /** What clients see, without the batch dimension; -1 is variable. */
  readonly dims: readonly number[];
  /** What the model sees: `reshape` when given, else `dims`. */
  readonly modelDims: readonly number[];
  readonly reshaped: boolean;
}

export interface ResolvedInput extends ResolvedTensor {
  readonly optional: boolean;
}

export interface ResolvedOutput extends ResolvedTensor {
  /** Class labels, one per line of the output's label_filename. */
  readonly labels: readonly string[] | undefined;
}

/** One level's ModelQueuePolicy. */
export interface QueuePolicy {
  /** 0 = unbounded. */
  readonly maxQueueSize: number;
  /** 0 = no timeout. */
  readonly defaultTimeoutUs: number;
  readonly allowTimeoutOverride: boolean;
  readonly timeoutAction: 'REJECT' | 'DELAY';
}

export interface QueueConfig {
  /** Number of levels (≥ 1); level 1 is served first. */
  readonly levels: number;
  readonly defaultLevel: number;
  readonly policies: readonly QueuePolicy[];
}

export interface BatchingPolicy {
  readonly maxBatchSize: number;
  /** dynamic_batching is configured. */
  readonly dynamic: boolean;
  readonly preferredBatchSizes: readonly number[];
  readonly maxQueueDelayNs: number;
  readonly preserveOrdering: boolean;
  readonly queue: QueueConfig;
}

export interface InstancePlacement {
  /** Triton's instance name: `<group name>_<index within group>`. */
  readonly name: string;
  readonly kind: 'KIND_CPU' | 'KIND_GPU';
  /** CUDA device id for KIND_GPU, -1 for CPU. */
  readonly deviceId: number;
}

/** A backend's placement of a model's instances. */
export interface PlacedInstances<Settings = unknown> {
  /** instance_group as the config endpoints report it (names, kinds and counts filled in). */
  readonly groups: ModelInstanceGroup[];
  readonly placements: readonly InstancePlacement[];
  /** What every instance starts with (threads, execution provider options). */
  readonly settings: Settings;
}

export interface ResolvedModelConfig<Settings = unknown> {
  readonly name: string;
  readonly platform: string;
  readonly backend: string;
  /** 0 = the model does not batch: shapes have no batch dimension. */
  readonly maxBatchSize: number;
  readonly defaultModelFilename: string;
  readonly inputs: readonly ResolvedInput[];
  readonly outputs: readonly ResolvedOutput[];
  readonly inputByName: ReadonlyMap<string, ResolvedInput>;
  readonly outputByName: ReadonlyMap<string, ResolvedOutput>;
  readonly batching: BatchingPolicy;
  readonly instances: readonly InstancePlacement[];
  readonly instanceSettings: Settings;
  readonly warmup: readonly ModelWarmup[];
  /** The completed config in Triton's JSON form, for the config endpoints of both protocols. */
  readonly json: Readonly<Record<string, unknown>>;
}
