// Original file: proto/grpc_service.proto


export interface RepositoryModelUnloadResponse {
}

export interface RepositoryModelUnloadResponse__Output {
}
