// A small KServe v2 REST client on node:http (not fetch: fetch adds Accept-Encoding and
// decompresses on its own, and the tests need to see exactly what went over the wire).
import http, { type IncomingHttpHeaders } from 'node:http';

export interface HttpResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text(): string;
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

/** Builds a binary-extension request body: JSON header, then the raw inputs in input order. */
export function binaryBody(
  inputs: BinaryInput[],
  extra: Record<string, unknown> = {},
): { body: Buffer; headerLength: number } {
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
  const header = Buffer.from(JSON.stringify(doc));
  return { body: Buffer.concat([header, ...blobs]), headerLength: header.byteLength };
}

export interface DecodedOutput {
  name: string;
  datatype: string;
  shape: number[];
  /** Present for JSON outputs. */
  data?: unknown[];
  /** Present for binary outputs. */
  raw?: Buffer;
  parameters?: Record<string, unknown>;
}

export interface DecodedResponse {
  model_name: string;
  model_version: string;
  id?: string;
  outputs: DecodedOutput[];
  /** The JSON part as text (to check exact digits that JSON.parse would round). */
  jsonText: string;
}

/** Splits a response body into its JSON header and binary outputs. */
export function decodeResponse(res: HttpResult): DecodedResponse {
  const hdr = res.headers['inference-header-content-length'];
  const jsonLen = hdr === undefined ? res.body.byteLength : Number(hdr);
  const jsonText = res.body.toString('utf8', 0, jsonLen);
  const doc = JSON.parse(jsonText) as DecodedResponse;
  let off = jsonLen;
  for (const o of doc.outputs) {
    const size = o.parameters?.binary_data_size;
    if (typeof size === 'number') {
      o.raw = res.body.subarray(off, off + size);
      off += size;
    }
  }
  if (off !== res.body.byteLength) throw new Error(`response has ${res.body.byteLength - off} unclaimed bytes`);
  doc.jsonText = jsonText;
  return doc;
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
