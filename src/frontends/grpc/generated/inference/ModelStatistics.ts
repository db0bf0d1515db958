// Original file: proto/grpc_service.proto

import type { InferStatistics as _inference_InferStatistics, InferStatistics__Output as _inference_InferStatistics__Output } from '../inference/InferStatistics.js';
import type { InferBatchStatistics as _inference_InferBatchStatistics, InferBatchStatistics__Output as _inference_InferBatchStatistics__Output } from '../inference/InferBatchStatistics.js';
import type { MemoryUsage as _inference_MemoryUsage, MemoryUsage__Output as _inference_MemoryUsage__Output } from '../inference/MemoryUsage.js';
import type { InferResponseStatistics as _inference_InferResponseStatistics, InferResponseStatistics__Output as _inference_InferResponseStatistics__Output } from '../inference/InferResponseStatistics.js';
import type { Long } from '@grpc/proto-loader';

export interface ModelStatistics {
  'name'?: (string);
  'version'?: (string);
  'last_inference'?: (number | string | Long);
  'inference_count'?: (number | string | Long);
  'execution_count'?: (number | string | Long);
  'inference_stats'?: (_inference_InferStatistics | null);
  'batch_stats'?: (_inference_InferBatchStatistics)[];
  'memory_usage'?: (_inference_MemoryUsage)[];
  'response_stats'?: ({[key: string]: _inference_InferResponseStatistics});
}

export interface ModelStatistics__Output {
  'name': (string);
  'version': (string);
  'last_inference': (string);
  'inference_count': (string);
  'execution_count': (string);
  'inference_stats': (_inference_InferStatistics__Output | null);
  'batch_stats': (_inference_InferBatchStatistics__Output)[];
  'memory_usage': (_inference_MemoryUsage__Output)[];
  'response_stats': ({[key: string]: _inference_InferResponseStatistics__Output});
}
