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
  /** allow_ragged_batch inputs, batch_input and batch_output (absent when the model has none). */
  readonly ragged?: RaggedBatching;
  /** Serval's latency-budget batching (a p99 target parameter): the queue delay adapts, up to maxQueueDelayNs's bound. */
  readonly latencyBudget?: LatencyBudgetPolicy;
}

/** A model's p99 latency target and the bound of its adaptive queue delay (src/config/latency_target.ts). */
export interface LatencyBudgetPolicy {
  /** p99 target of a request's server latency (arrival to response), in ns. */
  readonly targetNs: number;
  /** The adaptive delay never exceeds this, in ns. */
  readonly maxDelayNs: number;
}

/** BatchInput.Kind: a tensor the batcher builds from the batch for the model. */
export type BatchInputKind =
  | 'BATCH_ELEMENT_COUNT'
  | 'BATCH_ACCUMULATED_ELEMENT_COUNT'
  | 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO'
  | 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE'
  | 'BATCH_ITEM_SHAPE'
  | 'BATCH_ITEM_SHAPE_FLATTEN';

export interface BatchInputSpec {
  readonly kind: BatchInputKind;
  /** The model input that receives the tensor. */
  readonly targetName: string;
  readonly datatype: DataType;
  /** The request input it describes. */
  readonly sourceInput: string;
}

/** BATCH_SCATTER_WITH_INPUT_SHAPE: each request gets its share of the output in its source input's shape. */
export interface BatchOutputSpec {
  readonly targetName: string;
  readonly sourceInput: string;
}

export interface RaggedBatching {
  /** Inputs concatenated into one 1-D tensor across the batch; their shapes need not match. */
  readonly raggedInputs: ReadonlySet<string>;
  readonly batchInputs: readonly BatchInputSpec[];
  readonly batchOutputs: readonly BatchOutputSpec[];
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
  /** BYTES elements must be valid UTF-8: the backend passes them as text (ONNX Runtime). */
  readonly utf8BytesOnly: boolean;
  /** Responses list outputs in the order the model made them (a Python model's), as Triton's do. */
  readonly outputsInModelOrder: boolean;
  /** 0 = the model does not batch: shapes have no batch dimension. */
  /** model_transaction_policy.decoupled: a request may get zero, one or many responses. */
  readonly decoupled: boolean;
  readonly maxBatchSize: number;
  readonly defaultModelFilename: string;
  readonly inputs: readonly ResolvedInput[];
  readonly outputs: readonly ResolvedOutput[];
  readonly inputByName: ReadonlyMap<string, ResolvedInput>;
  readonly outputByName: ReadonlyMap<string, ResolvedOutput>;
  readonly batching: BatchingPolicy;
  /** sequence_batching, when configured: the sequence batcher runs the model. */
  readonly sequence?: SequencePolicy;
  readonly instances: readonly InstancePlacement[];
  /** The instance groups the instances were placed from (their rate_limiter for --rate-limit). */
  readonly instanceGroups?: readonly ModelInstanceGroup[];
  readonly instanceSettings: Settings;
  readonly warmup: readonly ModelWarmup[];
  /** response_cache { enable: true }: answers may come from the server's response cache. */
  readonly responseCache: boolean;
  /** The completed config in Triton's JSON form, for the config endpoints of both protocols. */
  readonly json: Readonly<Record<string, unknown>>;
}

/** A sequence control input (ModelSequenceBatching.Control) fed to the model by the sequence batcher. */
export interface SequenceControl {
  readonly kind: 'START' | 'END' | 'READY' | 'CORRID';
  /** The model input that carries it. */
  readonly input: string;
  /** INT32, FP32 or BOOL for START/END/READY; the CORRID control's data_type. */
  readonly datatype: DataType;
  /** START/END/READY: the values for false and true (`*_false_true`). */
  readonly falseTrue: readonly [number, number];
}

/** One implicit state (ModelSequenceBatching.State): an input/output pair the server carries over. */
export interface SequenceStateConfig {
  readonly inputName: string;
  readonly outputName: string;
  readonly datatype: DataType;
  /** Without the batch dimension; -1 is variable. */
  readonly dims: readonly number[];
  /** How a sequence's state starts: zeros (dims with -1 read as 1) unless `initial_state` says otherwise. */
  readonly initial:
    | { readonly kind: 'zero'; readonly dims: readonly number[] }
    | { readonly kind: 'file'; readonly dims: readonly number[]; readonly file: string };
}

/** sequence_batching, checked and defaulted. */
export interface SequencePolicy {
  readonly strategy: 'direct' | 'oldest';
  /** max_sequence_idle_microseconds (Triton's default 1 s when 0). */
  readonly maxSequenceIdleUs: number;
  /** Sequence slots per instance: max(1, max_batch_size) for direct, max_candidate_sequences for oldest. */
  readonly slotsPerInstance: number;
  readonly maxQueueDelayNs: number;
  /** direct: minimum_slot_utilization (0 = run as soon as any slot has a request). */
  readonly minimumSlotUtilization: number;
  /** oldest: preferred_batch_size (defaulted to [max_batch_size]). */
  readonly preferredBatchSizes: readonly number[];
  readonly preserveOrdering: boolean;
  /**
   * iterative_sequence: a request without a correlation ID gets one (and START); a request the
   * model reschedules runs again as its sequence's next step; its release ends the sequence.
   */
  readonly iterative?: boolean;
  readonly controls: readonly SequenceControl[];
  readonly states: readonly SequenceStateConfig[];
}
