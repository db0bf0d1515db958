// What lets a large execution leave no memory behind: output shapes known before the run
// (backends/onnxruntime/output_shapes.ts) and freeing a spent buffer at once (kernel/memory.ts).
import { describe, expect, it } from 'vitest';
import { knownDims } from '../../src/backends/onnxruntime/output_shapes.js';
import { freeNow } from '../../src/kernel/memory.js';

describe('knownDims', () => {
  const inputs = [
    { declared: ['batch', 'n'], dims: [2, 5] },
    { declared: [3, 'k'], dims: [3, 7] },
  ];

  it('takes fixed dimensions as declared and named ones from the inputs of the run', () => {
    expect(knownDims(inputs, ['batch', 'n'])).toEqual([2, 5]);
    expect(knownDims(inputs, ['batch', 4, 'k'])).toEqual([2, 4, 7]);
    expect(knownDims(inputs, [])).toEqual([]);
  });

  it('does not know an unnamed dynamic dimension, a name no input gives, or one two inputs give differently', () => {
    expect(knownDims(inputs, ['batch', ''])).toBeUndefined();
    expect(knownDims(inputs, ['batch', -1])).toBeUndefined();
    expect(knownDims(inputs, ['m'])).toBeUndefined();
    const clash = [
      { declared: ['n'], dims: [5] },
      { declared: ['n'], dims: [6] },
    ];
    expect(knownDims(clash, ['n'])).toBeUndefined();
  });

  it('ignores an input whose rank differs from its declared shape', () => {
    expect(knownDims([{ declared: ['n', 'm'], dims: [4] }], ['n'])).toBeUndefined();
  });
});

describe('freeNow', () => {
  it('detaches the buffer and gives its memory back without waiting for a collection', async () => {
    await new Promise((r) => setTimeout(r, 0)); // the sink's close has been processed
    const size = 64 << 20;
    const b = new ArrayBuffer(size);
    new Uint8Array(b).fill(1);
    const view = new Uint8Array(b, 10, 10);
    const before = process.memoryUsage().arrayBuffers;
    freeNow(b);
    expect(b.byteLength).toBe(0);
    expect(view.byteLength).toBe(0);
    expect(before - process.memoryUsage().arrayBuffers).toBeGreaterThanOrEqual(size);
  });

  it('leaves what it cannot transfer alone', () => {
    const pooled = Buffer.from('small'); // a slice of Node's shared pool
    expect(() => freeNow(pooled.buffer)).not.toThrow();
    expect(pooled.toString()).toBe('small');
    const shared = new SharedArrayBuffer(8);
    freeNow(shared);
    expect(shared.byteLength).toBe(8);
  });
});
