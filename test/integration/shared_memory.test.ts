// The system shared memory extension end to end: the built server, real /dev/shm objects, both
// protocols, ONNX Runtime models; and the server's fds on the objects, read from /proc.
import { readdirSync, readlinkSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type GrpcClient, grpcClient } from '../helpers/grpc.js';
import { get, postJson } from '../helpers/http.js';
import { type ServerHandle, startServer } from '../helpers/server.js';
import { shmObjects } from '../helpers/shm.js';
import { fromI32, i32, randomRaw, range, rng } from '../helpers/tensors.js';

let server: ServerHandle;
let client: GrpcClient;
const shm = shmObjects('serval_it');

beforeAll(async () => {
  server = await startServer(inject('modelRepository'), ['--allow-client-shm=true']);
  client = grpcClient(server.grpcAddress);
});

afterAll(async () => {
  client?.close();
  await server?.stop();
  shm.cleanup();
});

/** How many fds, in any process, are open on `file` (the server's are the only ones here). */
function fdsOn(file: string): number {
  let n = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith(file)) n++;
      } catch {
        // gone meanwhile
      }
    }
  }
  return n;
}

const region = (name: string, size: number, offset = 0) => ({
  shared_memory_region: name,
  shared_memory_byte_size: size,
  ...(offset ? { shared_memory_offset: offset } : {}),
});

describe('system shared memory, end to end', () => {
  it('is listed in the server metadata; CUDA shared memory is not', async () => {
    const md = (await get(server.url, '/v2')).json();
    expect(md.extensions).toContain('system_shared_memory');
    expect(md.extensions).not.toContain('cuda_shared_memory');
  });

  it('HTTP: simple with both inputs and both outputs in shared memory; the server holds the fd until unregister', async () => {
    const a = range(16, (i) => i - 8);
    const b = range(16, (i) => 3 * i);
    const inKey = shm.create('in', Buffer.concat([i32(a), i32(b)]));
    const outKey = shm.create('out', 128);
    expect((await postJson(server.url, '/v2/systemsharedmemory/region/it_in/register', { key: inKey, byte_size: 128 })).status).toBe(200);
    expect((await postJson(server.url, '/v2/systemsharedmemory/region/it_out/register', { key: outKey, byte_size: 128 })).status).toBe(200);
    expect(fdsOn(shm.file(inKey))).toBe(1);
    const status = (await get(server.url, '/v2/systemsharedmemory/status')).json();
    expect(status).toEqual([
      { name: 'it_in', key: inKey, offset: 0, byte_size: 128 },
      { name: 'it_out', key: outKey, offset: 0, byte_size: 128 },
    ]);

    const res = await postJson(server.url, '/v2/models/simple/infer', {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: region('it_in', 64) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: region('it_in', 64, 64) },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: region('it_out', 64) },
        { name: 'OUTPUT1', parameters: region('it_out', 64, 64) },
      ],
    });
    expect(res.status, res.text()).toBe(200);
    expect(res.json().outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] },
    ]);
    const out = shm.read(outKey);
    expect(fromI32(out.subarray(0, 64))).toEqual(a.map((x, i) => x + b[i]!));
    expect(fromI32(out.subarray(64))).toEqual(a.map((x, i) => x - b[i]!));

    expect((await postJson(server.url, '/v2/systemsharedmemory/unregister', '')).status).toBe(200);
    expect((await get(server.url, '/v2/systemsharedmemory/status')).json()).toEqual([]);
    expect(fdsOn(shm.file(inKey))).toBe(0);
    expect(fdsOn(shm.file(outKey))).toBe(0);
  });

  it('gRPC: an 8 MiB FP32 tensor round trip through shared memory (the thread-pool path)', async () => {
    const n = 2 << 20;
    const data = randomRaw('FP32', n, rng(7));
    const inKey = shm.create('big_in', data);
    const outKey = shm.create('big_out', data.byteLength);
    const size = String(data.byteLength);
    await client.call('SystemSharedMemoryRegister', { name: 'big_in', key: inKey, byte_size: size });
    await client.call('SystemSharedMemoryRegister', { name: 'big_out', key: outKey, byte_size: size });
    const param = (name: string) => ({ shared_memory_region: { string_param: name }, shared_memory_byte_size: { int64_param: size } });
    try {
      const res = await client.call('ModelInfer', {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n], parameters: param('big_in') }],
        outputs: [{ name: 'OUTPUT0', parameters: param('big_out') }],
      });
      expect(res.outputs[0].shape).toEqual(['1', String(n)]);
      expect(res.raw_output_contents).toEqual([Buffer.alloc(0)]);
      expect(shm.read(outKey).equals(data)).toBe(true);
    } finally {
      await client.call('SystemSharedMemoryUnregister', {});
    }
  });

  it('a server stopped with regions registered exits cleanly, its fds closed', async () => {
    const own = await startServer(inject('modelRepository'), [
      '--model-control-mode',
      'explicit',
      '--load-model',
      'simple',
      '--allow-client-shm=true',
    ]);
    const key = shm.create('stop', 64);
    expect((await postJson(own.url, '/v2/systemsharedmemory/region/s/register', { key, byte_size: 64 })).status).toBe(200);
    expect(fdsOn(shm.file(key))).toBe(1);
    expect(await own.stop()).toBe(0);
    expect(fdsOn(shm.file(key))).toBe(0);
  });
});
