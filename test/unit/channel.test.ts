// The shared-memory layout between the main thread and an instance worker: what one side
// writes, the other reads back exactly.
import { describe, expect, it } from 'vitest';
import { alignUp, arenaSize, Control, INITIAL_ARENA } from '../../src/backends/onnxruntime/channel.js';

describe('instance channel', () => {
  it('a command round-trips through the header: tensors, shapes, offsets and requested outputs', () => {
    const c = Control.create();
    const cmd = {
      inputs: [
        { index: 1, datatype: 'FP32' as const, dims: [8, 3, 224, 224], offset: 0, byteLength: 8 * 3 * 224 * 224 * 4 },
        { index: 0, datatype: 'BYTES' as const, dims: [8], offset: 4816896, byteLength: 77 },
        { index: 2, datatype: 'INT64' as const, dims: [], offset: 4817024, byteLength: 8 },
      ],
      outputs: [2, 0],
    };
    c.writeCommand(cmd);
    // Another view over the same memory, as the worker has.
    expect(new Control(c.sab).readCommand()).toStrictEqual(cmd);
  });

  it('a reply round-trips with its timings, and an error text survives UTF-8', () => {
    const c = Control.create();
    const reply = {
      outputs: [{ index: 0, datatype: 'INT32' as const, dims: [3, 16], offset: 64, byteLength: 192 }],
      computeInputNs: 1234,
      computeInferNs: 98765,
      computeOutputNs: 42,
      startNs: Number(process.hrtime.bigint()),
    };
    c.writeReply(reply);
    expect(new Control(c.sab).readReply()).toStrictEqual(reply);
    c.writeError("input 'x': größe ≠ 3");
    expect(new Control(c.sab).readError()).toBe("input 'x': größe ≠ 3");
  });

  it('refuses a command that does not fit the header instead of overwriting memory', () => {
    const c = Control.create();
    const inputs = Array.from({ length: 2000 }, (_, i) => ({
      index: i,
      datatype: 'FP32' as const,
      dims: [1, 2],
      offset: 0,
      byteLength: 8,
    }));
    expect(() => c.writeCommand({ inputs, outputs: [] })).toThrow('too many tensors or dimensions for one execution (2000 tensors)');
  });

  it('arena sizes are powers of two from the initial size; offsets align to 64 bytes', () => {
    expect(arenaSize(1)).toBe(INITIAL_ARENA);
    expect(arenaSize(INITIAL_ARENA)).toBe(INITIAL_ARENA);
    expect(arenaSize(INITIAL_ARENA + 1)).toBe(INITIAL_ARENA * 2);
    expect(arenaSize(5_000_000)).toBe(8_388_608);
    expect([0, 1, 64, 65].map(alignUp)).toEqual([0, 64, 64, 128]);
  });
});
