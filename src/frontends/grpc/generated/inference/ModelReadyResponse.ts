// Original file: proto/grpc_service.proto


export interface ModelReadyResponse {
  'ready'?: (boolean);
}

export interface ModelReadyResponse__Output {
  'ready': (boolean);
}
