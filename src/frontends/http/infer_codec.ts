// KServe v2 REST inference bodies ⇄ core requests/responses, including Triton's binary tensor
// data extension: a JSON header of `Inference-Header-Content-Length` bytes, then raw tensors.
import { elementCount, isDataType, jsonToRaw, rawToJson } from '../../kernel/datatypes.js';
import { ServalError } from '../../kernel/errors.js';
import { encodeJson, parseJsonExact } from '../../kernel/json.js';
import type { InferRequest, InferResponse, Params, ParamValue, RequestedOutput } from '../../kernel/types.js';

const bad = (msg: string): ServalError => ServalError.invalidArg(msg);

/**
 * Triton's answer to a body that is not JSON: its JSON reader's error (INTERNAL, so HTTP 500 since
 * 2.73 maps the code) with its prefix; the reason is the JSON parser's own words.
 */
export function unparsable(e: unknown): ServalError {
  return ServalError.malformed(`failed to parse the request JSON buffer: ${(e as Error).message}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A `parameters` object, checked. `framing` is a key that says how the tensor travels rather than
 * something the model is given: it is checked like the others but left out (rather than deleted
 * afterwards, which would turn the object into a slow dictionary-mode one).
 */
function params(v: unknown, where: string, framing?: string): Params {
  if (v === undefined) return {};
  if (!isObject(v)) throw bad(`${where}: 'parameters' must be a JSON object`);
  const out: Params = {};
  for (const k in v) {
    if (!Object.hasOwn(v, k)) continue;
    const p = v[k];
    if (typeof p === 'string' || typeof p === 'number' || typeof p === 'boolean' || typeof p === 'bigint') {
      if (k !== framing) out[k] = p;
    } else throw bad(`${where}: parameter '${k}' must be a string, number or boolean`);
  }
  return out;
}

export interface DecodedInfer {
  request: InferRequest;
  /** Output names that go back as binary data. */
  binaryOutputs: Set<string>;
  /** Request-level default for outputs not listed. */
  binaryDefault: boolean;
}

/**
 * Decodes a request body. `headerLength` is the Inference-Header-Content-Length header
 * (undefined: the whole body is JSON). Binary inputs become views over `body`.
 */
export function decodeInferRequest(body: Buffer, headerLength: number | undefined, modelName: string, modelVersion: string): DecodedInfer {
  if (headerLength !== undefined && (!Number.isInteger(headerLength) || headerLength < 0 || headerLength > body.byteLength)) {
    throw bad(`Inference-Header-Content-Length ${headerLength} is not a valid length for a request body of ${body.byteLength} bytes`);
  }
  if (headerLength === 0) return decodeRawRequest(body, modelName, modelVersion);
  const jsonEnd = headerLength ?? body.byteLength;
  let doc: unknown;
  try {
    doc = parseJsonExact(body.toString('utf8', 0, jsonEnd));
  } catch (e) {
    throw unparsable(e);
  }
  if (!isObject(doc)) throw bad('the request JSON must be an object');
  const id = doc.id === undefined ? '' : doc.id;
  if (typeof id !== 'string') throw bad(`'id' must be a string`);
  const reqParams = params(doc.parameters, 'request', 'binary_data_output');
  // Triton's HTTP front-end takes no `triton_` parameter (not even gRPC's triton_enable_empty_final_response).
  if (Object.keys(reqParams).some((k) => k.startsWith('triton_'))) {
    throw bad("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.");
  }
  if (!Array.isArray(doc.inputs)) throw bad(`the request must have an 'inputs' array`);

  let offset = jsonEnd;
  const inputs = doc.inputs.map((raw: unknown, i: number) => {
    if (!isObject(raw)) throw bad(`inputs[${i}] must be a JSON object`);
    const name = raw.name;
    if (typeof name !== 'string' || !name) throw bad(`inputs[${i}] must have a string 'name'`);
    const where = `input '${name}'`;
    const datatype = raw.datatype;
    if (typeof datatype !== 'string') throw bad(`${where} must have a string 'datatype'`);
    const shape = raw.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
      throw bad(`${where} must have a 'shape' array of non-negative integers`);
    }
    const p = params(raw.parameters, where, 'binary_data_size');
    const size = (raw.parameters as Record<string, unknown> | undefined)?.binary_data_size;
    let data: Uint8Array;
    if (p.shared_memory_region !== undefined) {
      // The data lies in a registered region; the core reads (or refuses) it.
      if (raw.data !== undefined || size !== undefined) {
        const set = [raw.data !== undefined && "'data'", size !== undefined && "'binary_data_size'"].filter(Boolean);
        throw bad(
          "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', " +
            `'shared_memory_region' in 'parameters'. But set ${set.join(' ')} 'shared_memory_region'`,
        );
      }
      data = new Uint8Array(0);
    } else if (size !== undefined) {
      if (typeof size !== 'number' || !Number.isInteger(size) || size < 0) {
        throw bad(`${where}: 'binary_data_size' must be a non-negative integer`);
      }
      if (raw.data !== undefined) throw bad(`${where}: has both 'data' and 'binary_data_size'`);
      if (headerLength === undefined) {
        throw bad(`${where} has 'binary_data_size' but the request has no Inference-Header-Content-Length header`);
      }
      if (offset + size > body.byteLength) {
        throw bad(
          `${where}: binary_data_size ${size} runs past the end of the request body (${body.byteLength - offset} bytes of binary data left)`,
        );
      }
      data = body.subarray(offset, offset + size);
      offset += size;
    } else {
      if (raw.data === undefined) throw bad(`${where} has neither 'data' nor 'binary_data_size'`);
      if (!isDataType(datatype)) throw bad(`${where} has unknown datatype '${datatype}'`);
      if (datatype === 'FP16') {
        throw bad(`receiving FP16 data via JSON is not supported. Please use the binary data format for input ${name}`);
      }
      data = jsonToRaw(datatype, raw.data, where, elementCount(shape as number[]));
    }
    return { name, datatype, shape: shape as number[], data, parameters: p };
  });
  if (offset !== body.byteLength) {
    throw bad(`the request body has ${body.byteLength - offset} bytes of binary data that no input claims`);
  }

  // How the response is framed, not something the model is asked (Triton does not pass it on: params() left it out).
  const binaryOutput = (doc.parameters as Record<string, unknown> | undefined)?.binary_data_output;
  if (binaryOutput !== undefined && typeof binaryOutput !== 'boolean') {
    throw bad("Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean");
  }
  const binaryDefault = binaryOutput === true;
  const binaryOutputs = new Set<string>();
  let outputs: RequestedOutput[] | undefined;
  if (doc.outputs !== undefined) {
    if (!Array.isArray(doc.outputs)) throw bad(`'outputs' must be an array`);
    outputs = doc.outputs.map((raw: unknown, i: number) => {
      if (!isObject(raw) || typeof raw.name !== 'string') throw bad(`outputs[${i}] must be an object with a string 'name'`);
      const p = params(raw.parameters, `output '${raw.name}'`);
      if (p.shared_memory_region !== undefined && p.binary_data === true) {
        throw bad("Output can't set both 'shared_memory_region' and 'binary_data'");
      }
      const binary = p.binary_data === undefined ? binaryDefault : p.binary_data === true;
      if (binary) binaryOutputs.add(raw.name);
      return { name: raw.name, parameters: p };
    });
  }
  return {
    request: { modelName, modelVersion, id, inputs, outputs, parameters: reqParams },
    binaryOutputs,
    binaryDefault,
  };
}

/**
 * Triton's raw binary request (Inference-Header-Content-Length: 0, no JSON): the whole body is the
 * data of the model's single input; the core fills in its name, datatype and shape from the
 * config. Every output comes back as binary data, as in Triton.
 */
function decodeRawRequest(body: Buffer, modelName: string, modelVersion: string): DecodedInfer {
  return {
    request: {
      modelName,
      modelVersion,
      id: '',
      inputs: [{ name: '', datatype: '', shape: [], data: body }],
      parameters: {},
      rawInput: true,
    },
    binaryOutputs: new Set(),
    binaryDefault: true,
  };
}

export interface EncodedResponse {
  /** Chunks to send in order: the JSON header, then binary tensors. */
  chunks: Uint8Array[];
  /** Set when binary data follows the JSON. */
  headerLength?: number;
}

export function encodeInferResponse(res: InferResponse, decoded: DecodedInfer): EncodedResponse {
  const binary: Uint8Array[] = [];
  const allBinary = !decoded.request.outputs?.length && decoded.binaryDefault;
  const outputs = res.outputs.map((o) => {
    // In the request's shared-memory region: Triton sends neither data nor binary_data_size.
    if (o.sharedMemory) return { name: o.name, datatype: o.datatype, shape: o.shape };
    if (allBinary || decoded.binaryOutputs.has(o.name)) {
      binary.push(o.data);
      const parameters: Record<string, ParamValue> = { binary_data_size: o.data.byteLength };
      return { name: o.name, datatype: o.datatype, shape: o.shape, parameters };
    }
    if (o.datatype === 'FP16') {
      throw bad('sending FP16 data via JSON is not supported. Please use the binary data format for output');
    }
    return { name: o.name, datatype: o.datatype, shape: o.shape, data: rawToJson(o.datatype, o.data, `output '${o.name}'`) };
  });
  const doc: Record<string, unknown> = { model_name: res.modelName, model_version: res.modelVersion };
  if (res.id) doc.id = res.id;
  if (res.parameters && Object.keys(res.parameters).length) doc.parameters = res.parameters;
  doc.outputs = outputs;
  // Names, shapes and byte sizes only (all outputs binary, no parameters): nothing needs the
  // exact-integer encoder, whose replacer costs more than the plain stringify.
  const plain = binary.length === outputs.length && doc.parameters === undefined;
  const json = Buffer.from(plain ? JSON.stringify(doc) : encodeJson(doc), 'utf8');
  if (!binary.length) return { chunks: [json] };
  return { chunks: [json, ...binary], headerLength: json.byteLength };
}
