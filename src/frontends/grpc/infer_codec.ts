// gRPC ModelInfer messages ⇄ core requests/responses. Inputs come as raw_input_contents (views,
// no copies) or as typed InferTensorContents; outputs always go back as raw_output_contents.
import { type DataType, elementSize, floatToHalf, isDataType, joinBytes } from '../../kernel/datatypes.js';
import { ServalError } from '../../kernel/errors.js';
import type { InferRequest, InferResponse, Params, ParamValue } from '../../kernel/types.js';
import type { InferParameter, InferParameter__Output } from './generated/inference/InferParameter.js';
import type { InferTensorContents__Output } from './generated/inference/InferTensorContents.js';
import type {
  _inference_ModelInferRequest_InferInputTensor__Output as InputTensor__Output,
  ModelInferRequest__Output,
} from './generated/inference/ModelInferRequest.js';
import type { ModelInferResponse } from './generated/inference/ModelInferResponse.js';

/**
 * A ModelInferRequest in proto-loader's shape (defaults on, longs as strings), as infer_wire.ts
 * reads it off the wire too, except that its shapes are numbers there.
 */
export type GrpcInferRequest = Omit<ModelInferRequest__Output, 'inputs'> & {
  inputs: (Omit<InputTensor__Output, 'shape' | 'contents'> & { shape: (string | number)[]; contents: GrpcTensorContents | null })[];
};
export type GrpcTensorContents = Partial<InferTensorContents__Output> & {
  /**
   * `bytes_contents` already serialized (4-byte length, bytes; element after element), as
   * infer_wire.ts reads them: no Buffer per element for tensors of millions of small strings.
   */
  bytes_serialized?: Buffer;
};

const bad = (msg: string): ServalError => ServalError.invalidArg(msg);

function paramValue(p: InferParameter__Output): ParamValue {
  switch (p.parameter_choice) {
    case 'bool_param':
      return p.bool_param ?? false;
    case 'string_param':
      return p.string_param ?? '';
    case 'double_param':
      return p.double_param ?? 0;
    case 'int64_param':
    case 'uint64_param': {
      const v = p.parameter_choice === 'int64_param' ? p.int64_param : p.uint64_param;
      const n = Number(v ?? 0);
      return Number.isSafeInteger(n) ? n : BigInt(v ?? 0);
    }
    default: {
      // Messages built without oneof names (older loaders): take whichever field is set.
      for (const k of ['bool_param', 'int64_param', 'string_param', 'double_param', 'uint64_param'] as const) {
        if (p[k] !== undefined) return paramValue({ ...p, parameter_choice: k });
      }
      return '';
    }
  }
}

function params(m: Record<string, InferParameter__Output> | undefined): Params {
  const out: Params = {};
  for (const [k, v] of Object.entries(m ?? {})) out[k] = paramValue(v);
  return out;
}

export function toGrpcParams(p: Params | undefined): Record<string, InferParameter> {
  const out: Record<string, InferParameter> = {};
  for (const [k, v] of Object.entries(p ?? {})) {
    if (typeof v === 'boolean') out[k] = { bool_param: v };
    else if (typeof v === 'string') out[k] = { string_param: v };
    else if (typeof v === 'bigint') out[k] = v >= 1n << 63n ? { uint64_param: v.toString() } : { int64_param: v.toString() };
    else if (Number.isInteger(v)) out[k] = { int64_param: v };
    else out[k] = { double_param: v };
  }
  return out;
}

/** Typed `contents` → raw little-endian bytes. */
function contentsToRaw(dt: DataType, c: GrpcTensorContents, name: string): Uint8Array {
  const pick = (): unknown[] | undefined => {
    switch (dt) {
      case 'BOOL':
        return c.bool_contents;
      case 'INT8':
      case 'INT16':
      case 'INT32':
        return c.int_contents;
      case 'INT64':
        return c.int64_contents;
      case 'UINT8':
      case 'UINT16':
      case 'UINT32':
        return c.uint_contents;
      case 'UINT64':
        return c.uint64_contents;
      case 'FP32':
        return c.fp32_contents;
      case 'FP64':
        return c.fp64_contents;
      case 'BYTES':
        return c.bytes_contents;
      case 'FP16':
        return undefined;
    }
  };
  const values = pick() ?? [];
  if (dt === 'FP16' && hasAny(c)) {
    throw bad(`input '${name}': FP16 data must be sent in raw_input_contents (InferTensorContents has no FP16 field)`);
  }
  if (dt === 'BYTES') return c.bytes_serialized ?? joinBytes(values as Buffer[]);
  const out = Buffer.alloc(values.length * elementSize(dt));
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const size = elementSize(dt);
  values.forEach((v, i) => {
    const o = i * size;
    switch (dt) {
      case 'BOOL':
        dv.setUint8(o, v ? 1 : 0);
        break;
      case 'INT8':
        dv.setInt8(o, Number(v));
        break;
      case 'INT16':
        dv.setInt16(o, Number(v), true);
        break;
      case 'INT32':
        dv.setInt32(o, Number(v), true);
        break;
      case 'INT64':
        dv.setBigInt64(o, BigInt(v as string), true);
        break;
      case 'UINT8':
        dv.setUint8(o, Number(v));
        break;
      case 'UINT16':
        dv.setUint16(o, Number(v), true);
        break;
      case 'UINT32':
        dv.setUint32(o, Number(v), true);
        break;
      case 'UINT64':
        dv.setBigUint64(o, BigInt(v as string), true);
        break;
      case 'FP32':
        dv.setFloat32(o, Number(v), true);
        break;
      case 'FP64':
        dv.setFloat64(o, Number(v), true);
        break;
      case 'FP16':
        dv.setUint16(o, floatToHalf(Number(v)), true);
        break;
    }
  });
  return out;
}

function hasAny(c: GrpcTensorContents): boolean {
  return Object.values(c).some((v) => (Array.isArray(v) || v instanceof Uint8Array) && v.length > 0);
}

/** The one `triton_` request parameter Triton's gRPC front-end accepts (its TRITON_RESERVED_REQUEST_PARAMS). */
export const EMPTY_FINAL_PARAM = 'triton_enable_empty_final_response';

/**
 * Triton's refusals of reserved request parameters: any other key starting with `triton_`, and
 * triton_enable_empty_final_response that is not a bool (unary calls accept and drop it too).
 */
function checkReserved(p: Params): void {
  for (const key of Object.keys(p)) {
    if (!key.startsWith('triton_')) continue;
    if (key !== EMPTY_FINAL_PARAM) {
      throw bad(
        `parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: ${EMPTY_FINAL_PARAM}`,
      );
    }
    if (typeof p[key] !== 'boolean') throw bad(`invalid value type for '${EMPTY_FINAL_PARAM}' parameter, expected bool_param.`);
  }
}

export function decodeGrpcInfer(msg: GrpcInferRequest): InferRequest {
  const reqParams = params(msg.parameters);
  checkReserved(reqParams);
  const raws = msg.raw_input_contents ?? [];
  const inputs = msg.inputs ?? [];
  // As in Triton, raw_input_contents are the data of the inputs that are not in shared memory, in order.
  const inShm = inputs.map((inp) => inp.parameters?.shared_memory_region !== undefined);
  const rawTaking = inShm.filter((s) => !s).length;
  if (raws.length && raws.length !== rawTaking) {
    const which = rawTaking === inputs.length ? 'inputs' : 'inputs outside shared memory';
    throw bad(
      `raw_input_contents has ${raws.length} entries but the request has ${rawTaking} ${which}; give raw contents for every input or for none`,
    );
  }
  let nextRaw = 0;
  return {
    modelName: msg.model_name,
    modelVersion: msg.model_version ?? '',
    id: msg.id ?? '',
    parameters: reqParams,
    inputs: inputs.map((inp, i) => {
      const p = params(inp.parameters);
      const shape = inp.shape.map((d) => Number(d));
      let data: Uint8Array;
      if (inShm[i]) {
        // The data lies in a registered region; the core reads (or refuses) it.
        if (inp.contents && hasAny(inp.contents)) {
          throw bad(`unexpected 'content' provided when using shared memory for input tensor '${inp.name}' for model '${msg.model_name}'`);
        }
        data = new Uint8Array(0);
      } else if (raws.length) {
        if (inp.contents && hasAny(inp.contents)) {
          throw bad(`input '${inp.name}' has both typed contents and raw_input_contents`);
        }
        data = raws[nextRaw++]!;
      } else {
        if (!isDataType(inp.datatype)) throw bad(`input '${inp.name}' has unknown datatype '${inp.datatype}'`);
        data = contentsToRaw(inp.datatype, inp.contents ?? {}, inp.name);
      }
      return { name: inp.name, datatype: inp.datatype, shape, data, parameters: p };
    }),
    outputs: (msg.outputs ?? []).map((o) => ({ name: o.name, parameters: params(o.parameters) })),
  };
}

export function encodeGrpcInfer(res: InferResponse): ModelInferResponse {
  return {
    model_name: res.modelName,
    model_version: res.modelVersion,
    id: res.id,
    parameters: toGrpcParams(res.parameters),
    outputs: res.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape, parameters: {} })),
    raw_output_contents: res.outputs.map((o) => Buffer.from(o.data.buffer, o.data.byteOffset, o.data.byteLength)),
  };
}
