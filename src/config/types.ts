// TypeScript view of the internal model-config object produced by
// parseTextProto()/fromTritonConfigJson() for inference.ModelConfig.
//
// Conventions (shared with src/config/pbtxt.ts):
//  - keys are the proto (snake_case) field names;
//  - a field absent from the source is absent from the object, so every
//    field is optional here: proto3 has no required fields, and defaults
//    ("" / 0 / false / first enum value / [] / {}) apply when absent;
//  - enums are their value names, 64-bit integers are JS numbers (always
//    safe integers), maps are plain objects keyed by the stringified key;
//  - for a oneof, at most one member key is present.

export type DataType =
  | 'TYPE_INVALID'
  | 'TYPE_BOOL'
  | 'TYPE_UINT8'
  | 'TYPE_UINT16'
  | 'TYPE_UINT32'
  | 'TYPE_UINT64'
  | 'TYPE_INT8'
  | 'TYPE_INT16'
  | 'TYPE_INT32'
  | 'TYPE_INT64'
  | 'TYPE_FP16'
  | 'TYPE_FP32'
  | 'TYPE_FP64'
  | 'TYPE_STRING'
  | 'TYPE_BF16';

export type InputFormat = 'FORMAT_NONE' | 'FORMAT_NHWC' | 'FORMAT_NCHW';

export type InstanceGroupKind = 'KIND_AUTO' | 'KIND_GPU' | 'KIND_CPU' | 'KIND_MODEL';

export type TimeoutAction = 'REJECT' | 'DELAY';

export type ModelPriority = 'PRIORITY_DEFAULT' | 'PRIORITY_MAX' | 'PRIORITY_MIN';

export interface ModelTensorReshape {
  shape?: number[];
}

export interface ModelInput {
  name?: string;
  data_type?: DataType;
  format?: InputFormat;
  /** Without the batch dimension when max_batch_size > 0; -1 = variable. */
  dims?: number[];
  reshape?: ModelTensorReshape;
  is_shape_tensor?: boolean;
  allow_ragged_batch?: boolean;
  optional?: boolean;
  is_non_linear_format_io?: boolean;
}

export interface ModelOutput {
  name?: string;
  data_type?: DataType;
  dims?: number[];
  reshape?: ModelTensorReshape;
  label_filename?: string;
  is_shape_tensor?: boolean;
  is_non_linear_format_io?: boolean;
}

export interface ModelRateLimiter {
  resources?: Array<{ name?: string; global?: boolean; count?: number }>;
  priority?: number;
}

export interface ModelInstanceGroup {
  name?: string;
  kind?: InstanceGroupKind;
  count?: number;
  rate_limiter?: ModelRateLimiter;
  gpus?: number[];
  secondary_devices?: Array<{ kind?: 'KIND_NVDLA'; device_id?: number }>;
  profile?: string[];
  passive?: boolean;
  host_policy?: string;
}

/** A oneof: exactly one of latest / all / specific when set. */
export interface ModelVersionPolicy {
  latest?: { num_versions?: number };
  all?: Record<string, never>;
  specific?: { versions?: number[] };
}

export interface ModelQueuePolicy {
  timeout_action?: TimeoutAction;
  default_timeout_microseconds?: number;
  allow_timeout_override?: boolean;
  max_queue_size?: number;
}

export interface ModelDynamicBatching {
  preferred_batch_size?: number[];
  max_queue_delay_microseconds?: number;
  preserve_ordering?: boolean;
  priority_levels?: number;
  default_priority_level?: number;
  default_queue_policy?: ModelQueuePolicy;
  /** Keyed by priority level as a decimal string ("1", "2", ...). */
  priority_queue_policy?: Record<string, ModelQueuePolicy>;
}

export type SequenceControlKind = 'CONTROL_SEQUENCE_START' | 'CONTROL_SEQUENCE_READY' | 'CONTROL_SEQUENCE_END' | 'CONTROL_SEQUENCE_CORRID';

export interface ModelSequenceControl {
  kind?: SequenceControlKind;
  int32_false_true?: number[];
  fp32_false_true?: number[];
  bool_false_true?: boolean[];
  data_type?: DataType;
}

export interface ModelSequenceControlInput {
  name?: string;
  control?: ModelSequenceControl[];
}

export interface ModelSequenceInitialState {
  data_type?: DataType;
  dims?: number[];
  // oneof state_data:
  zero_data?: boolean;
  data_file?: string;
  name?: string;
}

export interface ModelSequenceState {
  input_name?: string;
  output_name?: string;
  data_type?: DataType;
  dims?: number[];
  initial_state?: ModelSequenceInitialState[];
  use_same_buffer_for_input_output?: boolean;
  use_growable_memory?: boolean;
}

export interface ModelSequenceBatching {
  // oneof strategy_choice:
  direct?: { max_queue_delay_microseconds?: number; minimum_slot_utilization?: number };
  oldest?: {
    max_candidate_sequences?: number;
    preferred_batch_size?: number[];
    max_queue_delay_microseconds?: number;
    preserve_ordering?: boolean;
  };
  max_sequence_idle_microseconds?: number;
  control_input?: ModelSequenceControlInput[];
  state?: ModelSequenceState[];
  iterative_sequence?: boolean;
}

export interface ModelEnsemblingStep {
  model_name?: string;
  model_version?: number;
  input_map?: Record<string, string>;
  output_map?: Record<string, string>;
  model_namespace?: string;
}

export interface ModelEnsembling {
  step?: ModelEnsemblingStep[];
  max_inflight_requests?: number;
}

export interface ModelParameter {
  string_value?: string;
}

export interface ModelWarmupInput {
  data_type?: DataType;
  dims?: number[];
  // oneof input_data_type:
  zero_data?: boolean;
  random_data?: boolean;
  input_data_file?: string;
}

export interface ModelWarmup {
  name?: string;
  batch_size?: number;
  inputs?: Record<string, ModelWarmupInput>;
  count?: number;
}

export interface ExecutionAccelerator {
  name?: string;
  parameters?: Record<string, string>;
}

/** Loosely typed: the server only passes most of this through. */
export interface ModelOptimizationPolicy {
  graph?: { level?: number };
  priority?: ModelPriority;
  cuda?: Record<string, unknown>;
  execution_accelerators?: {
    gpu_execution_accelerator?: ExecutionAccelerator[];
    cpu_execution_accelerator?: ExecutionAccelerator[];
  };
  input_pinned_memory?: { enable?: boolean };
  output_pinned_memory?: { enable?: boolean };
  gather_kernel_buffer_threshold?: number;
  eager_batching?: boolean;
}

export interface ModelConfig {
  name?: string;
  platform?: string;
  backend?: string;
  runtime?: string;
  version_policy?: ModelVersionPolicy;
  max_batch_size?: number;
  input?: ModelInput[];
  output?: ModelOutput[];
  batch_input?: Array<Record<string, unknown>>;
  batch_output?: Array<Record<string, unknown>>;
  optimization?: ModelOptimizationPolicy;
  // oneof scheduling_choice:
  dynamic_batching?: ModelDynamicBatching;
  sequence_batching?: ModelSequenceBatching;
  ensemble_scheduling?: ModelEnsembling;
  instance_group?: ModelInstanceGroup[];
  default_model_filename?: string;
  cc_model_filenames?: Record<string, string>;
  metric_tags?: Record<string, string>;
  parameters?: Record<string, ModelParameter>;
  model_warmup?: ModelWarmup[];
  model_operations?: { op_library_filename?: string[] };
  model_transaction_policy?: { decoupled?: boolean };
  model_repository_agents?: {
    agents?: Array<{ name?: string; parameters?: Record<string, string> }>;
  };
  response_cache?: { enable?: boolean };
  model_metrics?: Record<string, unknown>;
}
