// A lone request whose tensors lie in memory of its own (InferRequest.ownMemory) runs from that
// memory: the scheduler's submit hands it to the instance (ModelInstance.adopt) instead of
// copying, aligning each input for its element type in place; anything else is assembled as before.
import { describe, expect, it } from 'vitest';
import type { ExecLayout, Execution, ModelInstance, Reservation } from '../../src/backends/backend.js';
import type { InstancePlacement } from '../../src/config/resolved.js';
import type { DataType } from '../../src/kernel/datatypes.js';
import { adoptedOffsets, type BatchInputs, type ScheduledInput, submit } from '../../src/scheduler/scheduler.js';

/** `bytes` placed at `offset` of `memory`, as a view (the way a received body holds a tensor). */
function placed(memory: ArrayBuffer, offset: number, bytes: Uint8Array, datatype: DataType, name = 'X'): ScheduledInput {
  const view = new Uint8Array(memory, offset, bytes.byteLength);
  view.set(bytes);
  return { name, datatype, shape: [1, bytes.byteLength], data: view };
}

const f32 = (...v: number[]): Uint8Array => new Uint8Array(Float32Array.from(v).buffer);

/** An instance that records how each execution got its inputs, and what it was given. */
class Recorder implements ModelInstance {
  readonly placement: InstancePlacement = { name: 'rec_0', kind: 'KIND_CPU', deviceId: -1 };
  readonly capacity = 1;
  readonly calls: { via: 'adopt' | 'reserve'; buffer: Uint8Array; layout: ExecLayout }[] = [];
  /** When false, adopt declines (as an instance does for small memory). */
  adopting = true;

  reserve(byteLength: number): Reservation {
    return this.room('reserve', new Uint8Array(byteLength));
  }

  adopt(memory: ArrayBuffer): Reservation | undefined {
    return this.adopting ? this.room('adopt', new Uint8Array(memory)) : undefined;
  }

  private room(via: 'adopt' | 'reserve', buffer: Uint8Array): Reservation {
    return {
      buffer,
      execute: (layout): Execution => {
        this.calls.push({ via, buffer, layout });
        return {
          result: Promise.resolve({ outputs: [], computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 }),
          held: false,
          withdraw: () => false,
        };
      },
      release: () => undefined,
    };
  }

  async close(): Promise<void> {}
}

/** The bytes of input `i` of the recorded execution, where its layout says they are. */
function given(call: Recorder['calls'][number], i: number): Uint8Array {
  const t = call.layout.inputs[i]!;
  return call.buffer.subarray(t.offset, t.offset + t.byteLength);
}

describe('adoptedOffsets', () => {
  it('keeps aligned inputs where they are and moves misaligned ones down to their element size', () => {
    const memory = new ArrayBuffer(64);
    const a = placed(memory, 8, f32(1, 2), 'FP32', 'A');
    const b = placed(memory, 19, f32(3), 'FP32', 'B'); // 19 → 16
    const c = placed(memory, 31, new Uint8Array([9, 9]), 'UINT8', 'C'); // bytes need no alignment
    expect(adoptedOffsets([b, a, c], memory)).toEqual([16, 8, 31]);
  });

  it('declines when aligning would overwrite the input before, or an input lies in other memory', () => {
    const memory = new ArrayBuffer(64);
    const a = placed(memory, 0, new Uint8Array([1, 2, 3]), 'UINT8', 'A');
    const b = placed(memory, 3, f32(4), 'FP32', 'B'); // would move to 0, over A
    expect(adoptedOffsets([a, b], memory)).toBeUndefined();
    const elsewhere = placed(new ArrayBuffer(16), 0, f32(1), 'FP32');
    expect(adoptedOffsets([elsewhere], memory)).toBeUndefined();
  });
});

describe('submit with a request of its own memory', () => {
  const lone = (inputs: ScheduledInput[], memory?: ArrayBuffer): BatchInputs => ({ inputs, outputs: ['Y'], ownMemory: memory });

  it('hands the memory to the instance, with misaligned inputs moved into alignment and intact', () => {
    const memory = new ArrayBuffer(256);
    const header = new Uint8Array(memory, 0, 13).fill(0x7b); // a JSON header of odd length
    const x = placed(memory, 13, f32(1.5, -2, 3.25), 'FP32', 'X');
    const y = placed(memory, 25, new Uint8Array([5, 6, 7]), 'UINT8', 'Z');
    const inst = new Recorder();
    submit(inst, [lone([x, y], memory)], 1);
    expect(inst.calls).toHaveLength(1);
    const call = inst.calls[0]!;
    expect(call.via).toBe('adopt');
    expect(call.buffer.buffer).toBe(memory);
    expect(call.layout.inputs.map((t) => [t.name, t.offset, t.byteLength, t.dims])).toEqual([
      ['X', 12, 12, [1, 12]],
      ['Z', 25, 3, [1, 3]],
    ]);
    expect(Array.from(new Float32Array(memory, 12, 3))).toEqual([1.5, -2, 3.25]);
    expect(Array.from(given(call, 1))).toEqual([5, 6, 7]);
    expect(header[0]).toBe(0x7b);
    expect(call.layout.requests).toHaveLength(1);
  });

  it('moves inputs in the order they lie in memory, not the order the request lists them', () => {
    // Z lies first and X right after it; aligning either overwrites the other's old place, so
    // moving X first would clobber Z's last byte before Z moved.
    const memory = new ArrayBuffer(64);
    const z = placed(memory, 13, f32(1.25, 2.5, -3.75), 'FP32', 'Z'); // [13, 25) → 12
    const x = placed(memory, 25, f32(-0.5, 7), 'FP32', 'X'); // [25, 33) → 24
    const inst = new Recorder();
    submit(inst, [lone([x, z], memory)], 1);
    const call = inst.calls[0]!;
    expect(call.via).toBe('adopt');
    expect(call.layout.inputs.map((t) => [t.name, t.offset])).toEqual([
      ['X', 24],
      ['Z', 12],
    ]);
    expect(Array.from(new Float32Array(given(call, 0).slice().buffer))).toEqual([-0.5, 7]);
    expect(Array.from(new Float32Array(given(call, 1).slice().buffer))).toEqual([1.25, 2.5, -3.75]);
  });

  it('assembles a copy as before: a batch of two, no memory of its own, an input elsewhere, or an instance that declines', () => {
    const cases: { reqs: BatchInputs[]; adopting: boolean }[] = [];
    const m1 = new ArrayBuffer(32);
    const m2 = new ArrayBuffer(32);
    cases.push({ reqs: [lone([placed(m1, 0, f32(1), 'FP32')], m1), lone([placed(m2, 0, f32(2), 'FP32')], m2)], adopting: true });
    cases.push({ reqs: [lone([placed(m1, 0, f32(3), 'FP32')])], adopting: true });
    cases.push({ reqs: [lone([placed(new ArrayBuffer(8), 0, f32(4), 'FP32')], m1)], adopting: true });
    cases.push({ reqs: [lone([placed(m2, 4, f32(5), 'FP32')], m2)], adopting: false });
    for (const { reqs, adopting } of cases) {
      const inst = new Recorder();
      inst.adopting = adopting;
      submit(inst, reqs, reqs.length);
      const call = inst.calls[0]!;
      expect(call.via).toBe('reserve');
      const want = reqs.flatMap((r) => Array.from(new Float32Array(r.inputs[0]!.data.slice().buffer)));
      expect(Array.from(new Float32Array(given(call, 0).slice().buffer))).toEqual(want);
    }
  });
});
