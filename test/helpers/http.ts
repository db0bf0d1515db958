// A small KServe v2 REST client on node:http (not fetch: fetch adds Accept-Encoding and
// decompresses on its own, and the tests need to see exactly what went over the wire).
import http, { type IncomingHttpHeaders } from 'node:http';

export interface HttpResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text(): string;
  /** The body as JSON; untyped unless `T` is given: the test's expectations check what it reads. */
  // biome-ignore lint/suspicious/noExplicitAny: a response body is checked by the test's expectations, not by a declared type
  json<T = any>(): T;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

export function request(
  base: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string | number>; body?: Buffer | string; timeoutMs?: number } = {},
): Promise<HttpResult> {
  const u = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: opts.headers ?? {}, agent },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            text: () => body.toString('utf8'),
            json: () => JSON.parse(body.toString('utf8')),
          });
        });
      },
    );
    req.setTimeout(opts.timeoutMs ?? 30_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    if (opts.body !== undefined) req.end(opts.body);
    else req.end();
  });
}

export const get = (base: string, path: string): Promise<HttpResult> => request(base, 'GET', path);

export function postJson(base: string, path: string, doc: unknown, headers: Record<string, string> = {}): Promise<HttpResult> {
  return request(base, 'POST', path, {
    headers: { 'content-type': 'application/json', ...headers },
    body: Buffer.from(typeof doc === 'string' ? doc : JSON.stringify(doc)),
  });
}

export interface BinaryInput {
  name: string;
  datatype: string;
  shape: number[];
  /** Raw little-endian bytes sent with the binary extension; or `json` data sent in the JSON. */
  raw?: Uint8Array;
  json?: unknown;
  parameters?: Record<string, unknown>;
}

export interface RequestedOutput {
  name: string;
  parameters?: Record<string, unknown>;
}

/** A binary-extension body as it goes over the wire: the JSON header, then the blobs; and the header's length. */
export function joinBinaryBody(doc: unknown, blobs: readonly Uint8Array[] = []): { body: Buffer; headerLength: number } {
  const header = Buffer.from(JSON.stringify(doc));
  return { body: Buffer.concat([header, ...blobs]), headerLength: header.byteLength };
}

/** Builds a binary-extension request body: JSON header, then the raw inputs in input order. */
export function binaryBody(inputs: BinaryInput[], extra: Record<string, unknown> = {}): { body: Buffer; headerLength: number } {
  const blobs: Uint8Array[] = [];
  const doc = {
    ...extra,
    inputs: inputs.map((i) => {
      const base: Record<string, unknown> = { name: i.name, datatype: i.datatype, shape: i.shape };
      if (i.raw) {
        blobs.push(i.raw);
        base.parameters = { ...(i.parameters ?? {}), binary_data_size: i.raw.byteLength };
      } else {
        base.data = i.json;
        if (i.parameters) base.parameters = i.parameters;
      }
      return base;
    }),
  };
  return joinBinaryBody(doc, blobs);
}

/** An output of an inference response's JSON. */
export interface HttpOutput {
  name: string;
  datatype: string;
  shape: number[];
  /** Present for JSON outputs. */
  data?: unknown[];
  parameters?: Record<string, unknown>;
}

/** An inference response's JSON. */
export interface HttpInferResponse {
  model_name: string;
  model_version: string;
  id?: string;
  parameters?: Record<string, unknown>;
  outputs: HttpOutput[];
}

export interface DecodedOutput extends HttpOutput {
  /** Present for binary outputs. */
  raw?: Buffer;
}

export interface DecodedResponse extends HttpInferResponse {
  outputs: DecodedOutput[];
  /** The JSON part as text (to check exact digits that JSON.parse would round). */
  jsonText: string;
}

/**
 * Splits a response body into its JSON header and the binary outputs it announces, in output
 * order (`raw` of an output with binary_data_size). Throws when the binary tail is not exactly
 * what the header announces.
 */
function splitBody(body: Buffer, headerLength: number): DecodedResponse {
  const jsonText = body.toString('utf8', 0, headerLength);
  const doc = JSON.parse(jsonText) as DecodedResponse;
  let off = headerLength;
  for (const o of doc.outputs) {
    const size = o.parameters?.binary_data_size;
    if (typeof size !== 'number') continue;
    if (off + size > body.byteLength) throw new Error(`output '${o.name}' announces ${size} bytes past the end of the body`);
    o.raw = body.subarray(off, off + size);
    off += size;
  }
  if (off !== body.byteLength) throw new Error(`the response has ${body.byteLength - off} bytes no output claims`);
  doc.jsonText = jsonText;
  return doc;
}

/** A response body as its JSON header (without the binary parts) and its binary outputs by name. */
export function splitBinaryResponse(body: Buffer, headerLength: number): { doc: HttpInferResponse; binary: Map<string, Buffer> } {
  const { jsonText, ...doc } = splitBody(body, headerLength);
  const binary = new Map<string, Buffer>();
  doc.outputs = doc.outputs.map(({ raw, ...o }) => {
    if (raw) binary.set(o.name, raw);
    return o;
  });
  return { doc, binary };
}

/** Splits a response into its JSON header and binary outputs (Inference-Header-Content-Length; none: all JSON). */
export function decodeResponse(res: HttpResult): DecodedResponse {
  const hdr = res.headers['inference-header-content-length'];
  return splitBody(res.body, hdr === undefined ? res.body.byteLength : Number(hdr));
}

export async function inferBinary(
  base: string,
  model: string,
  inputs: BinaryInput[],
  opts: { outputs?: RequestedOutput[]; binaryOutput?: boolean; id?: string; version?: string; headers?: Record<string, string> } = {},
): Promise<HttpResult> {
  const extra: Record<string, unknown> = {};
  if (opts.id !== undefined) extra.id = opts.id;
  if (opts.binaryOutput !== undefined) extra.parameters = { binary_data_output: opts.binaryOutput };
  if (opts.outputs) extra.outputs = opts.outputs;
  const { body, headerLength } = binaryBody(inputs, extra);
  const path = opts.version ? `/v2/models/${model}/versions/${opts.version}/infer` : `/v2/models/${model}/infer`;
  return request(base, 'POST', path, {
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': headerLength, ...(opts.headers ?? {}) },
    body,
  });
}

export function inferJson(base: string, model: string, doc: unknown, version?: string): Promise<HttpResult> {
  const path = version ? `/v2/models/${model}/versions/${version}/infer` : `/v2/models/${model}/infer`;
  return postJson(base, path, doc);
}
