// The system shared memory extension's server state (Triton's SharedMemoryManager): the regions
// clients registered, and the one place where an inference request's inputs are read from them
// and its outputs written into them, for every protocol.
//
// A region is part of a POSIX shared memory object: a file under /dev/shm, which is what the
// client's shm_open created. Its fd is opened at register, so the region stays valid when the
// client unlinks the name, as an mmap would. Node has no mmap (and no maintained binding builds
// here), so tensors move with positioned reads and writes on that fd; docs/protocol.md has the
// measurements behind that choice.
import { closeSync, constants, fstatSync, openSync, read, readSync, write, writeSync } from 'node:fs';
import path from 'node:path';
import { ServalError } from '../kernel/errors.js';
import type { InferOutputTensor, InferRequest, InferResponse, Params, ParamValue } from '../kernel/types.js';

/** One region as the status endpoints report it (Triton's JSON field names). */
export interface SystemSharedMemoryStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

/**
 * I/O up to this size runs synchronously on the main thread: a thread-pool round trip costs about
 * 40 µs, more than a positioned read of 1 MiB from /dev/shm. Larger tensors go to the pool so one
 * big copy does not stall every other request.
 */
const SYNC_IO_MAX = 1 << 20;
const EMPTY = new Uint8Array(0);
const SHM_DIR = '/dev/shm';

const invalid = (msg: string): ServalError => ServalError.invalidArg(msg);

/**
 * Keys a client may not register: Triton's Python backend's own objects (its text), and Serval's
 * Python backend's, so no client can reach into a model's tensors.
 */
const RESERVED_KEY_PREFIXES = ['triton_python_backend_shm_region_', 'serval_python_'];
const UINT64_MAX = (1n << 64n) - 1n;

/** Triton 2.73's refusal when the server was not started with --allow-client-shm=true. */
export const CLIENT_SHM_DISABLED = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";

function pread(fd: number, buf: Uint8Array, off: number, len: number, pos: number): Promise<number> {
  return new Promise((resolve, reject) => read(fd, buf, off, len, pos, (e, n) => (e ? reject(e) : resolve(n))));
}

function pwrite(fd: number, buf: Uint8Array, off: number, len: number, pos: number): Promise<number> {
  return new Promise((resolve, reject) => write(fd, buf, off, len, pos, (e, n) => (e ? reject(e) : resolve(n))));
}

/**
 * The file behind a key, named as glibc's shm_open names it: leading '/'s dropped, then one name
 * (not empty, '.' or '..', no '/'), so nothing outside /dev/shm is reached. A key shm_open would
 * refuse gets Triton's answer for a key it cannot open (INTERNAL, the client's fault all the same).
 */
export function shmKeyPath(key: string, dir = SHM_DIR): string {
  const bare = key.replace(/^\/+/, '');
  if (bare === '' || bare === '.' || bare === '..' || bare.includes('/') || bare.includes('\0')) {
    throw new ServalError('INTERNAL', `Unable to open shared memory region: '${key}'`, true);
  }
  return path.join(dir, bare);
}

class Region {
  private closed = false;
  /** Requests that placed a tensor in this region and have not finished. */
  users = 0;
  /** Unregistered while in use: removed once the last request using it finishes (as Triton). */
  awaitingUnregister = false;
  /** Asynchronous reads and writes under way; close() waits for them. */
  private busy = 0;
  private idle: (() => void) | undefined;

  constructor(
    readonly name: string,
    readonly key: string,
    readonly offset: number,
    readonly byteSize: number,
    private readonly fd: number,
  ) {}

  status(): SystemSharedMemoryStatus {
    return { name: this.name, key: this.key, offset: this.offset, byte_size: this.byteSize };
  }

  /** `length` bytes at `at` (relative to the region) into a new Buffer: the tensor the request carries on. */
  async read(at: number, length: number): Promise<Buffer> {
    let buf: Buffer;
    try {
      buf = Buffer.allocUnsafe(length);
    } catch (e) {
      throw invalid(`shared memory region '${this.name}': cannot hold ${length} bytes in memory: ${(e as Error).message}`);
    }
    await this.io(buf, at, false);
    return buf;
  }

  write(at: number, data: Uint8Array): Promise<void> {
    return this.io(data, at, true);
  }

  /** No I/O starts once this is called; resolves when the I/O under way has finished and the fd is closed. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.busy > 0) await new Promise<void>((r) => (this.idle = r));
    closeSync(this.fd);
  }

  private async io(buf: Uint8Array, at: number, writing: boolean): Promise<void> {
    if (this.closed) {
      throw ServalError.notFound(`shared memory region '${this.name}' was unregistered while the request was in flight`);
    }
    const len = buf.byteLength;
    const pos = this.offset + at;
    const fd = this.fd;
    const sync = len <= SYNC_IO_MAX;
    if (!sync) this.busy++;
    try {
      // pwrite past the end would grow the object; a client that shrank it gets an error instead.
      if (writing && fstatSync(fd).size < pos + len) throw this.truncated();
      for (let done = 0; done < len; ) {
        const n = sync
          ? writing
            ? writeSync(fd, buf, done, len - done, pos + done)
            : readSync(fd, buf, done, len - done, pos + done)
          : await (writing ? pwrite : pread)(fd, buf, done, len - done, pos + done);
        if (n === 0) throw this.truncated();
        done += n;
      }
    } catch (e) {
      if (e instanceof ServalError) throw e;
      throw ServalError.internal(`shared memory region '${this.name}': ${writing ? 'write' : 'read'} failed: ${(e as Error).message}`);
    } finally {
      if (!sync && --this.busy === 0) this.idle?.();
    }
  }

  private truncated(): ServalError {
    return invalid(
      `shared memory region '${this.name}' (key '${this.key}') is smaller than it was when registered: ` +
        'the client truncated its shared memory object',
    );
  }
}

/** Where one tensor of a request lives: the region, and the bytes `[offset, offset + byteSize)` in it. */
interface Placement {
  region: Region;
  offset: number;
  byteSize: number;
}

/** A tensor's shared-memory parameters, checked as Triton checks them; undefined when it has none. */
function shmParams(p: Params | undefined, tensor: string): { region: string; offset: bigint; byteSize: bigint } | undefined {
  if (!p) return undefined;
  const region = p.shared_memory_region;
  const offset = p.shared_memory_offset;
  const size = p.shared_memory_byte_size;
  if (region === undefined) {
    for (const [key, v] of [
      ['shared_memory_offset', offset],
      ['shared_memory_byte_size', size],
    ] as const) {
      if (v !== undefined) throw invalid(`'${key}' can not be specified without 'shared_memory_region' parameter for tensor '${tensor}'`);
    }
    return undefined;
  }
  if (typeof region !== 'string') {
    throw invalid(`invalid value type for 'shared_memory_region' parameter for tensor '${tensor}', expected string_param.`);
  }
  if (size === undefined) {
    throw invalid(`'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor '${tensor}'`);
  }
  // Exact: Triton's overflow check needs the full 64 bits.
  const int = (v: ParamValue, key: string): bigint => {
    if (typeof v === 'bigint') return v;
    if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
    throw invalid(`invalid value type for '${key}' parameter for tensor '${tensor}', expected int64_param.`);
  };
  return {
    region,
    offset: offset === undefined ? 0n : int(offset, 'shared_memory_offset'),
    byteSize: int(size, 'shared_memory_byte_size'),
  };
}

const hasShm = (p: Params | undefined): boolean =>
  p !== undefined &&
  (p.shared_memory_region !== undefined || p.shared_memory_offset !== undefined || p.shared_memory_byte_size !== undefined);

export class SharedMemoryRegistry {
  private readonly regions = new Map<string, Region>();

  /**
   * `allowClient`: whether clients may register regions and name them in requests
   * (--allow-client-shm); `dir`: where POSIX shared memory objects live (Linux: /dev/shm).
   */
  constructor(
    private readonly allowClient = true,
    private readonly dir = SHM_DIR,
  ) {}

  /** Refuses client use of shared memory unless the server allows it. */
  checkAllowed(): void {
    if (!this.allowClient) throw ServalError.unavailable(CLIENT_SHM_DISABLED);
  }

  /** Registers `byteSize` bytes at `offset` of the object `key` as region `name`. */
  register(name: string, key: string, offset: number, byteSize: number): void {
    this.checkAllowed();
    if (!name) throw invalid("'region name' is necessary to register system shared memory region");
    const bare = key.replace(/^\/+/, '');
    const reserved = RESERVED_KEY_PREFIXES.find((p) => bare.startsWith(p));
    if (reserved) {
      throw invalid(
        `cannot register shared memory region '${name}' with key '${key}' as the key contains the reserved prefix '${reserved}'`,
      );
    }
    if (this.regions.has(name)) throw new ServalError('ALREADY_EXISTS', `shared memory region '${name}' already in manager`);
    const file = shmKeyPath(key, this.dir);
    const args = (): ServalError => invalid(`failed to register shared memory region '${name}': invalid args`);
    let fd: number;
    try {
      // As glibc's shm_open: never through a symbolic link.
      fd = openSync(file, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      throw ServalError.internal(`Unable to open shared memory region: '${key}'`);
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) throw ServalError.internal(`Invalid shared memory region: '${key}'`);
      // After the open, as Triton's order: an unknown key is reported before a bad range.
      const exact = Number.isSafeInteger(offset) && offset >= 0 && Number.isSafeInteger(byteSize) && byteSize >= 0;
      if (!exact || offset + byteSize > st.size) throw args();
    } catch (e) {
      closeSync(fd);
      throw e;
    }
    this.regions.set(name, new Region(name, key, offset, byteSize, fd));
  }

  /** Every region (by name, as Triton's map orders them), or the one named. */
  status(name: string): SystemSharedMemoryStatus[] {
    if (!name) return [...this.regions.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((r) => r.status());
    const r = this.regions.get(name);
    if (!r) throw ServalError.notFound(`Unable to find system shared memory region: '${name}'`);
    return [r.status()];
  }

  /**
   * Unregisters the region named, or every region for ''. An unknown name is not an error (as in
   * Triton). A region that requests are using stays registered (listed, and usable by new
   * requests, as in Triton) until the last of them finishes, then goes; this returns at once for
   * it. An idle region's fd is closed before this resolves: after that the server never touches it.
   */
  async unregister(name: string): Promise<void> {
    const named = name ? [this.regions.get(name)].filter((r): r is Region => r !== undefined) : [...this.regions.values()];
    const idle: Region[] = [];
    for (const r of named) {
      if (r.users > 0) r.awaitingUnregister = true;
      else idle.push(r);
    }
    await Promise.all(idle.map((r) => this.remove(r)));
  }

  private remove(r: Region): Promise<void> {
    if (this.regions.get(r.name) === r) this.regions.delete(r.name);
    return r.close();
  }

  /**
   * Runs an inference request whose tensors may live in shared memory: checks every region
   * reference, reads the shared-memory inputs into the tensors `run` receives (so the model's
   * checks see them as any other input), and writes the shared-memory outputs into their regions
   * afterwards; those come back with no data. Requests that name no region go straight to `run`.
   */
  infer(req: InferRequest, run: (req: InferRequest) => Promise<InferResponse>): Promise<InferResponse> {
    if (!req.inputs.some((i) => hasShm(i.parameters)) && !req.outputs?.some((o) => hasShm(o.parameters))) return run(req);
    try {
      this.checkAllowed();
    } catch (e) {
      return Promise.reject(e);
    }
    const inputs = new Map<number, Placement>();
    const outputs = new Map<string, Placement>();
    try {
      req.inputs.forEach((inp, i) => {
        const p = shmParams(inp.parameters, inp.name);
        if (p) inputs.set(i, this.place(p));
      });
      for (const o of req.outputs ?? []) {
        const p = shmParams(o.parameters, o.name);
        if (!p) continue;
        if (o.parameters?.classification !== undefined) throw invalid("output can't set both 'shared_memory_region' and 'classification'");
        outputs.set(o.name, this.place(p));
      }
    } catch (e) {
      return Promise.reject(e);
    }
    const used = new Set<Region>([...inputs.values(), ...outputs.values()].map((p) => p.region));
    for (const r of used) r.users++;
    return this.run(req, inputs, outputs, run).finally(() => {
      for (const r of used) {
        if (--r.users === 0 && r.awaitingUnregister) void this.remove(r);
      }
    });
  }

  private async run(
    req: InferRequest,
    inputs: Map<number, Placement>,
    outputs: Map<string, Placement>,
    run: (req: InferRequest) => Promise<InferResponse>,
  ): Promise<InferResponse> {
    const data = await Promise.all(
      req.inputs.map((_, i) => {
        const at = inputs.get(i);
        return at?.region.read(at.offset, at.byteSize);
      }),
    );
    const res = await run({ ...req, inputs: req.inputs.map((inp, i) => (data[i] ? { ...inp, data: data[i] } : inp)) });
    if (!outputs.size) return res;
    // Every output must fit before any is written.
    for (const o of res.outputs) {
      const to = outputs.get(o.name);
      if (to && o.data.byteLength > to.byteSize) {
        throw ServalError.internal(
          `shared memory size specified with the request for output '${o.name}' (${to.byteSize} bytes) ` +
            `should be at least ${o.data.byteLength} bytes to hold the results`,
        );
      }
    }
    const written = await Promise.all(
      res.outputs.map(async (o): Promise<InferOutputTensor> => {
        const to = outputs.get(o.name);
        if (!to) return o;
        await to.region.write(to.offset, o.data);
        return { name: o.name, datatype: o.datatype, shape: o.shape, data: EMPTY, sharedMemory: true };
      }),
    );
    return { ...res, outputs: written };
  }

  /** A tensor's place in a registered region, with Triton's checks and texts (its unsigned 64-bit arithmetic). */
  private place(p: { region: string; offset: bigint; byteSize: bigint }): Placement {
    const region = this.regions.get(p.region);
    if (!region) throw ServalError.notFound(`Unable to find shared memory region: '${p.region}'`);
    // A negative int64 is the huge size_t Triton reads it as.
    const offset = BigInt.asUintN(64, p.offset);
    const byteSize = BigInt.asUintN(64, p.byteSize);
    const size = BigInt(region.byteSize);
    if (offset >= size) throw invalid(`Invalid offset for shared memory region: '${p.region}'`);
    if (byteSize > UINT64_MAX - offset) {
      throw invalid(
        `Integer overflow detected: byte_size (${byteSize}) + offset (${offset}) exceeds maximum value (${UINT64_MAX}) for region '${p.region}'`,
      );
    }
    if (offset + byteSize > size) throw invalid(`Invalid offset + byte size for shared memory region: '${p.region}'`);
    return { region, offset: Number(offset), byteSize: Number(byteSize) };
  }
}
