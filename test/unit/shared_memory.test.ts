// src/core/shared_memory.ts: the system shared memory registry over real POSIX shared memory
// objects (files this test creates under /dev/shm and removes again), and the one place that reads
// a request's shared-memory inputs and writes its outputs.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SharedMemoryRegistry, shmKeyPath } from '../../src/core/shared_memory.js';
import { ServalError } from '../../src/kernel/errors.js';
import type { InferRequest, InferResponse, Params } from '../../src/kernel/types.js';
import { shmObjects } from '../helpers/shm.js';

const objects = shmObjects('serval_unit');
const shmObject = objects.create;
const tag = objects.tag;
let registry = new SharedMemoryRegistry();
const made: string[] = [];

afterEach(async () => {
  await registry.unregister('');
  registry = new SharedMemoryRegistry();
  objects.cleanup();
  for (const f of made.splice(0)) rmSync(f, { force: true });
});

async function rejection(p: Promise<unknown> | (() => unknown)): Promise<ServalError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    expect(e).toBeInstanceOf(ServalError);
    return e as ServalError;
  }
  throw new Error('expected a ServalError');
}

/** The fds of this process open on `file`. */
const fdsOn = (file: string): string[] =>
  readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith(file);
    } catch {
      return false;
    }
  });

const i32 = (...v: number[]): Buffer => Buffer.from(Int32Array.from(v).buffer);

function request(
  inputs: { name: string; data?: Uint8Array; parameters?: Params }[],
  outputs?: { name: string; parameters?: Params }[],
): InferRequest {
  return {
    modelName: 'm',
    modelVersion: '',
    id: '',
    parameters: {},
    inputs: inputs.map((i) => ({
      name: i.name,
      datatype: 'INT32',
      shape: [1],
      data: i.data ?? new Uint8Array(0),
      parameters: i.parameters,
    })),
    outputs,
  };
}

/** A model run that answers each input back as the output of the same position (`OUT<i>`). */
function echo(seen: InferRequest[] = []): (r: InferRequest) => Promise<InferResponse> {
  return async (r) => {
    seen.push(r);
    return {
      modelName: 'm',
      modelVersion: '1',
      id: '',
      outputs: r.inputs.map((inp, i) => ({ name: `OUT${i}`, datatype: 'INT32', shape: [inp.data.byteLength / 4], data: inp.data })),
    };
  };
}

describe('keys', () => {
  it('maps a key with or without its leading / to a file under /dev/shm', () => {
    expect(shmKeyPath('/abc')).toBe('/dev/shm/abc');
    expect(shmKeyPath('abc')).toBe('/dev/shm/abc');
  });

  it("refuses keys that shm_open refuses (any that would reach outside /dev/shm) with Triton's answer", async () => {
    for (const key of ['/a/b', 'a/b', '/..', '../x', '/../etc/passwd', '', '/', '//', '.', '/a\0b']) {
      const e = await rejection(() => registry.register('r', key, 0, 1));
      expect([e.code, e.message, e.clientFault]).toEqual(['INTERNAL', `Unable to open shared memory region: '${key}'`, true]);
    }
    // As glibc names them: leading '/'s dropped, '..' inside a name is only a name.
    expect(shmKeyPath('//a')).toBe('/dev/shm/a');
    expect(shmKeyPath('/x..y')).toBe('/dev/shm/x..y');
  });
});

describe('register, status, unregister', () => {
  it('reports regions as Triton does, sorted by name; one or all', () => {
    const k = shmObject('a', new Uint8Array(64));
    registry.register('zeta', k, 0, 64);
    registry.register('alpha', k, 16, 32);
    expect(registry.status('')).toEqual([
      { name: 'alpha', key: k, offset: 16, byte_size: 32 },
      { name: 'zeta', key: k, offset: 0, byte_size: 64 },
    ]);
    expect(registry.status('zeta')).toEqual([{ name: 'zeta', key: k, offset: 0, byte_size: 64 }]);
  });

  it("Triton's errors: a name twice, an unknown key, out-of-range offset or size, no name, unknown region", async () => {
    const k = shmObject('b', new Uint8Array(64));
    registry.register('r', k, 0, 64);
    const twice = await rejection(() => registry.register('r', k, 0, 8));
    expect([twice.code, twice.message]).toEqual(['ALREADY_EXISTS', "shared memory region 'r' already in manager"]);
    const unknown = await rejection(() => registry.register('u', `/${tag}_missing`, 0, 8));
    expect([unknown.code, unknown.message]).toEqual(['INTERNAL', `Unable to open shared memory region: '/${tag}_missing'`]);
    for (const [offset, size] of [
      [0, 65],
      [1, 64],
      [64, 1],
      [65, 0],
      [-1, 1],
      [0, 1.5],
      [2 ** 63, 8], // past 2^53, as the HTTP front-end hands a uint64 it cannot hold exactly
    ] as const) {
      const e = await rejection(() => registry.register('o', k, offset, size));
      expect([e.code, e.message]).toEqual(['INVALID_ARG', "failed to register shared memory region 'o': invalid args"]);
    }
    registry.register('edge', k, 64, 0); // the empty region at the very end is in range, as in Triton
    const noName = await rejection(() => registry.register('', k, 0, 1));
    expect(noName.message).toBe("'region name' is necessary to register system shared memory region");
    const st = await rejection(() => registry.status('nope'));
    expect([st.code, st.message]).toEqual(['NOT_FOUND', "Unable to find system shared memory region: 'nope'"]);
    expect(registry.status('').map((s) => s.name)).toEqual(['edge', 'r']);
  });

  it('never opens through a symbolic link (as shm_open)', async () => {
    const target = path.join(os.tmpdir(), `${tag}_target`);
    writeFileSync(target, new Uint8Array(8));
    const link = path.join('/dev/shm', `${tag}_link`);
    symlinkSync(target, link);
    made.push(link, target);
    const e = await rejection(() => registry.register('l', `/${tag}_link`, 0, 8));
    expect(e.message).toBe(`Unable to open shared memory region: '/${tag}_link'`);
  });

  it('holds one fd per region from register to unregister; an unknown name unregisters nothing, without error', async () => {
    const k = shmObject('c', new Uint8Array(16));
    const file = shmKeyPath(k);
    registry.register('one', k, 0, 16);
    registry.register('two', k, 0, 16);
    expect(fdsOn(file)).toHaveLength(2);
    await registry.unregister('not-registered');
    await registry.unregister('one');
    expect(registry.status('').map((s) => s.name)).toEqual(['two']);
    expect(fdsOn(file)).toHaveLength(1);
    await registry.unregister('');
    expect(registry.status('')).toEqual([]);
    expect(fdsOn(file)).toHaveLength(0);
  });
});

describe('inference through shared memory', () => {
  const region = (name: string, offset = 0, size?: number): Params => ({
    shared_memory_region: name,
    shared_memory_byte_size: size ?? 8,
    ...(offset ? { shared_memory_offset: offset } : {}),
  });

  it('passes a request that names no region through unchanged', async () => {
    const seen: InferRequest[] = [];
    const req = request([{ name: 'A', data: i32(1) }]);
    await registry.infer(req, echo(seen));
    expect(seen[0]).toBe(req);
  });

  it('reads inputs from their regions (at their offsets) and writes outputs into theirs, which come back without data', async () => {
    const kin = shmObject('in', Buffer.concat([i32(9, 9), i32(1, 2), i32(3, 4)]));
    const kout = shmObject('out', new Uint8Array(32));
    registry.register('in', kin, 8, 16); // the region starts 8 bytes into the object
    registry.register('out', kout, 0, 32);
    const seen: InferRequest[] = [];
    const res = await registry.infer(
      request(
        [
          { name: 'A', parameters: region('in', 0) },
          { name: 'B', parameters: region('in', 8) },
          { name: 'C', data: i32(7, 8) },
        ],
        [{ name: 'OUT0', parameters: region('out', 16) }, { name: 'OUT1' }, { name: 'OUT2', parameters: region('out', 0) }],
      ),
      echo(seen),
    );
    expect(seen[0]!.inputs.map((i) => [...new Int32Array(Uint8Array.from(i.data).buffer)])).toEqual([
      [1, 2],
      [3, 4],
      [7, 8],
    ]);
    expect(res.outputs).toEqual([
      { name: 'OUT0', datatype: 'INT32', shape: [2], data: new Uint8Array(0), sharedMemory: true },
      { name: 'OUT1', datatype: 'INT32', shape: [2], data: i32(3, 4) },
      { name: 'OUT2', datatype: 'INT32', shape: [2], data: new Uint8Array(0), sharedMemory: true },
    ]);
    expect(readFileSync(shmKeyPath(kout))).toEqual(Buffer.concat([i32(7, 8), new Uint8Array(8), i32(1, 2), new Uint8Array(8)]));
  });

  it('moves tensors above the synchronous limit through the thread pool (3 MiB each way)', async () => {
    const big = randomBytes(3 << 20);
    const kin = shmObject('bigin', big);
    const kout = shmObject('bigout', new Uint8Array(big.byteLength));
    registry.register('bin', kin, 0, big.byteLength);
    registry.register('bout', kout, 0, big.byteLength);
    await registry.infer(
      request(
        [{ name: 'A', parameters: region('bin', 0, big.byteLength) }],
        [{ name: 'OUT0', parameters: region('bout', 0, big.byteLength) }],
      ),
      echo(),
    );
    expect(readFileSync(shmKeyPath(kout)).equals(big)).toBe(true);
  });

  it('keeps a region valid after the client unlinks its key, as an mmap would', async () => {
    const kin = shmObject('gone', i32(5, 6));
    registry.register('gone', kin, 0, 8);
    rmSync(shmKeyPath(kin));
    const seen: InferRequest[] = [];
    await registry.infer(request([{ name: 'A', parameters: region('gone') }]), echo(seen));
    expect(Buffer.from(seen[0]!.inputs[0]!.data)).toEqual(i32(5, 6));
  });

  it("Triton's errors for unknown regions and out-of-range offsets, checked before the model runs", async () => {
    registry.register('r', shmObject('r', new Uint8Array(16)), 0, 16);
    const cases: [Params, string, string][] = [
      [region('nope'), 'NOT_FOUND', "Unable to find shared memory region: 'nope'"],
      [region('r', 16, 0), 'INVALID_ARG', "Invalid offset for shared memory region: 'r'"],
      [{ ...region('r'), shared_memory_offset: 2n ** 64n - 32n }, 'INVALID_ARG', "Invalid offset for shared memory region: 'r'"],
      [region('r', 12, 8), 'INVALID_ARG', "Invalid offset + byte size for shared memory region: 'r'"],
      [region('r', 0, -1), 'INVALID_ARG', "Invalid offset + byte size for shared memory region: 'r'"],
    ];
    const seen: InferRequest[] = [];
    for (const [parameters, code, message] of cases) {
      for (const req of [request([{ name: 'A', parameters }]), request([], [{ name: 'A', parameters }])]) {
        const e = await rejection(registry.infer(req, echo(seen)));
        expect([e.code, e.message]).toEqual([code, message]);
      }
    }
    expect(seen).toEqual([]);
  });

  it("checks the parameters' presence and types with Triton's texts", async () => {
    const cases: [Params, string][] = [
      [{ shared_memory_offset: 0 }, "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor 'T'"],
      [
        { shared_memory_byte_size: 4 },
        "'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter for tensor 'T'",
      ],
      [
        { shared_memory_region: 'r' },
        "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor 'T'",
      ],
      [
        { shared_memory_region: 7, shared_memory_byte_size: 4 },
        "invalid value type for 'shared_memory_region' parameter for tensor 'T', expected string_param.",
      ],
      [
        { shared_memory_region: 'r', shared_memory_byte_size: '4' },
        "invalid value type for 'shared_memory_byte_size' parameter for tensor 'T', expected int64_param.",
      ],
      [
        { shared_memory_region: 'r', shared_memory_byte_size: 4, shared_memory_offset: 1.5 },
        "invalid value type for 'shared_memory_offset' parameter for tensor 'T', expected int64_param.",
      ],
    ];
    for (const [parameters, message] of cases) {
      const e = await rejection(registry.infer(request([{ name: 'T', parameters }]), echo()));
      expect([e.code, e.message]).toEqual(['INVALID_ARG', message]);
    }
    registry.register('r', shmObject('cls', new Uint8Array(8)), 0, 8);
    const cls = await rejection(registry.infer(request([], [{ name: 'O', parameters: { ...region('r'), classification: 2 } }]), echo()));
    expect(cls.message).toBe("output can't set both 'shared_memory_region' and 'classification'");
  });

  it('refuses an output larger than its region before writing any output', async () => {
    const kout = shmObject('small', new Uint8Array(12));
    registry.register('small', kout, 0, 12);
    const e = await rejection(
      registry.infer(
        request(
          [
            { name: 'A', data: i32(1) },
            { name: 'B', data: i32(1, 2) },
          ],
          [
            { name: 'OUT0', parameters: region('small', 0, 4) },
            { name: 'OUT1', parameters: region('small', 4, 4) },
          ],
        ),
        echo(),
      ),
    );
    expect([e.code, e.message]).toEqual([
      'INTERNAL',
      "shared memory size specified with the request for output 'OUT1' (4 bytes) should be at least 8 bytes to hold the results",
    ]);
    expect(readFileSync(shmKeyPath(kout))).toEqual(Buffer.alloc(12));
  });

  it('unregister while a request uses the region: it returns at once, the region stays listed (and usable) until the last request finishes, then goes', async () => {
    const kout = shmObject('late', new Uint8Array(8));
    registry.register('late', kout, 0, 8);
    const gates: (() => void)[] = [];
    const gated = async (r: InferRequest): Promise<InferResponse> => {
      await new Promise<void>((r) => gates.push(r));
      return echo()(r);
    };
    const first = registry.infer(request([{ name: 'A', data: i32(42) }], [{ name: 'OUT0', parameters: region('late', 0, 4) }]), gated);
    await registry.unregister('late');
    expect(registry.status('')).toEqual([{ name: 'late', key: kout, offset: 0, byte_size: 8 }]);
    expect(fdsOn(shmKeyPath(kout))).toHaveLength(1);
    // As Triton: a name awaiting its unregister is still taken, and still serves new requests.
    expect((await rejection(() => registry.register('late', kout, 0, 8))).message).toBe("shared memory region 'late' already in manager");
    const second = registry.infer(request([{ name: 'A', data: i32(7) }], [{ name: 'OUT0', parameters: region('late', 4, 4) }]), gated);
    await new Promise((r) => setImmediate(r));
    gates.shift()!();
    await first;
    expect(registry.status('').map((r) => r.name)).toEqual(['late']);
    gates.shift()!();
    await second;
    expect(readFileSync(shmKeyPath(kout))).toEqual(i32(42, 7));
    await new Promise((r) => setImmediate(r));
    expect(registry.status('')).toEqual([]);
    expect(fdsOn(shmKeyPath(kout))).toHaveLength(0);
    expect((await rejection(() => registry.status('late'))).message).toBe("Unable to find system shared memory region: 'late'");
  });

  it('a failed request lets go of its regions too; an idle region is closed before unregister resolves', async () => {
    const k = shmObject('fail', new Uint8Array(8));
    registry.register('fail', k, 0, 8);
    let release!: () => void;
    const pending = registry.infer(request([{ name: 'A', parameters: region('fail', 0, 4) }]), async () => {
      await new Promise<void>((r) => (release = r));
      throw ServalError.invalidArg('model refused');
    });
    await new Promise((r) => setImmediate(r));
    await registry.unregister('');
    expect(registry.status('')).toHaveLength(1);
    release();
    expect((await rejection(pending)).message).toBe('model refused');
    await new Promise((r) => setImmediate(r));
    expect(registry.status('')).toEqual([]);
    expect(fdsOn(shmKeyPath(k))).toHaveLength(0);
  });

  it("Triton's texts for a reserved key prefix and an offset + byte size past 64 bits", async () => {
    for (const key of ['triton_python_backend_shm_region_x', '/triton_python_backend_shm_region_y', '/serval_python_1_x']) {
      const prefix = key.includes('triton') ? 'triton_python_backend_shm_region_' : 'serval_python_';
      expect((await rejection(() => registry.register('n', key, 0, 8))).message).toBe(
        `cannot register shared memory region 'n' with key '${key}' as the key contains the reserved prefix '${prefix}'`,
      );
    }
    const k = shmObject('ovf', new Uint8Array(64));
    registry.register('ovf', k, 0, 64);
    const huge = (1n << 64n) - 32n;
    const e = await rejection(
      registry.infer(
        request([{ name: 'A', parameters: { shared_memory_region: 'ovf', shared_memory_offset: 32, shared_memory_byte_size: huge } }]),
        echo(),
      ),
    );
    expect([e.code, e.message]).toEqual([
      'INVALID_ARG',
      "Integer overflow detected: byte_size (18446744073709551584) + offset (32) exceeds maximum value (18446744073709551615) for region 'ovf'",
    ]);
    const off = await rejection(
      registry.infer(
        request([{ name: 'A', parameters: { shared_memory_region: 'ovf', shared_memory_offset: huge, shared_memory_byte_size: 4 } }]),
        echo(),
      ),
    );
    expect(off.message).toBe("Invalid offset for shared memory region: 'ovf'");
  });

  it("without --allow-client-shm: register and any request naming a region are refused with Triton 2.73's text", async () => {
    const closed = new SharedMemoryRegistry(false);
    const k = shmObject('off', new Uint8Array(8));
    const text = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";
    const reg = await rejection(() => closed.register('off', k, 0, 8));
    expect([reg.code, reg.message]).toEqual(['UNAVAILABLE', text]);
    const inf = await rejection(closed.infer(request([{ name: 'A', parameters: region('off', 0, 4) }]), echo()));
    expect([inf.code, inf.message]).toEqual(['UNAVAILABLE', text]);
    expect(closed.status('')).toEqual([]);
    // A request that names no region is not affected.
    const plain = await closed.infer(request([{ name: 'A', data: i32(3) }]), echo());
    expect(plain.outputs[0]!.data).toEqual(i32(3));
  });

  it('unregister of a region no request uses closes its fd before it resolves, even after a large read', async () => {
    const size = 8 << 20;
    const k = shmObject('busy', new Uint8Array(size));
    registry.register('busy', k, 0, size);
    const seen: InferRequest[] = [];
    await registry.infer(request([{ name: 'A', parameters: region('busy', 0, size) }]), echo(seen));
    expect(seen[0]!.inputs[0]!.data.byteLength).toBe(size);
    await registry.unregister('busy');
    expect(fdsOn(shmKeyPath(k))).toHaveLength(0);
  });

  it('a client that truncates its object after registering gets an error, never a grown object', async () => {
    const k = shmObject('trunc', new Uint8Array(16));
    registry.register('t', k, 0, 16);
    truncateSync(shmKeyPath(k), 4);
    const text = `shared memory region 't' (key '${k}') is smaller than it was when registered: the client truncated its shared memory object`;
    const read = await rejection(registry.infer(request([{ name: 'A', parameters: region('t', 0, 16) }]), echo()));
    expect([read.code, read.message]).toEqual(['INVALID_ARG', text]);
    const write = await rejection(
      registry.infer(request([{ name: 'A', data: i32(1, 2) }], [{ name: 'OUT0', parameters: region('t', 0, 8) }]), echo()),
    );
    expect(write.message).toBe(text);
    expect(readFileSync(shmKeyPath(k)).byteLength).toBe(4);
  });
});
