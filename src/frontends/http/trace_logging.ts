// The trace and logging extensions over HTTP (Triton's HandleTrace / HandleLogging), and the
// HTTP side of a traced inference: sampled when the request arrives, HTTP_RECV_START/END around
// its body, HTTP_SEND_START/END around its response.
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { CoreApi, TraceSettingsUpdate } from '../../core/api.js';
import { ServalError } from '../../kernel/errors.js';
import { encodeJson } from '../../kernel/json.js';
import type { LogSettingsUpdate } from '../../kernel/log.js';
import type { RequestTrace } from '../../kernel/trace.js';
import { jsonObjectBody } from './body.js';

const now = (): bigint => process.hrtime.bigint();

const jsonObject = (req: FastifyRequest, maxInputSize: number): Promise<Record<string, unknown>> =>
  jsonObjectBody(req.headers, req.body as Buffer | undefined, maxInputSize);

/**
 * A trace settings body → the wire-neutral update. As in Triton, trace_level is an array of
 * strings, every other setting a string, and null clears a setting.
 */
export function decodeTraceUpdate(doc: Record<string, unknown>): TraceSettingsUpdate {
  const update: TraceSettingsUpdate = {};
  for (const [key, v] of Object.entries(doc)) {
    if (v === null) update[key] = null;
    else if (key === 'trace_level') {
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) {
        throw ServalError.invalidArg(`Unable to parse 'trace_level': expect an array of strings, got: ${JSON.stringify(v)}`);
      }
      update[key] = v;
    } else if (typeof v === 'string') update[key] = [v];
    else throw ServalError.invalidArg(`Unable to parse '${key}': expect a string, got: ${JSON.stringify(v)}`);
  }
  return update;
}

/** A logging body → the wire-neutral update (values are checked by the core). */
export function decodeLogUpdate(doc: Record<string, unknown>): LogSettingsUpdate {
  const update: LogSettingsUpdate = {};
  for (const [key, v] of Object.entries(doc)) {
    if (v === null || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') update[key] = v;
    else throw ServalError.invalidArg(`invalid value for log setting '${key}': ${JSON.stringify(v)}`);
  }
  return update;
}

/** GET/POST /v2[/models/{model}]/trace/setting and GET/POST /v2/logging. */
export function traceLoggingRoutes(app: FastifyInstance, core: CoreApi, maxInputSize: number): void {
  const json = (reply: FastifyReply, body: unknown): FastifyReply =>
    reply.header('content-type', 'application/json').send(encodeJson(body));
  type Params = { model?: string };
  const getTrace = (req: FastifyRequest<{ Params: Params }>, reply: FastifyReply) =>
    json(reply, core.traceSettings(req.params.model ?? ''));
  const postTrace = async (req: FastifyRequest<{ Params: Params }>, reply: FastifyReply) => {
    const update = decodeTraceUpdate(await jsonObject(req, maxInputSize));
    return json(reply, core.traceSettings(req.params.model ?? '', Object.keys(update).length ? update : undefined));
  };
  app.get('/v2/trace/setting', getTrace);
  app.post('/v2/trace/setting', postTrace);
  app.get('/v2/models/:model/trace/setting', getTrace);
  app.post('/v2/models/:model/trace/setting', postTrace);

  app.get('/v2/logging', (_req, reply) => json(reply, core.logSettings()));
  app.post('/v2/logging', async (req, reply) => json(reply, core.logSettings(decodeLogUpdate(await jsonObject(req, maxInputSize)))));
}

interface Traced {
  trace: RequestTrace;
  sending: boolean;
}

/** The HTTP infer route's part of tracing. */
export interface HttpInferTracing {
  /** Route hook: asks the core whether to trace the request (Triton samples by the URL's model). */
  onRequest: onRequestHookHandler;
  /** The body is in: stamps HTTP_RECV_END and returns the trace, or undefined when untraced. */
  received(req: FastifyRequest): RequestTrace | undefined;
  /** The response is about to be written: stamps HTTP_SEND_START. */
  sending(req: FastifyRequest): void;
}

export function httpInferTracing(core: CoreApi): HttpInferTracing {
  const traced = new WeakMap<FastifyRequest, Traced>();
  return {
    onRequest(req, reply, done) {
      const trace = core.startTrace((req.params as { model?: string }).model ?? '');
      if (trace) {
        trace.stamp('HTTP_RECV_START', now());
        const t: Traced = { trace, sending: false };
        traced.set(req, t);
        // Written out when the response is (or the connection went away first).
        reply.raw.once('finish', () => {
          if (t.sending) trace.stamp('HTTP_SEND_END', now());
          trace.end();
        });
        reply.raw.once('close', () => trace.end());
      }
      done();
    },
    received(req) {
      const t = traced.get(req);
      if (!t) return undefined;
      t.trace.stamp('HTTP_RECV_END', now());
      return t.trace;
    },
    sending(req) {
      const t = traced.get(req);
      if (!t) return;
      t.sending = true;
      t.trace.stamp('HTTP_SEND_START', now());
    },
  };
}
