// Original file: proto/model_config.proto


export interface ModelOperations {
  'op_library_filename'?: (string)[];
}

export interface ModelOperations__Output {
  'op_library_filename': (string)[];
}
