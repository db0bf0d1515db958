// The KServe v2 REST front-end (fastify). Thin: decode, call the core, encode.
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { CoreApi } from '../../core/api.js';
import type { BudgetTicket, ByteBudget } from '../../kernel/byte_budget.js';
import { Cancellation } from '../../kernel/cancel.js';
import { ServalError } from '../../kernel/errors.js';
import { encodeJson } from '../../kernel/json.js';
import type { Logger } from '../../kernel/log.js';
import { freeSent } from '../../kernel/memory.js';
import type { HeaderPattern } from '../header_forward.js';
import { type Restrictions, restrictHttp } from '../restricted.js';
import { type BodyTimeouts, jsonObjectBody, readBody } from './body.js';
import { dashboardRoutes } from './dashboard.js';
import { carriedTicket, installFastInfer } from './fast_infer.js';
import { generateRoutes } from './generate.js';
import { probeHalfClosedClients } from './half_close.js';
import { answerInfer, errorAnswer } from './infer_exchange.js';
import { sharedMemoryRoutes } from './shared_memory.js';
import { httpInferTracing, traceLoggingRoutes } from './trace_logging.js';

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
  /**
   * Plain inference requests on the lean connection path (fast_infer.ts); default true, off with
   * SERVAL_HTTP_FAST_INFER=0. Never with restrictions, whose header checks are a fastify hook.
   */
  fastInfer?: boolean;
}

type ModelParams = { model: string; version?: string };

export function buildHttpServer(core: CoreApi, log: Logger, opts: HttpOptions): FastifyInstance {
  // The `id` an inference request's body gave, for the log line of a fault: operators match it
  // with the client's own request id (gRPC logs the same field as request_id).
  const inferenceIds = new WeakMap<FastifyRequest, string>();
  const keepAliveMs = 60_000;
  // bodyLimit is enforced by readBody; fastify's own check would answer before the body is read.
  const app = Fastify({ logger: false, bodyLimit: Number.MAX_SAFE_INTEGER, keepAliveTimeout: keepAliveMs });
  // Plain inference requests skip Node's HTTP objects and fastify (fast_infer.ts).
  const fast = (opts.fastInfer ?? process.env.SERVAL_HTTP_FAST_INFER !== '0') && !opts.restrictions?.size;
  if (fast) installFastInfer(app, core, log, { ...opts, keepAliveMs });
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
      // A body the lean path began (fast_infer.ts) keeps the admission it had there.
      const ticket = carriedTicket(req.raw.socket, bytes) ?? budget.admit(bytes);
      tickets.set(req.raw, ticket);
      return ticket;
    });
  app.addContentTypeParser('*', (req, payload, done) =>
    readBody(payload, req.headers, opts.maxInputSize, done, admit(req), opts.bodyTimeouts),
  );

  // The one error path: routes throw, errorAnswer (infer_exchange.ts) says what the client gets.
  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    const a = errorAnswer(err, log, { requestId: req.id, inferenceId: inferenceIds.get(req), method: req.method, url: req.url });
    if (a.close) reply.header('connection', 'close');
    return reply.code(a.status).header('content-type', a.contentType).send(a.body);
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
    const trace = tracing.received(req);
    // A client that disconnects while its request is decoded or queued cancels it.
    const cancellation = new Cancellation();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) cancellation.cancel();
    });
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    // Dropped once answered, so a large request's memory can be freed while the response goes out.
    req.body = undefined;
    const a = await answerInfer(core, opts, {
      model: req.params.model,
      version: req.params.version ?? '',
      headers: req.headers,
      rawHeaders: req.raw.rawHeaders,
      body,
      cancellation,
      ...(trace && { trace }),
      onId: (id) => inferenceIds.set(req, id),
    });
    for (const [k, v] of a.headers) reply.header(k, v);
    if (a.streamed) {
      reply.raw.once('finish', () => freeSent(a.sent));
      reply.header('content-length', a.total);
    }
    if (trace) tracing.sending(req);
    return reply.send(a.streamed ? Readable.from(a.parts) : a.parts[0]);
  };
  app.post<{ Params: ModelParams }>('/v2/models/:model/infer', { onRequest: tracing.onRequest }, infer);
  app.post<{ Params: ModelParams }>('/v2/models/:model/versions/:version/infer', { onRequest: tracing.onRequest }, infer);

  return app;
}
