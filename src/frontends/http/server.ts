// The KServe v2 REST front-end (fastify). Thin: decode, call the core, encode.
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { CoreApi } from '../../core/api.js';
import type { BudgetTicket, ByteBudget } from '../../kernel/byte_budget.js';
import { Cancellation } from '../../kernel/cancel.js';
import { httpStatus, isServerFault, ServalError } from '../../kernel/errors.js';
import { encodeJson } from '../../kernel/json.js';
import type { Logger } from '../../kernel/log.js';
import { freeSent, wholeBuffer } from '../../kernel/memory.js';
import { addForwarded, forwardedHttpHeaders, type HeaderPattern } from '../header_forward.js';
import { type Restrictions, restrictHttp } from '../restricted.js';
import { BodyTimeoutError, type BodyTimeouts, decompress, jsonObjectBody, readBody } from './body.js';
import { dashboardRoutes } from './dashboard.js';
import { generateRoutes } from './generate.js';
import { probeHalfClosedClients } from './half_close.js';
import { decodeInferRequest, encodeInferResponse } from './infer_codec.js';
import { sharedMemoryRoutes } from './shared_memory.js';
import { httpInferTracing, traceLoggingRoutes } from './trace_logging.js';

const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);

export interface HttpOptions {
  maxInputSize: number;
  /** --http-restricted-api groups (frontends/restricted.ts). */
  restrictions?: Restrictions;
  /** The live dashboard at GET /dashboard (--allow-dashboard; default true). */
  dashboard?: boolean;
  /** The in-flight byte budget (--max-inflight-bytes) request bodies are admitted against. */
  budget?: ByteBudget;
  /** --http-body-idle-timeout-secs / --http-body-timeout-secs, in ms (absent or 0 = none). */
  bodyTimeouts?: BodyTimeouts;
  /** --http-header-forward-pattern: the headers an inference request forwards as request parameters. */
  forwardPattern?: HeaderPattern;
}

/** Responses at least this big go out as their chunks (JSON header, tensors) instead of one joined copy. */
const STREAM_RESPONSE_BYTES = 1 << 20;
const EMPTY = new Uint8Array(0);

type ModelParams = { model: string; version?: string };

/** Picks gzip or deflate when the client accepts it (tritonclient's response compression). */
export function acceptedEncoding(header: string | string[] | undefined): 'gzip' | 'deflate' | undefined {
  if (header === undefined) return undefined;
  const accepted = new Map<string, number>();
  for (const part of String(header).toLowerCase().split(',')) {
    const [coding, ...params] = part.split(';').map((s) => s.trim());
    if (!coding) continue;
    const q = params.find((p) => p.startsWith('q='));
    accepted.set(coding, q ? Number(q.slice(2)) || 0 : 1);
  }
  const gz = accepted.get('gzip') ?? 0;
  const df = accepted.get('deflate') ?? 0;
  if (gz > 0 && gz >= df) return 'gzip';
  if (df > 0) return 'deflate';
  return undefined;
}

export function buildHttpServer(core: CoreApi, log: Logger, opts: HttpOptions): FastifyInstance {
  // The `id` an inference request's body gave, for the log line of a fault: operators match it
  // with the client's own request id (gRPC logs the same field as request_id).
  const inferenceIds = new WeakMap<FastifyRequest, string>();
  // bodyLimit is enforced by readBody; fastify's own check would answer before the body is read.
  const app = Fastify({ logger: false, bodyLimit: Number.MAX_SAFE_INTEGER, keepAliveTimeout: 60_000 });
  // A client may send its whole request and then shut down its sending side (shutdown(SHUT_WR)):
  // it still reads the response. Node's default takes that end for an abort, drops the request
  // and closes. Half-open, the response is written, then the connection closed.
  (app.server as typeof app.server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  probeHalfClosedClients(app);
  // Before any route: a request to a restricted API without its header is refused unread.
  restrictHttp(app, opts.restrictions);

  // Bodies are parsed by the routes themselves (binary extension, compression).
  app.removeAllContentTypeParsers();
  // A body holds its bytes against the budget from admission until its response is sent or
  // the connection closes.
  const budget = opts.budget;
  const tickets = new WeakMap<object, BudgetTicket>();
  if (budget) {
    app.addHook('onRequest', (req, reply, done) => {
      reply.raw.once('close', () => tickets.get(req.raw)?.release());
      done();
    });
  }
  const admit = (req: FastifyRequest) =>
    budget &&
    ((bytes: number): BudgetTicket => {
      const ticket = budget.admit(bytes);
      tickets.set(req.raw, ticket);
      return ticket;
    });
  app.addContentTypeParser('*', (req, payload, done) =>
    readBody(payload, req.headers, opts.maxInputSize, done, admit(req), opts.bodyTimeouts),
  );

  // The one error path: routes throw; ServalErrors map through the status table, fastify's own
  // errors (body too large, aborted upload) keep their status, anything else is a 500. Server
  // faults (INTERNAL, unexpected errors) are logged with the request id; refusals such as a full
  // queue (503) are the client's answer, not a fault, and stay out of the log.
  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    let status: number;
    if (err instanceof ServalError) status = httpStatus(err.code);
    else status = err.statusCode && err.statusCode >= 400 ? err.statusCode : 500;
    if (status >= 500 && isServerFault(err)) {
      const inferenceId = inferenceIds.get(req) || undefined;
      log.error('http request failed', {
        request_id: req.id,
        inference_id: inferenceId,
        method: req.method,
        url: req.url,
        status,
        error: err.stack ?? err.message,
      });
    }
    // The rest of a timed-out body may still come: the connection cannot carry another request.
    if (err instanceof BodyTimeoutError) reply.header('connection', 'close');
    // Triton's types, byte for byte: its infer handler answers errors as text/plain (a JSON body
    // all the same), every other route as application/json; a Buffer keeps fastify from adding
    // "; charset=utf-8" (observed on tritonserver 2.51: docs/reference/README.md).
    return reply
      .code(status)
      .header('content-type', req.url.endsWith('/infer') ? 'text/plain' : 'application/json')
      .send(Buffer.from(encodeJson({ error: err.message })));
  });
  app.setNotFoundHandler((req, reply) => {
    reply
      .code(404)
      .header('content-type', 'application/json')
      .send(Buffer.from(encodeJson({ error: `no route for ${req.method} ${req.url}` })));
  });

  // While shutting down, responses close their keep-alive connections so the server can exit
  // as soon as in-flight requests have answered.
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (!core.isAccepting()) reply.header('connection', 'close');
    done(null, payload);
  });

  // A Buffer: fastify would add "; charset=utf-8" to a string's type, which Triton does not send.
  const json = (reply: FastifyReply, body: unknown): FastifyReply =>
    reply.header('content-type', 'application/json').send(Buffer.from(encodeJson(body)));

  // Triton's status codes with the KServe v2 bodies ({"live": bool}, {"ready": bool}): Triton's
  // clients read only the status, KServe's SDK reads the body.
  app.get('/v2/health/live', (_req, reply) => {
    const live = core.isLive();
    return json(reply.code(live ? 200 : 400), { live });
  });
  app.get('/v2/health/ready', (_req, reply) => {
    const ready = core.isReady();
    return json(reply.code(ready ? 200 : 400), { ready });
  });
  app.get('/v2', (_req, reply) => json(reply, core.serverMetadata()));

  // Statistics routes are static and so take precedence over /v2/models/:model.
  const stats = (req: FastifyRequest<{ Params: Partial<ModelParams> }>, reply: FastifyReply) =>
    json(reply, { model_stats: core.statistics(req.params.model ?? '', req.params.version ?? '') });
  app.get('/v2/models/stats', stats);
  app.get('/v2/models/:model/stats', stats);
  app.get('/v2/models/:model/versions/:version/stats', stats);

  const metadata = (req: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) =>
    json(reply, core.modelMetadata(req.params.model, req.params.version ?? ''));
  app.get('/v2/models/:model', metadata);
  app.get('/v2/models/:model/versions/:version', metadata);

  const ready = (req: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => {
    const isReady = core.isModelReady(req.params.model, req.params.version ?? '');
    return json(reply.code(isReady ? 200 : 400), { name: req.params.model, ready: isReady });
  };
  app.get('/v2/models/:model/ready', ready);
  app.get('/v2/models/:model/versions/:version/ready', ready);

  const config = (req: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) =>
    json(reply, core.modelConfig(req.params.model, req.params.version ?? ''));
  app.get('/v2/models/:model/config', config);
  app.get('/v2/models/:model/versions/:version/config', config);

  sharedMemoryRoutes(app, core);
  app.register(generateRoutes, { core, log });
  traceLoggingRoutes(app, core, opts.maxInputSize);
  if (opts.dashboard ?? true) dashboardRoutes(app, core);

  // Repository extension.
  const jsonBody = (req: FastifyRequest): Promise<Record<string, unknown>> =>
    jsonObjectBody(req.headers, req.body as Buffer | undefined, opts.maxInputSize);
  const paramsOf = (doc: Record<string, unknown>): Record<string, unknown> => {
    const p = doc.parameters ?? {};
    if (typeof p !== 'object' || p === null || Array.isArray(p)) throw ServalError.invalidArg("'parameters' must be a JSON object");
    return p as Record<string, unknown>;
  };
  // Model upload: over HTTP a `file:<path>` parameter's bytes travel as base64 (Triton decodes
  // them as leniently as Node does); the core takes bytes from either protocol.
  const uploadParams = (p: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(p)) {
      if (!k.startsWith('file:')) out[k] = v;
      else if (typeof v === 'string') out[k] = Buffer.from(v, 'base64');
      else throw ServalError.invalidArg(`Unable to parse '${k}': a model file travels as a base64 string`);
    }
    return out;
  };
  app.post('/v2/repository/index', async (req, reply) => {
    const doc = await jsonBody(req);
    // Triton's text (its JSON accessor's); Triton answers 500, Serval 400: a malformed request is
    // the client's error, not a server fault (docs/config_checks.md).
    if (doc.ready !== undefined && typeof doc.ready !== 'boolean') {
      throw ServalError.invalidArg('attempt to access JSON non-boolean as boolean');
    }
    const rows = await core.repositoryIndex(doc.ready === true);
    // Triton leaves out version/state/reason where there is none.
    return json(
      reply,
      rows.map((r) => ({
        name: r.name,
        ...(r.version && { version: r.version }),
        ...(r.state && { state: r.state }),
        ...(r.reason && { reason: r.reason }),
      })),
    );
  });
  app.post('/v2/repository/models/:model/load', async (req: FastifyRequest<{ Params: ModelParams }>, reply) => {
    await core.loadModel(req.params.model, uploadParams(paramsOf(await jsonBody(req))));
    return reply.code(200).send();
  });
  app.post('/v2/repository/models/:model/unload', async (req: FastifyRequest<{ Params: ModelParams }>, reply) => {
    await core.unloadModel(req.params.model, paramsOf(await jsonBody(req)));
    return reply.code(200).send();
  });

  const tracing = httpInferTracing(core);
  const infer = async (req: FastifyRequest<{ Params: ModelParams }>, reply: FastifyReply) => {
    // Triton's refusal (CheckTransactionPolicy), before the body is decoded: many responses have no place in one HTTP reply.
    if (core.isDecoupled(req.params.model, req.params.version ?? '')) {
      throw ServalError.unsupported("HTTP end point doesn't support models with decoupled transaction policy");
    }
    const trace = tracing.received(req);
    // A client that disconnects while its request is decoded or queued cancels it.
    const cancellation = new Cancellation();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) cancellation.cancel();
    });
    let raw: Buffer | undefined = await decompress(req.headers, (req.body as Buffer | undefined) ?? Buffer.alloc(0), opts.maxInputSize);
    const hdr = req.headers['inference-header-content-length'];
    const headerLength = hdr === undefined ? undefined : Number(hdr);
    const decoded = decodeInferRequest(raw, headerLength, req.params.model, req.params.version ?? '');
    addForwarded(decoded.request.parameters, forwardedHttpHeaders(opts.forwardPattern, req.raw.rawHeaders));
    decoded.request.cancellation = cancellation;
    if (trace) decoded.request.trace = trace;
    // The body is this request's alone and nothing below reads it once answered: its binary
    // tensors may be handed to the model's worker as they are.
    const own = wholeBuffer(raw);
    if (own) decoded.request.ownMemory = own;
    if (decoded.request.id) inferenceIds.set(req, decoded.request.id);
    const result = await core.infer(decoded.request);
    // Answered: the body and the tensors viewing it are let go before the response is encoded,
    // so a large request's memory can be freed meanwhile.
    req.body = undefined;
    raw = undefined;
    for (const inp of decoded.request.inputs) inp.data = EMPTY;
    trace?.stamp('INFER_RESPONSE_COMPLETE', process.hrtime.bigint());
    const encoded = encodeInferResponse(result, decoded);
    const first = encoded.chunks[0]!;
    const total = encoded.chunks.reduce((n, c) => n + c.byteLength, 0);
    const enc = acceptedEncoding(req.headers['accept-encoding']);
    // A large binary response goes out chunk by chunk: joining them would copy every tensor once more.
    const streamed = !enc && encoded.chunks.length > 1 && total >= STREAM_RESPONSE_BYTES;
    let body: Buffer | Readable = streamed
      ? Readable.from(encoded.chunks.map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength)))
      : encoded.chunks.length === 1
        ? Buffer.from(first.buffer, first.byteOffset, first.byteLength)
        : Buffer.concat(encoded.chunks, total);
    // Memory that was the response's alone goes once its bytes are out: at once when they were
    // copied into the body, else when the last chunk has been written.
    const sent = result.outputs.map((o) => o.data);
    if (streamed) {
      reply.raw.once('finish', () => freeSent(sent));
      reply.header('content-length', total);
    } else freeSent(sent);
    if (encoded.headerLength !== undefined) {
      reply.header('inference-header-content-length', encoded.headerLength).header('content-type', 'application/octet-stream');
    } else {
      reply.header('content-type', 'application/json');
    }
    if (enc && body instanceof Buffer) {
      body = enc === 'gzip' ? await gzip(body) : await deflate(body);
      reply.header('content-encoding', enc);
    }
    if (trace) tracing.sending(req);
    return reply.send(body);
  };
  app.post<{ Params: ModelParams }>('/v2/models/:model/infer', { onRequest: tracing.onRequest }, infer);
  app.post<{ Params: ModelParams }>('/v2/models/:model/versions/:version/infer', { onRequest: tracing.onRequest }, infer);

  return app;
}
