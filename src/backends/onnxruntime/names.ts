// How configs name the ONNX Runtime backend, and its model file.
export const ONNX_PLATFORM = 'onnxruntime_onnx';
export const ONNX_BACKEND = 'onnxruntime';
export const DEFAULT_MODEL_FILENAME = 'model.onnx';
