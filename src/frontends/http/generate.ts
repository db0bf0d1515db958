// Triton's generate extension (protocol/extension_generate.md, http_server.cc HandleGenerate):
// POST /v2/models/{m}[/versions/{v}]/generate and .../generate_stream. A flat JSON body becomes one
// inference request (a field naming a model input is that tensor, any other field a request
// parameter); each response becomes a flat JSON object (model_name, model_version, each output by
// name). /generate answers with exactly one such object; /generate_stream sends one Server-Sent
// Event per response as the model produces it. A thin translation over core.inferStream.
import { PassThrough, Readable } from 'node:stream';
import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify';
import type { CoreApi } from '../../core/api.js';
import { Cancellation } from '../../kernel/cancel.js';
import { type DataType, floatText, isFloatArray, jsonToRaw, rawToJson } from '../../kernel/datatypes.js';
import { asServalError, isServerFault, ServalError } from '../../kernel/errors.js';
import { encodeJson, parseJsonExact } from '../../kernel/json.js';
import type { Logger } from '../../kernel/log.js';
import type { InferInputTensor, InferRequest, InferResponse, ParamValue, ResponseSink, TensorMetadata } from '../../kernel/types.js';
import { httpInferTracing } from './trace_logging.js';

export interface GenerateOptions {
  core: CoreApi;
  /** Server faults reported inside a response that has already started are logged here. */
  log: Logger;
}

type ModelParams = { model: string; version?: string };

const bad = (msg: string): ServalError => ServalError.invalidArg(msg);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Triton's texts, word for word (http_server.cc). */
export const GENERATE_TEXTS = {
  notIdentity: "Unsupported content-encoding, only 'identity' is supported.",
  notOneResponse:
    'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses',
  sseContentType: 'text/event-stream; charset=utf-8',
} as const;

/**
 * Triton's status for a request whose first response is an error: 400 whatever the error's
 * code (its HTTP front-end frees the error before reading its code; tritonserver 2.51 answers
 * 400 for every code, see docs/protocol.md). Refusals before the request is queued keep their code's status.
 */
const FIRST_RESPONSE_ERROR_STATUS = 400;

const now = (): bigint => process.hrtime.bigint();

export const generateRoutes: FastifyPluginCallback<GenerateOptions> = (app, opts, done) => {
  const { core, log } = opts;
  const tracing = httpInferTracing(core);

  const handler =
    (streaming: boolean) =>
    async (req: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply): Promise<FastifyReply> => {
      const trace = tracing.received(req);
      const model = req.params.model;
      const version = req.params.version ?? '';
      // Triton reads the model's inputs before the body: an unknown model is refused first.
      const inputs = new Map(core.modelMetadata(model, version).inputs.map((t) => [t.name, t]));
      const encoding = req.headers['content-encoding'];
      if (encoding !== undefined && String(encoding).trim().toLowerCase() !== 'identity') throw bad(GENERATE_TEXTS.notIdentity);
      const request = decodeGenerateRequest(req.body as Buffer | undefined, inputs, model, version);
      req.body = undefined;
      // Closing the connection before the last response cancels the request (Triton's RequestFiniHook).
      const cancellation = new Cancellation();
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) cancellation.cancel();
      });
      request.cancellation = cancellation;
      if (streaming) {
        // The server is half-open (a client may shut down its sending side and still read), but a
        // stream may stay quiet as long as its model likes, and a client that closed its socket
        // cannot be told from a half-closed one until a write fails: for a stream, the end of the
        // client's side is taken as the client going away, and closes the connection.
        const socket = req.raw.socket;
        const gone = (): void => {
          if (!reply.raw.writableFinished) socket.destroy();
        };
        if (socket.readableEnded) gone();
        else {
          socket.once('end', gone);
          reply.raw.once('close', () => socket.off('end', gone));
        }
      }
      if (trace) request.trace = trace;
      // An error before the core queued the request is a refusal (its status, a JSON body, as
      // Triton's before TRITONSERVER_ServerInferAsync returns); after it, the model's answer.
      let admitted = false;
      request.admitted = () => {
        admitted = true;
      };
      const inBand = (e: ServalError): string => {
        if (isServerFault(e)) {
          log.error('http request failed', {
            request_id: req.id,
            inference_id: request.id || undefined,
            method: req.method,
            url: req.url,
            error: e.stack ?? e.message,
          });
        }
        return errorJson(e.message);
      };
      const answered = (): void => trace?.stamp('INFER_RESPONSE_COMPLETE', now());
      // A response's JSON, or the error JSON when it cannot be written as JSON (an FP16 output),
      // and whether it failed; nothing for the final flag alone.
      const encoded = (res: InferResponse | undefined): [string | undefined, boolean] => {
        if (!res) return [undefined, false];
        try {
          return [encodeGenerateResponse(res), false];
        } catch (e) {
          return [inBand(asServalError(e)), true];
        }
      };

      return new Promise<FastifyReply>((resolve, reject) => {
        /**
         * The request's sink: each response or error to `deliver` as JSON, whether it failed, and
         * the final flag. An error before anything was delivered (`started`) and before the core
         * took the request in is a refusal: its own status and body.
         */
        const sinkTo = (
          deliver: (json: string | undefined, failed: boolean, final: boolean) => void,
          started: () => boolean,
        ): ResponseSink => {
          let ended = false;
          return {
            response: (res, final) => {
              if (ended) return;
              ended = final;
              answered();
              const [json, failed] = encoded(res);
              deliver(json, failed, final);
            },
            error: (e, final) => {
              if (ended) return;
              ended = final;
              if (!started() && !admitted) return reject(e);
              answered();
              deliver(inBand(e), true, final);
            },
          };
        };
        if (streaming) {
          let events: PassThrough | undefined;
          const emit = (json: string | undefined, failed: boolean, final: boolean): void => {
            if (!events) {
              // The first response (or the final flag alone) fixes the status: Triton starts the chunked reply on it.
              events = new PassThrough();
              if (trace) tracing.sending(req);
              reply
                .code(failed ? FIRST_RESPONSE_ERROR_STATUS : 200)
                .header('content-type', GENERATE_TEXTS.sseContentType)
                // Chunked even when nothing follows (Node would answer an empty stream with Content-Length: 0).
                .header('transfer-encoding', 'chunked')
                .send(events);
              resolve(reply);
            }
            if (events.destroyed) return;
            if (json !== undefined) events.write(`data: ${json}\n\n`);
            if (final) events.end();
          };
          core.inferStream(
            request,
            sinkTo(emit, () => events !== undefined),
          );
          return;
        }
        // /generate: Triton collects every response and answers once, at the final flag; more
        // or fewer than one response is an error (with the status the first callback set).
        let count = 0;
        let body: string | undefined;
        let firstFailed: boolean | undefined;
        const collect = (json: string | undefined, failed: boolean, final: boolean): void => {
          firstFailed ??= failed;
          if (json !== undefined) body = ++count === 1 ? json : undefined;
          if (!final) return;
          if (trace) tracing.sending(req);
          reply
            .code(firstFailed ? FIRST_RESPONSE_ERROR_STATUS : 200)
            .header('content-type', 'application/json')
            // A stream of one Buffer: chunked, as Triton answers a request the model answered (its
            // reply starts at the first response); a Buffer, since fastify would add "; charset=utf-8"
            // to a string's type, which Triton does not send.
            .send(Readable.from([Buffer.from(count === 1 && body !== undefined ? body : errorJson(GENERATE_TEXTS.notOneResponse))]));
          resolve(reply);
        };
        core.inferStream(
          request,
          sinkTo(collect, () => firstFailed !== undefined),
        );
      });
    };

  const route = { onRequest: tracing.onRequest };
  for (const base of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    app.post<{ Params: ModelParams }>(`${base}/generate`, route, handler(false));
    app.post<{ Params: ModelParams }>(`${base}/generate_stream`, route, handler(true));
    // Another method on these paths is Triton's 405, not a missing route.
    for (const path of [`${base}/generate`, `${base}/generate_stream`]) {
      app.route({
        method: ['GET', 'PUT', 'DELETE', 'PATCH'],
        url: path,
        handler: (_req, reply) => {
          // Triton's status line too: "405 Not Allowed".
          reply.raw.statusMessage = 'Not Allowed';
          return reply
            .code(405)
            .header('content-type', 'application/json')
            .send(Buffer.from(errorJson('Method Not Allowed')));
        },
      });
    }
  }
  done();
};

const errorJson = (message: string): string => JSON.stringify({ error: message });

/**
 * A generate body → an inference request, as Triton's ConvertGenerateRequest maps it: each
 * top-level field (and each field of `parameters`) that names a model input is that input's
 * tensor, any other a request parameter; `id` is also the request id.
 */
export function decodeGenerateRequest(
  body: Buffer | undefined,
  inputs: ReadonlyMap<string, TensorMetadata>,
  modelName: string,
  modelVersion: string,
): InferRequest {
  let doc: unknown;
  try {
    doc = parseJsonExact(body ? body.toString('utf8') : '');
  } catch (e) {
    throw bad(`failed to parse the request JSON buffer: ${(e as Error).message}`);
  }
  if (!isObject(doc)) throw bad('attempt to get members for non-object');
  const req: InferRequest = { modelName, modelVersion, id: '', inputs: [], parameters: {} };
  if (doc.id !== undefined) {
    if (typeof doc.id !== 'string') throw bad("Unable to parse 'id': attempt to access JSON non-string as string");
    req.id = doc.id;
  }
  for (const [name, value] of Object.entries(doc)) {
    if (name !== 'parameters') {
      mapField(req, name, value, inputs);
      continue;
    }
    if (inputs.has(name)) throw bad("Keyword 'parameters' for nested schema also given as input tensor name");
    if (!isObject(value)) throw bad("Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object");
    try {
      for (const [k, v] of Object.entries(value)) mapField(req, k, v, inputs);
    } catch (e) {
      const err = e as ServalError;
      throw new ServalError(err.code, `Converting keyword: 'parameters': ${err.message}`);
    }
  }
  return req;
}

function mapField(req: InferRequest, name: string, value: unknown, inputs: ReadonlyMap<string, TensorMetadata>): void {
  const meta = inputs.get(name);
  if (!meta) {
    req.parameters[name] = parameterValue(name, value);
    return;
  }
  if (req.inputs.some((t) => t.name === name)) {
    throw bad(`[request id: ${req.id || '<id_unknown>'}] input '${name}' already exists in request`);
  }
  req.inputs.push(generateTensor(meta, value));
}

function parameterValue(name: string, value: unknown): ParamValue {
  // Triton takes strings, booleans and numbers (integers, and doubles since 2.51) as parameters.
  if (typeof value === 'string' || typeof value === 'boolean' || typeof value === 'number' || typeof value === 'bigint') return value;
  throw bad(`parameter '${name}' has invalid type. It should be either 'int', 'bool', or 'string'.`);
}

/**
 * A field's JSON value → the input tensor: a scalar is one element, an array its elements (one
 * level: Triton counts only the top-level ones). The shape is the model's input shape with the
 * element count spread over it (Triton's rule): fixed dimensions take their share, the innermost
 * variable dimension the rest, other variable dimensions 1.
 */
function generateTensor(meta: TensorMetadata, value: unknown): InferInputTensor {
  const { name } = meta;
  const datatype = meta.datatype as DataType;
  const count = Array.isArray(value) ? value.length : 1;
  const what = `input '${name}'`;
  // Triton sizes BYTES elements before the shape; other types are read after it.
  const bytes = datatype === 'BYTES' ? jsonToRaw(datatype, value, what, count) : undefined;
  const shape = [...meta.shape];
  let left = count;
  const unfit = (): ServalError => bad(`The schema can not convert input '${name}' to tensor with proper shape`);
  for (let i = shape.length - 1; i >= 0; i--) {
    const d = shape[i]!;
    if (d === -1) continue;
    if (d === 0 ? left !== 0 : left % d !== 0) throw unfit();
    left = d === 0 ? 0 : left / d;
  }
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] === -1) {
      shape[i] = left;
      left = 1;
    }
  }
  if (left !== 1) throw unfit();
  if (datatype === 'FP16') throw bad(`receiving FP16 data via JSON is not supported. Please use the binary data format for input ${name}`);
  return { name, datatype, shape, data: bytes ?? jsonToRaw(datatype, value, what, count) };
}

/**
 * A response → Triton's generate JSON: id (when set), model_name, model_version, then each
 * response parameter and each output under its own name; a one-element output as a bare value,
 * any other as a flat array. Keys come in byte order and a name already taken is skipped, as
 * Triton's std::map of fields gives them (reserved names first, then parameters, then outputs).
 */
export function encodeGenerateResponse(res: InferResponse): string {
  const fields = new Map<string, string>();
  if (res.id) fields.set('id', JSON.stringify(res.id));
  fields.set('model_name', JSON.stringify(res.modelName));
  fields.set('model_version', JSON.stringify(res.modelVersion));
  if (res.parameters) for (const [k, v] of Object.entries(res.parameters)) if (!fields.has(k)) fields.set(k, encodeJson(v));
  for (const o of res.outputs) {
    if (fields.has(o.name)) continue;
    if (o.datatype === 'FP16') throw bad('sending FP16 data via JSON is not supported. Please use the binary data format for output');
    const data = rawToJson(o.datatype, o.data, `output '${o.name}'`);
    // A single value is written bare; a float one as the JSON encoder writes float data (1.0, not 1).
    fields.set(o.name, data.length !== 1 ? encodeJson(data) : isFloatArray(data) ? floatText(data[0]!) : encodeJson(data[0]));
  }
  // Written by hand: a JS object would put integer-like keys ("0") first.
  let out = '{';
  for (const name of [...fields.keys()].sort(byteOrder)) out += `${out.length > 1 ? ',' : ''}${JSON.stringify(name)}:${fields.get(name)}`;
  return `${out}}`;
}

/** UTF-8 byte order (std::string's), from UTF-16: a surrogate (a code point above U+FFFF) sorts after U+E000..U+FFFF. */
function byteOrder(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && x <= 0xdfff) x += 0x10000;
    if (y >= 0xd800 && y <= 0xdfff) y += 0x10000;
    return x - y;
  }
  return a.length - b.length;
}
