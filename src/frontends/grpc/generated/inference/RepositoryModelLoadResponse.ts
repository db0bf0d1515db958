// Original file: proto/grpc_service.proto


export interface RepositoryModelLoadResponse {
}

export interface RepositoryModelLoadResponse__Output {
}
