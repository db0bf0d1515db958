// Original file: proto/grpc_service.proto


export interface ModelConfigRequest {
  'name'?: (string);
  'version'?: (string);
}

export interface ModelConfigRequest__Output {
  'name': (string);
  'version': (string);
}
