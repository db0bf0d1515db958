// Original file: proto/grpc_service.proto


export interface ServerMetadataResponse {
  'name'?: (string);
  'version'?: (string);
  'extensions'?: (string)[];
}

export interface ServerMetadataResponse__Output {
  'name': (string);
  'version': (string);
  'extensions': (string)[];
}
