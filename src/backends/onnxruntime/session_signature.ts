// ONNX Runtime's own view of a session's inputs and outputs, in the signature's terms. The
// worker uses it to map names to indexes; the tests hold signature.ts (which reads the file
// before any session exists) to it.
import type ort from 'onnxruntime-node';
import type { IoSignature } from '../../config/signature.js';
import { fromOrtType } from '../../kernel/datatypes.js';

export function sessionSignature(meta: readonly ort.InferenceSession.ValueMetadata[]): IoSignature[] {
  return meta.map((m) => {
    if (!m.isTensor) return { name: m.name, datatype: undefined, rawType: 'non-tensor', dims: undefined };
    return {
      name: m.name,
      datatype: fromOrtType(m.type),
      rawType: m.type,
      dims: m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)),
    };
  });
}
