// The shared-memory extension's REST routes (Triton's HandleSystemSharedMemory): register, status
// and unregister of system shared memory regions; CUDA shared memory is answered as unsupported.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { CoreApi } from '../../core/api.js';
import { ServalError } from '../../kernel/errors.js';
import { encodeJson, parseJsonExact } from '../../kernel/json.js';

type RegionParams = { name?: string };

const bad = (msg: string): ServalError => ServalError.invalidArg(msg);

/** The register request's JSON: `{"key": string, "offset"?: number, "byte_size": number}`. */
function registerRequest(body: Buffer | undefined): { key: string; offset: number; byteSize: number } {
  let doc: unknown;
  try {
    doc = parseJsonExact((body ?? Buffer.alloc(0)).toString('utf8'));
  } catch (e) {
    throw ServalError.malformed(`failed to parse the request JSON buffer: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw bad('the request JSON must be an object');
  const d = doc as Record<string, unknown>;
  if (d.key === undefined) throw bad("Shared memory register request has no 'key' field");
  if (typeof d.key !== 'string') throw bad("Unable to parse 'key': it must be a string");
  if (d.byte_size === undefined) throw bad("Shared memory register request has no 'byte_size' field");
  const uint = (v: unknown, field: string): number => {
    // Any uint64 parses, as in Triton; one past 2^53 (inexact here) fits no region, and the
    // registration refuses it with Triton's "invalid args".
    if (typeof v === 'bigint' && v >= 0n && v < 2n ** 64n) return Number(v);
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= 2 ** 64)
      throw bad(`Unable to parse '${field}': it must be a non-negative integer`);
    return v;
  };
  return { key: d.key, offset: d.offset === undefined ? 0 : uint(d.offset, 'offset'), byteSize: uint(d.byte_size, 'byte_size') };
}

/** Adds the /v2/systemsharedmemory and /v2/cudasharedmemory routes to `app`. */
export function sharedMemoryRoutes(app: FastifyInstance, core: CoreApi): void {
  const json = (reply: FastifyReply, body: unknown): FastifyReply =>
    reply.header('content-type', 'application/json').send(encodeJson(body));
  const ok = (reply: FastifyReply): FastifyReply => reply.code(200).header('content-type', 'application/json').send();

  const status = (req: FastifyRequest<{ Params: RegionParams }>, reply: FastifyReply) =>
    json(reply, core.systemSharedMemoryStatus(req.params.name ?? ''));
  app.get('/v2/systemsharedmemory/status', status);
  app.get('/v2/systemsharedmemory/region/:name/status', status);

  const register = (req: FastifyRequest<{ Params: RegionParams }>, reply: FastifyReply) => {
    const name = req.params.name ?? '';
    if (!name) throw bad("'region name' is necessary to register system shared memory region");
    const r = registerRequest(req.body as Buffer | undefined);
    core.registerSystemSharedMemory(name, r.key, r.offset, r.byteSize);
    return ok(reply);
  };
  app.post('/v2/systemsharedmemory/register', register);
  app.post('/v2/systemsharedmemory/region/:name/register', register);

  const unregister = async (req: FastifyRequest<{ Params: RegionParams }>, reply: FastifyReply) => {
    await core.unregisterSystemSharedMemory(req.params.name ?? '');
    return ok(reply);
  };
  app.post('/v2/systemsharedmemory/unregister', unregister);
  app.post('/v2/systemsharedmemory/region/:name/unregister', unregister);

  // No GPU here, and the extension is not listed: status and register are refused. Unregister
  // has nothing to remove and succeeds, as on a Triton without GPUs: perf_analyzer unregisters
  // CUDA regions at the end of every --shared-memory run and reports a failure as an error.
  // Without --allow-client-shm, CUDA registration and unregistration are refused first, as Triton's.
  const cuda = (): never => {
    throw ServalError.unsupported('CUDA shared memory is not supported by this server');
  };
  const cudaRegister = (): never => {
    core.checkClientSharedMemory?.();
    return cuda();
  };
  const cudaUnregister = (_req: FastifyRequest, reply: FastifyReply) => {
    core.checkClientSharedMemory?.();
    return ok(reply);
  };
  app.get('/v2/cudasharedmemory/status', cuda);
  app.get('/v2/cudasharedmemory/region/:name/status', cuda);
  app.post('/v2/cudasharedmemory/register', cudaRegister);
  app.post('/v2/cudasharedmemory/region/:name/register', cudaRegister);
  app.post('/v2/cudasharedmemory/unregister', cudaUnregister);
  app.post('/v2/cudasharedmemory/region/:name/unregister', cudaUnregister);
}
