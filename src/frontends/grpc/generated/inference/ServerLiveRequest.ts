// Original file: proto/grpc_service.proto


export interface ServerLiveRequest {
}

export interface ServerLiveRequest__Output {
}
