// Original file: proto/grpc_service.proto


export interface SystemSharedMemoryStatusRequest {
  'name'?: (string);
}

export interface SystemSharedMemoryStatusRequest__Output {
  'name': (string);
}
