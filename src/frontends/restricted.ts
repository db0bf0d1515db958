// Triton's restricted APIs: `--http-restricted-api` and `--grpc-restricted-protocol` put groups
// of endpoints behind a header (HTTP) or metadata entry (gRPC) that must carry a given value.
// Every HTTP route and every gRPC method belongs to exactly one group, in the two tables below;
// tests check that nothing either front-end serves is missing from them.
import * as grpc from '@grpc/grpc-js';
import type { FastifyInstance } from 'fastify';
import { encodeJson } from '../kernel/json.js';

/** Triton's API groups (RestrictedCategory), by their command-line names. */
export const API_GROUPS = [
  'health',
  'metadata',
  'inference',
  'shared-memory',
  'model-config',
  'model-repository',
  'statistics',
  'trace',
  'logging',
] as const;
export type ApiGroup = (typeof API_GROUPS)[number];

/** The header (HTTP) or metadata key (gRPC) a group requires, and the value it must carry. */
export interface Restriction {
  key: string;
  value: string;
}
export type Restrictions = ReadonlyMap<ApiGroup, Restriction>;

/** gRPC keys get this prefix, as in Triton: `KEY=VALUE` means metadata `triton-grpc-protocol-KEY`. */
export const GRPC_KEY_PREFIX = 'triton-grpc-protocol-';

const isGroup = (s: string): s is ApiGroup => (API_GROUPS as readonly string[]).includes(s);

/**
 * Parses the values of one repeatable flag (`API_1,API_2:KEY=VALUE` each) the way tritonserver
 * does: the first ':' ends the list, the first '=' after it ends the key, the value is the rest
 * (it may contain ':' and '='); none of the three may be empty; an unknown group, or a group named
 * twice (in one value or across values), fails. Errors carry Triton's texts.
 */
export function parseRestrictions(
  values: readonly string[],
  flag: 'http-restricted-api' | 'grpc-restricted-protocol',
): Map<ApiGroup, Restriction> {
  const kind = flag === 'http-restricted-api' ? 'api' : 'protocol';
  const prefix = flag === 'http-restricted-api' ? '' : GRPC_KEY_PREFIX;
  const out = new Map<ApiGroup, Restriction>();
  for (const arg of values) {
    const colon = arg.indexOf(':');
    const equals = colon < 0 ? -1 : arg.indexOf('=', colon + 1);
    const names = arg.slice(0, colon);
    const key = arg.slice(colon + 1, equals);
    const value = arg.slice(equals + 1);
    if (colon < 0 || equals < 0 || !names || !key || !value) {
      throw new Error(`--${flag} option format is '<config name>:<setting>=<value>'. Got ${arg}`);
    }
    for (const name of names.split(',')) {
      if (!isGroup(name)) throw new Error(`unknown restricted ${kind} '${name}'`);
      if (out.has(name)) throw new Error(`restricted ${kind} '${name}' can not be specified in multiple config groups`);
      // HTTP header names are case-insensitive and gRPC metadata keys are lower case on the wire.
      out.set(name, { key: (prefix + key).toLowerCase(), value });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// HTTP: routes by URL pattern. Matched against the pattern of the route fastify picked (so a
// request is classified exactly as it is routed, percent-encodings and all); a concrete path
// matches the same way, a `:param` being one segment.

const SEG = '[^/]+';
const MODEL = `/v2/models/${SEG}(?:/versions/${SEG})?`;
const HTTP_ROUTES: readonly [RegExp, ApiGroup][] = [
  [/^\/v2\/health\/(?:live|ready)$/, 'health'],
  [new RegExp(`^${MODEL}/ready$`), 'health'],
  [/^\/v2$/, 'metadata'],
  // Before the model routes: "stats" is not a model name here (as in Triton).
  [/^\/v2\/models\/stats$/, 'statistics'],
  [new RegExp(`^${MODEL}$`), 'metadata'],
  [new RegExp(`^${MODEL}/(?:infer|generate|generate_stream)$`), 'inference'],
  [new RegExp(`^${MODEL}/config$`), 'model-config'],
  [new RegExp(`^${MODEL}/stats$`), 'statistics'],
  [new RegExp(`^/v2(?:/models/${SEG})?/trace/setting$`), 'trace'],
  [/^\/v2\/logging$/, 'logging'],
  [new RegExp(`^/v2/(?:system|cuda)sharedmemory(?:/region/${SEG})?/(?:status|register|unregister)$`), 'shared-memory'],
  [new RegExp(`^/v2/repository(?:/${SEG})?/(?:index|models/${SEG}/(?:load|unload))$`), 'model-repository'],
  // Serval's own live dashboard (not Triton's): its page and data show the statistics and the
  // model states, so it goes with the statistics API.
  [new RegExp(`^/dashboard(?:/${SEG})?$`), 'statistics'],
];

/** The group of an HTTP route pattern or path (without query string); undefined if none. */
export function httpApiGroup(url: string): ApiGroup | undefined {
  return HTTP_ROUTES.find(([re]) => re.test(url))?.[1];
}

/**
 * Refuses requests to restricted groups that lack the header, before their body is read: 403
 * with Triton's JSON error. A route no group claims is refused too (fail closed), so a new route
 * cannot be served unrestricted by mistake; tests keep the table complete.
 */
export function restrictHttp(app: FastifyInstance, restrictions: Restrictions | undefined): void {
  if (!restrictions?.size) return;
  app.addHook('onRequest', (req, reply, done) => {
    const route = req.routeOptions.url;
    // No route matched: fastify answers 404, nothing is served.
    if (route === undefined) return done();
    const group = httpApiGroup(route);
    const restriction = group && restrictions.get(group);
    if (group && !restriction) return done();
    if (restriction && req.headers[restriction.key] === restriction.value) return done();
    const error = restriction
      ? `This API is restricted, expecting header '${restriction.key}'`
      : `This API is restricted: route '${route}' belongs to no API group`;
    reply.code(403).header('content-type', 'application/json').send(encodeJson({ error }));
  });
}

// ---------------------------------------------------------------------------------------------
// gRPC: methods by name, for GRPCInferenceService and grpc.health.v1.Health.

const GRPC_METHODS: Readonly<Record<string, ApiGroup>> = {
  ServerLive: 'health',
  ServerReady: 'health',
  ModelReady: 'health',
  // grpc.health.v1.Health: Triton puts the standard health check in the health group too.
  Check: 'health',
  Watch: 'health',
  ServerMetadata: 'metadata',
  ModelMetadata: 'metadata',
  ModelInfer: 'inference',
  ModelStreamInfer: 'inference',
  ModelConfig: 'model-config',
  ModelStatistics: 'statistics',
  RepositoryIndex: 'model-repository',
  RepositoryModelLoad: 'model-repository',
  RepositoryModelUnload: 'model-repository',
  SystemSharedMemoryStatus: 'shared-memory',
  SystemSharedMemoryRegister: 'shared-memory',
  SystemSharedMemoryUnregister: 'shared-memory',
  CudaSharedMemoryStatus: 'shared-memory',
  CudaSharedMemoryRegister: 'shared-memory',
  CudaSharedMemoryUnregister: 'shared-memory',
  TraceSetting: 'trace',
  LogSettings: 'logging',
};

/** The group of a gRPC method (its name in the service definition); undefined if none. */
export function grpcApiGroup(method: string): ApiGroup | undefined {
  return Object.hasOwn(GRPC_METHODS, method) ? GRPC_METHODS[method] : undefined;
}

/** What every grpc-js server call has that the guard uses; unary and client-streaming handlers also get a callback. */
type AnyHandler = (
  call: { metadata: grpc.Metadata; emit(event: 'error', err: Error): boolean },
  callback?: grpc.sendUnaryData<unknown>,
) => void;

/**
 * `server.addService` with every method of the service guarded by its group's restriction.
 * Works for unary, client-, server- and bidi-streaming handlers: the check runs before the
 * handler and, on failure, ends the call with UNAVAILABLE and Triton's text. A method no group
 * claims is refused (fail closed); tests keep the table complete.
 */
export function restrictedAddService(server: grpc.Server, restrictions: Restrictions | undefined) {
  return (service: grpc.ServiceDefinition, implementation: grpc.UntypedServiceImplementation): void => {
    if (!restrictions?.size) {
      server.addService(service, implementation);
      return;
    }
    const guarded: grpc.UntypedServiceImplementation = {};
    for (const [name, def] of Object.entries(service)) {
      // grpc-js takes a handler under the method's name or its camelCase originalName.
      const handler = implementation[name] ?? (def.originalName ? implementation[def.originalName] : undefined);
      if (!handler) continue;
      const refusal = grpcRefusal(restrictions, name);
      guarded[name] = refusal ? guard(handler as unknown as AnyHandler, refusal, def.responseStream) : handler;
    }
    server.addService(service, guarded);
  };
}

/**
 * The check --grpc-restricted-protocol makes on a call to `method` (its name in the service
 * definition): undefined when the method is not restricted; else a function of the call's
 * metadata that gives the refusal's text (status UNAVAILABLE), or undefined when the call may go on.
 */
export function grpcRefusal(
  restrictions: Restrictions | undefined,
  method: string,
): ((metadata: grpc.Metadata) => string | undefined) | undefined {
  if (!restrictions?.size) return undefined;
  const group = grpcApiGroup(method);
  const restriction = group && restrictions.get(group);
  if (group && !restriction) return undefined;
  const details = restriction
    ? `This protocol is restricted, expecting header '${restriction.key}'`
    : `This protocol is restricted: method '${method}' belongs to no API group`;
  return (metadata) => {
    const got = restriction && metadata.get(restriction.key)[0];
    return restriction && typeof got === 'string' && got === restriction.value ? undefined : details;
  };
}

function guard(
  handler: AnyHandler,
  refusal: (metadata: grpc.Metadata) => string | undefined,
  responseStream: boolean,
): grpc.UntypedHandleCall {
  const guarded: AnyHandler = (call, callback) => {
    const details = refusal(call.metadata);
    if (details === undefined) return handler(call, callback);
    const err = Object.assign(new Error(details), { code: grpc.status.UNAVAILABLE, details, metadata: new grpc.Metadata() });
    // Unary and client-streaming calls answer through the callback; server- and bidi-streaming
    // calls end with the error as their status.
    if (!responseStream && callback) callback(err);
    else call.emit('error', err);
  };
  return guarded as unknown as grpc.UntypedHandleCall;
}
