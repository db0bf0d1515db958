// Original file: proto/grpc_service.proto


export interface CudaSharedMemoryUnregisterResponse {
}

export interface CudaSharedMemoryUnregisterResponse__Output {
}
