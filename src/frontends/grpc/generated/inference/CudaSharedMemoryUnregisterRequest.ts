// Original file: proto/grpc_service.proto


export interface CudaSharedMemoryUnregisterRequest {
  'name'?: (string);
}

export interface CudaSharedMemoryUnregisterRequest__Output {
  'name': (string);
}
