// Original file: proto/model_config.proto


export interface ModelResponseCache {
  'enable'?: (boolean);
}

export interface ModelResponseCache__Output {
  'enable': (boolean);
}
