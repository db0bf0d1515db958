// Original file: proto/grpc_service.proto


export interface ServerReadyRequest {
}

export interface ServerReadyRequest__Output {
}
