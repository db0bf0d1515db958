// The HTTP/REST client: JSON for the control calls, the binary tensor extension for inference
// (a JSON header, then every input's raw bytes written as they are: no base64, no JSON numbers).
import http from 'node:http';
import https from 'node:https';
import { ServalClientError } from './errors.js';
import { decodeOutput, encodeInput, fromJsonData, type InferInput, isDataType, type OutputTensor, type Parameters } from './tensor.js';
import {
  type InferenceClient,
  type InferOptions,
  type InferResult,
  type LoadOptions,
  type ModelMetadata,
  type ModelStatistics,
  type RepositoryModel,
  Result,
  requestParameters,
  type ServerMetadata,
} from './types.js';

export interface HttpClientOptions {
  /** Extra headers on every request, e.g. a restricted API's key (`{ 'admin-key': '...' }`). */
  headers?: Record<string, string>;
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

const enc = encodeURIComponent;

function modelPath(model: string, version: string | undefined): string {
  return `/v2/models/${enc(model)}${version ? `/versions/${enc(version)}` : ''}`;
}

export class HttpClient implements InferenceClient {
  private readonly base: URL;
  private readonly agent: http.Agent;
  private readonly headers: Record<string, string>;

  /** `url`: `host:port` or `http(s)://host:port[/prefix]`. */
  constructor(url: string, options: HttpClientOptions = {}) {
    this.base = new URL(/^https?:\/\//.test(url) ? url : `http://${url}`);
    this.agent = this.base.protocol === 'https:' ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
    this.headers = { ...options.headers };
  }

  close(): void {
    this.agent.destroy();
  }

  private request(
    method: string,
    path: string,
    body?: readonly Uint8Array[],
    headers: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<Reply> {
    const mod = this.base.protocol === 'https:' ? https : http;
    const length = body?.reduce((n, b) => n + b.byteLength, 0) ?? 0;
    return new Promise<Reply>((resolve, reject) => {
      const req = mod.request(
        {
          agent: this.agent,
          hostname: this.base.hostname,
          port: this.base.port,
          path: this.base.pathname.replace(/\/$/, '') + path,
          method,
          signal,
          headers: { ...this.headers, ...headers, ...(body ? { 'content-length': String(length) } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) }),
          );
        },
      );
      req.on('error', (e) =>
        reject(e.name === 'AbortError' ? new ServalClientError('request cancelled', { protocol: 'http' }, { cause: e }) : e),
      );
      // Each part goes out as it is: the tensors are never copied into one buffer.
      for (const b of body ?? []) req.write(b);
      req.end();
    });
  }

  /** A JSON call; a non-2xx answer throws with the server's `error` text. */
  private async call(method: string, path: string, doc?: unknown): Promise<unknown> {
    const body = doc === undefined ? undefined : [Buffer.from(JSON.stringify(doc))];
    const r = await this.request(method, path, body, body ? { 'content-type': 'application/json' } : {});
    if (r.status < 200 || r.status >= 300) throw errorOf(r);
    return r.body.byteLength ? JSON.parse(r.body.toString('utf8')) : undefined;
  }

  private async ok(path: string): Promise<boolean> {
    const r = await this.request('GET', path);
    return r.status === 200;
  }

  isServerLive(): Promise<boolean> {
    return this.ok('/v2/health/live');
  }
  isServerReady(): Promise<boolean> {
    return this.ok('/v2/health/ready');
  }
  isModelReady(model: string, version?: string): Promise<boolean> {
    return this.ok(`${modelPath(model, version)}/ready`);
  }
  async serverMetadata(): Promise<ServerMetadata> {
    return (await this.call('GET', '/v2')) as ServerMetadata;
  }
  async modelMetadata(model: string, version?: string): Promise<ModelMetadata> {
    return (await this.call('GET', modelPath(model, version))) as ModelMetadata;
  }
  async modelConfig(model: string, version?: string): Promise<Record<string, unknown>> {
    return (await this.call('GET', `${modelPath(model, version)}/config`)) as Record<string, unknown>;
  }
  async modelStatistics(model = '', version = ''): Promise<ModelStatistics[]> {
    const path = model ? `${modelPath(model, version)}/stats` : '/v2/models/stats';
    return ((await this.call('GET', path)) as { model_stats: ModelStatistics[] }).model_stats;
  }
  async repositoryIndex(readyOnly = false): Promise<RepositoryModel[]> {
    return (await this.call('POST', '/v2/repository/index', { ready: readyOnly })) as RepositoryModel[];
  }
  async loadModel(model: string, options: LoadOptions = {}): Promise<void> {
    const parameters: Record<string, string> = {};
    if (options.config !== undefined)
      parameters.config = typeof options.config === 'string' ? options.config : JSON.stringify(options.config);
    for (const [name, content] of Object.entries(options.files ?? {})) parameters[name] = Buffer.from(content).toString('base64');
    await this.call('POST', `/v2/repository/models/${enc(model)}/load`, { parameters });
  }
  async unloadModel(model: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    await this.call('POST', `/v2/repository/models/${enc(model)}/unload`, {
      parameters: { unload_dependents: options.unloadDependents ?? false },
    });
  }

  async infer(model: string, inputs: readonly InferInput[], options: InferOptions = {}): Promise<Result> {
    const raw = inputs.map((i) => ({ input: i, ...encodeInput(i) }));
    const parameters: Parameters = requestParameters(options);
    // Every output comes back binary: the whole list asks for it, or the request-wide flag does.
    if (!options.outputs) parameters.binary_data_output = true;
    const header = Buffer.from(
      JSON.stringify({
        ...(options.id ? { id: options.id } : {}),
        parameters: jsonParams(parameters),
        inputs: raw.map(({ input, datatype, bytes }) => ({
          name: input.name,
          shape: input.shape,
          datatype,
          parameters: { ...jsonParams(input.parameters ?? {}), binary_data_size: bytes.byteLength },
        })),
        ...(options.outputs
          ? {
              outputs: options.outputs.map((o) => {
                const spec = typeof o === 'string' ? { name: o } : o;
                return {
                  name: spec.name,
                  parameters: { binary_data: true, ...(spec.classCount ? { classification: spec.classCount } : {}) },
                };
              }),
            }
          : {}),
      }),
    );
    const r = await this.request(
      'POST',
      `${modelPath(model, options.version)}/infer`,
      [header, ...raw.map((x) => x.bytes)],
      { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.byteLength) },
      options.signal,
    );
    if (r.status !== 200) throw errorOf(r);
    return new Result(parseInferResponse(r));
  }
}

/** bigint parameters become JSON numbers when exact, else strings (JSON has no 64-bit integers). */
function jsonParams(p: Parameters): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(p)) out[k] = typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : String(v)) : v;
  return out;
}

interface JsonOutput {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Record<string, string | number | boolean> & { binary_data_size?: number };
  data?: unknown;
}

function parseInferResponse(r: Reply): InferResult {
  const hdr = r.headers['inference-header-content-length'];
  const jsonLength = hdr === undefined ? r.body.byteLength : Number(hdr);
  if (!Number.isInteger(jsonLength) || jsonLength < 0 || jsonLength > r.body.byteLength) {
    throw new ServalClientError(`bad Inference-Header-Content-Length '${hdr}' for a ${r.body.byteLength}-byte response`, {
      protocol: 'http',
    });
  }
  const doc = JSON.parse(r.body.subarray(0, jsonLength).toString('utf8')) as {
    model_name: string;
    model_version?: string;
    id?: string;
    parameters?: Parameters;
    outputs?: JsonOutput[];
  };
  let at = jsonLength;
  const outputs: OutputTensor[] = (doc.outputs ?? []).map((o) => {
    if (!isDataType(o.datatype)) throw new ServalClientError(`output '${o.name}': unknown datatype '${o.datatype}'`, { protocol: 'http' });
    const { binary_data_size: size, ...parameters } = o.parameters ?? {};
    let data: OutputTensor['data'];
    if (size !== undefined) {
      if (at + size > r.body.byteLength) throw new ServalClientError(`output '${o.name}': response body too short`, { protocol: 'http' });
      data = decodeOutput(o.name, o.datatype, o.shape, r.body.subarray(at, at + size));
      at += size;
    } else data = fromJsonData(o.name, o.datatype, o.data);
    return { name: o.name, datatype: o.datatype, shape: o.shape, data, parameters };
  });
  return { modelName: doc.model_name, modelVersion: doc.model_version ?? '', id: doc.id ?? '', parameters: doc.parameters ?? {}, outputs };
}

function errorOf(r: Reply): ServalClientError {
  let message = r.body.toString('utf8');
  try {
    const doc = JSON.parse(message) as { error?: unknown };
    if (typeof doc.error === 'string') message = doc.error;
  } catch {
    // not JSON: keep the text
  }
  return new ServalClientError(message || `HTTP ${r.status}`, { protocol: 'http', code: r.status });
}
