// Original file: proto/grpc_service.proto


export interface SystemSharedMemoryUnregisterResponse {
}

export interface SystemSharedMemoryUnregisterResponse__Output {
}
