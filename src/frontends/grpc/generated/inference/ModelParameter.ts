// Original file: proto/model_config.proto


export interface ModelParameter {
  'string_value'?: (string);
}

export interface ModelParameter__Output {
  'string_value': (string);
}
