// src/model/validate.ts: request validation against the model config, with Triton's error texts
// (core src/infer_request.cc Normalize() and the BYTES checks of the backends).
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/config/types.js';
import { joinBytes } from '../../src/kernel/datatypes.js';
import type { InferInputTensor, InferRequest } from '../../src/kernel/types.js';
import { classCounts, queueParameters, validateRequest } from '../../src/model/validate.js';
import { expectServalError, MAX_BATCH_NOTE } from '../helpers/errors.js';
import { resolveForTest } from '../helpers/resolve.js';
import { simpleConfig } from '../helpers/simple.js';

const validate = (req: InferRequest, config: ModelConfig) => validateRequest(req, resolveForTest(config));

const i32 = (n: number): Buffer => Buffer.alloc(n * 4);

function input(
  name: string,
  shape: number[],
  data: Uint8Array = i32(shape.reduce((a, b) => a * b, 1)),
  datatype = 'INT32',
): InferInputTensor {
  return { name, datatype, shape, data };
}

function request(inputs: InferInputTensor[], extra: Partial<InferRequest> = {}): InferRequest {
  return { modelName: 'simple', modelVersion: '', id: '', inputs, parameters: {}, ...extra };
}

const good = (batch = 1): InferInputTensor[] => [input('INPUT0', [batch, 16]), input('INPUT1', [batch, 16])];

/** The message of the INVALID_ARG error validation fails with. */
function validationError(req: InferRequest, config: ModelConfig): string {
  return expectServalError(() => validate(req, config), 'INVALID_ARG').message;
}

describe('valid requests', () => {
  it('returns the batch size, the inputs in model order and every output by default', () => {
    const [a, b] = good(3);
    const v = validate(request([b!, a!]), simpleConfig());
    expect(v.batchSize).toBe(3);
    expect(v.inputs.map((i) => [i.name, i.datatype, i.shape])).toEqual([
      ['INPUT0', 'INT32', [3, 16]],
      ['INPUT1', 'INT32', [3, 16]],
    ]);
    expect(v.inputs[0]!.data).toBe(a!.data);
    expect(v.outputs).toEqual(['OUTPUT0', 'OUTPUT1']);
  });

  it('keeps only the requested outputs', () => {
    const v = validate(request(good(), { outputs: [{ name: 'OUTPUT1' }] }), simpleConfig());
    expect(v.outputs).toEqual(['OUTPUT1']);
  });

  it('a model without batching keeps the full shape and batch size 0', () => {
    const cfg = simpleConfig(0);
    const v = validate(request([input('INPUT0', [16]), input('INPUT1', [16])]), cfg);
    expect(v.batchSize).toBe(0);
    expect(v.inputs[0]!.shape).toEqual([16]);
  });

  it('variable dims (-1) accept any size', () => {
    const cfg: ModelConfig = {
      name: 'id',
      max_batch_size: 8,
      input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [-1, 3] }],
      output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [-1, 3] }],
    };
    for (const n of [0, 1, 7]) {
      const v = validate(request([{ name: 'X', datatype: 'FP32', shape: [2, n, 3], data: Buffer.alloc(2 * n * 3 * 4) }]), cfg);
      expect(v.inputs[0]!.shape).toEqual([2, n, 3]);
    }
  });

  it('reshape: the model gets the reshape shape, variable dims filled from the request', () => {
    const cfg: ModelConfig = {
      name: 'r',
      max_batch_size: 4,
      input: [{ name: 'X', data_type: 'TYPE_INT32', dims: [-1, 6], reshape: { shape: [-1, 2, 3] } }],
      output: [{ name: 'Y', data_type: 'TYPE_INT32', dims: [1] }],
    };
    const v = validate(request([input('X', [2, 5, 6])]), cfg);
    expect(v.inputs[0]!.shape).toEqual([2, 5, 2, 3]);
  });

  it('BYTES with the right element count', () => {
    const cfg: ModelConfig = {
      name: 's',
      max_batch_size: 2,
      input: [{ name: 'S', data_type: 'TYPE_STRING', dims: [3] }],
      output: [{ name: 'O', data_type: 'TYPE_STRING', dims: [3] }],
    };
    const v = validate(request([input('S', [2, 3], joinBytes(['a', '', 'c', 'dd', 'e', 'ü']), 'BYTES')]), cfg);
    expect(v.inputs[0]!.datatype).toBe('BYTES');
  });
});

describe("Triton's error texts", () => {
  it('unknown input', () => {
    expect(validationError(request([good()[0]!, input('INPUT7', [1, 16])]), simpleConfig())).toBe(
      "[request id: <id_unknown>] unexpected inference input 'INPUT7' for model 'simple'",
    );
  });

  it('unknown output', () => {
    expect(validationError(request(good(), { outputs: [{ name: 'OUT' }] }), simpleConfig())).toBe(
      "[request id: <id_unknown>] unexpected inference output 'OUT' for model 'simple'",
    );
  });

  it('the request id goes into the prefix', () => {
    expect(validationError(request(good(), { id: 'my-id', outputs: [{ name: 'OUT' }] }), simpleConfig())).toBe(
      "[request id: my-id] unexpected inference output 'OUT' for model 'simple'",
    );
  });

  it('missing input', () => {
    expect(validationError(request([good()[1]!]), simpleConfig())).toBe(
      "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT1'], " +
        "but missing required input(s) ['INPUT0']. Please provide all required input(s).",
    );
    expect(validationError(request([]), simpleConfig())).toBe(
      "[request id: <id_unknown>] expected 2 inputs but got 0 inputs for model 'simple'. Got input(s) [], " +
        "but missing required input(s) ['INPUT0','INPUT1']. Please provide all required input(s).",
    );
  });

  it('missing input of a model with optional inputs', () => {
    const cfg = simpleConfig();
    cfg.input!.push({ name: 'EXTRA', data_type: 'TYPE_INT32', dims: [16], optional: true });
    expect(validationError(request([]), cfg)).toBe(
      "[request id: <id_unknown>] expected number of inputs between 2 and 3 but got 0 inputs for model 'simple'. Got input(s) [], " +
        "but missing required input(s) ['INPUT0','INPUT1']. Please provide all required input(s).",
    );
    // Leaving out only the optional one is fine.
    expect(validate(request(good()), cfg).inputs).toHaveLength(2);
  });

  it('wrong datatype', () => {
    const [a, b] = good();
    expect(validationError(request([{ ...a!, datatype: 'FP32' }, b!]), simpleConfig())).toBe(
      "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'",
    );
    expect(validationError(request([{ ...a!, datatype: 'FLOAT' }, b!]), simpleConfig())).toBe(
      "[request id: <id_unknown>] inference input 'INPUT0' has unknown data-type 'FLOAT'",
    );
  });

  it('wrong shape, with the NOTE when the model batches', () => {
    expect(validationError(request([input('INPUT0', [1, 8]), input('INPUT1', [1, 16])]), simpleConfig())).toBe(
      `[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,8]. ${MAX_BATCH_NOTE}`,
    );
    expect(validationError(request([input('INPUT0', [1, 16]), input('INPUT1', [1, 4, 4])]), simpleConfig())).toBe(
      `[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model 'simple'. Expected [-1,16], got [1,4,4]. ${MAX_BATCH_NOTE}`,
    );
  });

  it('wrong shape without the NOTE when the model does not batch', () => {
    expect(validationError(request([input('INPUT0', [1, 16]), input('INPUT1', [16])]), simpleConfig(0))).toBe(
      "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'simple'. Expected [16], got [1,16]. ",
    );
  });

  it('batch larger than max_batch_size', () => {
    expect(validationError(request(good(9)), simpleConfig())).toBe(
      "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'simple'",
    );
    expect(validate(request(good(8)), simpleConfig()).batchSize).toBe(8);
  });

  it('batch sizes that differ between inputs', () => {
    expect(validationError(request([input('INPUT0', [2, 16]), input('INPUT1', [3, 16])]), simpleConfig())).toMatch(
      /^\[request id: <id_unknown>\] input 'INPUT\d' batch size does not match other inputs for 'simple'$/,
    );
  });

  it('no shape at all on a batching model', () => {
    expect(validationError(request([input('INPUT0', [], i32(1)), input('INPUT1', [1, 16])]), simpleConfig())).toBe(
      "[request id: <id_unknown>] input 'INPUT0' has no shape but model requires batch dimension for 'simple'",
    );
  });

  it('batch size 0 is rejected', () => {
    expect(validationError(request([input('INPUT0', [0, 16]), input('INPUT1', [0, 16])]), simpleConfig())).toMatch(
      /batch-size must be >= 1/,
    );
  });

  it('byte size mismatch', () => {
    expect(validationError(request([input('INPUT0', [1, 16], i32(15)), input('INPUT1', [1, 16])]), simpleConfig())).toBe(
      "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60",
    );
    expect(validationError(request([input('INPUT0', [2, 16], i32(16)), input('INPUT1', [2, 16])]), simpleConfig())).toBe(
      "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 128, got 64",
    );
  });

  describe('BYTES element count', () => {
    const cfg: ModelConfig = {
      name: 'simple_string',
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_STRING', dims: [16] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_STRING', dims: [16] }],
    };
    const n = (k: number) => joinBytes(Array.from({ length: k }, (_, i) => String(i)));

    it('too few elements', () => {
      expect(validationError(request([input('INPUT0', [1, 16], n(14), 'BYTES')]), cfg)).toBe(
        "[request id: <id_unknown>] expected 16 string elements for inference input 'INPUT0' for model 'simple_string', got 14",
      );
    });

    it('too many elements (Triton counts up to the first extra one)', () => {
      expect(validationError(request([input('INPUT0', [1, 16], n(18), 'BYTES')]), cfg)).toBe(
        "[request id: <id_unknown>] unexpected number of string elements 17 for inference input 'INPUT0' for model 'simple_string', expecting 16",
      );
    });

    it('malformed serialization', () => {
      const bad = n(16);
      bad.writeUInt32LE(0xffff, 0);
      expect(validationError(request([input('INPUT0', [1, 16], bad, 'BYTES')]), cfg)).toBe(
        "[request id: <id_unknown>] element byte size indicator exceeds the end of the buffer for inference input 'INPUT0': malformed BYTES data, element of length 65535 at byte 0 runs past the end of the 86-byte buffer",
      );
    });

    it('several malformed inputs: the first in the model configuration is named, whatever the request order', () => {
      const bad = n(16);
      bad.writeUInt32LE(0xffff, 0);
      const two: ModelConfig = { ...cfg, input: [cfg.input![0]!, { ...cfg.input![0]!, name: 'INPUT1' }] };
      const both = [input('INPUT1', [1, 16], bad, 'BYTES'), input('INPUT0', [1, 16], bad, 'BYTES')];
      expect(validationError(request(both), two)).toMatch(/for inference input 'INPUT0': malformed BYTES data/);
    });
  });

  it("an input or output given twice: Triton's texts, checked first (inputs, then outputs), without the request id", () => {
    expect(validationError(request([...good(), good()[0]!]), simpleConfig())).toBe("input 'INPUT0' already exists in request");
    expect(validationError(request(good(), { outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT0' }] }), simpleConfig())).toBe(
      "output 'OUTPUT0' already exists in request",
    );
    // Before the unknown-output check and before the input count.
    expect(validationError(request([good()[0]!, good()[0]!], { outputs: [{ name: 'NOPE' }, { name: 'NOPE' }] }), simpleConfig())).toBe(
      "input 'INPUT0' already exists in request",
    );
    expect(validationError(request(good(), { outputs: [{ name: 'NOPE' }, { name: 'NOPE' }] }), simpleConfig())).toBe(
      "output 'NOPE' already exists in request",
    );
  });

  it('negative or fractional dimensions', () => {
    const cfg: ModelConfig = {
      name: 'id',
      max_batch_size: 0,
      input: [{ name: 'X', data_type: 'TYPE_INT32', dims: [-1] }],
      output: [{ name: 'Y', data_type: 'TYPE_INT32', dims: [-1] }],
    };
    expect(validationError(request([input('X', [-2], i32(0))]), cfg)).toMatch(/input 'X' has invalid dimension -2 in shape \[-2\]/);
  });
});

describe('request parameters both protocols carry', () => {
  const req = (
    outputs: InferRequest['outputs'],
    inputs: InferInputTensor[] = [],
    parameters: InferRequest['parameters'] = {},
  ): InferRequest => ({
    modelName: 'm',
    modelVersion: '',
    id: '',
    inputs,
    outputs,
    parameters,
  });

  it('reads the classification top-k per output; 0 or absent means the tensor itself', () => {
    const counts = classCounts(
      req([{ name: 'A' }, { name: 'B', parameters: { classification: 3 } }, { name: 'C', parameters: { classification: 0 } }]),
    );
    expect([...counts]).toEqual([['B', 3]]);
  });

  it('rejects a classification that is not a non-negative integer', () => {
    for (const bad of ['3', -1, 1.5, true]) {
      const e = expectServalError(() => classCounts(req([{ name: 'O', parameters: { classification: bad } }])));
      expect(e.code).toBe('INVALID_ARG');
      expect(e.message).toBe("output 'O': 'classification' must be a non-negative integer");
    }
  });

  it('leaves shared-memory parameters to the core (they are read before the model checks a request)', () => {
    const shm = { shared_memory_region: 'r', shared_memory_byte_size: 4 };
    const r = req(
      [{ name: 'O', parameters: shm }],
      [{ name: 'A', datatype: 'INT32', shape: [1], data: new Uint8Array(4), parameters: shm }],
    );
    expect(classCounts(r)).toEqual(new Map());
  });

  it('reads priority and timeout as non-negative integers', () => {
    expect(queueParameters(req([], [], { priority: 2, timeout: 100n }))).toEqual({ priority: 2, timeoutUs: 100 });
    expect(queueParameters(req([]))).toEqual({ priority: 0, timeoutUs: 0 });
    expect(expectServalError(() => queueParameters(req([], [], { priority: -1 }))).message).toBe(
      'request parameter \'priority\' must be a non-negative integer, got "-1"',
    );
  });
});
