// Triton's raw binary request (HTTP, Inference-Header-Content-Length: 0): the body is the data of
// the model's only input, and the core fills in the rest from the config, as Triton's core does
// (InferenceRequest::Normalize): the input's name and datatype, and its shape from the config
// dims, with [1] prepended when the model batches and a single variable dimension sized from the
// byte count. Triton's texts; the checks that follow (byte size, batch size) are the usual ones.
import type { ResolvedModelConfig } from '../config/resolved.js';
import { elementSize } from '../kernel/datatypes.js';
import type { ServalError } from '../kernel/errors.js';
import type { InferRequest } from '../kernel/types.js';

export function withRawInput(req: InferRequest, config: ResolvedModelConfig, fail: (msg: string) => ServalError): InferRequest {
  const raw = req.inputs[0];
  const cfg = config.inputs[0];
  if (req.inputs.length !== 1 || config.inputs.length !== 1 || !raw || !cfg) {
    throw fail(
      `Raw request must only have 1 input (found ${req.inputs.length}) to be deduced but got ${config.inputs.length} inputs in '${config.name}' model configuration`,
    );
  }
  const shape = config.maxBatchSize > 0 ? [1] : [];
  let variable = -1;
  let count = 1;
  for (const d of cfg.dims) {
    if (d === -1) {
      if (variable !== -1) {
        throw fail(`The shape of the raw input '${cfg.name}' can not be deduced because there are more than one variable-sized dimension`);
      }
      variable = shape.length;
    } else count *= d;
    shape.push(d);
  }
  let data = raw.data;
  if (cfg.datatype === 'BYTES') {
    if (variable !== -1 || count !== 1) throw fail(`For BYTE datatype raw input '${cfg.name}', the model must have input shape [1]`);
    // The body is the one element's bytes; Triton prepends its 4-byte length.
    const element = Buffer.allocUnsafe(4 + data.byteLength);
    element.writeUInt32LE(data.byteLength, 0);
    element.set(data, 4);
    data = element;
  } else if (variable !== -1) {
    // Rounded down like Triton's; a remainder then fails the byte-size check.
    shape[variable] = count === 0 ? 0 : Math.floor(data.byteLength / count / elementSize(cfg.datatype));
  }
  return { ...req, rawInput: false, inputs: [{ name: cfg.name, datatype: cfg.datatype, shape, data }] };
}
