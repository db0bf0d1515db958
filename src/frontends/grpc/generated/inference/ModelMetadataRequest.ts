// Original file: proto/grpc_service.proto


export interface ModelMetadataRequest {
  'name'?: (string);
  'version'?: (string);
}

export interface ModelMetadataRequest__Output {
  'name': (string);
  'version': (string);
}
