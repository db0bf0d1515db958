// Original file: proto/model_config.proto


export interface ModelTransactionPolicy {
  'decoupled'?: (boolean);
}

export interface ModelTransactionPolicy__Output {
  'decoupled': (boolean);
}
