// Original file: proto/grpc_service.proto


export interface SystemSharedMemoryUnregisterRequest {
  'name'?: (string);
}

export interface SystemSharedMemoryUnregisterRequest__Output {
  'name': (string);
}
