// src/model/warmup.ts: `model_warmup` samples turned into executions, after Triton core's
// TritonModelInstance::GenerateWarmupData and the ModelWarmup docs in model_config.proto. The
// configurations are Triton's (qa/L0_warmup/test.sh, the quickstart models).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecLayout, TensorSlot } from '../../src/backends/backend.js';
import { parseModelConfigText } from '../../src/config/pbtxt.js';
import type { ResolvedModelConfig } from '../../src/config/resolved.js';
import { joinBytes, splitBytes } from '../../src/kernel/datatypes.js';
import { warmupRequests as buildSamples } from '../../src/model/warmup.js';
import { assemble } from '../../src/scheduler/scheduler.js';
import { expectServalErrorAsync } from '../helpers/errors.js';
import { resolveForTest } from '../helpers/resolve.js';

type ExecRequest = ExecLayout & { data: Uint8Array };

/** The samples, each laid out as an execution the way the scheduler's assemble lays out a batch. */
async function warmupRequests(cfg: ResolvedModelConfig, dir: string) {
  const samples = await buildSamples(cfg, dir);
  return samples.map((s) => ({ name: s.name, count: s.count, req: assemble([s.req], s.req.batchSize) }));
}

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'serval-warmup-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A model directory with the given files in its `warmup` folder. */
async function modelDir(name: string, files: Record<string, Uint8Array> = {}): Promise<string> {
  const dir = path.join(root, name);
  await mkdir(path.join(dir, 'warmup'), { recursive: true });
  for (const [f, data] of Object.entries(files)) await writeFile(path.join(dir, 'warmup', f), data);
  return dir;
}

function config(name: string, text: string): ResolvedModelConfig {
  return resolveForTest(parseModelConfigText(text), { folderName: name });
}

const bytesOf = (req: ExecRequest, slot: TensorSlot): Uint8Array => req.data.subarray(slot.offset, slot.offset + slot.byteLength);
const slot = (req: ExecRequest, name: string): TensorSlot => {
  const s = req.inputs.find((i) => i.name === name);
  if (!s) throw new Error(`no slot ${name}`);
  return s;
};

/** The message of the INVALID_ARG error building the samples fails with. */
async function warmupError(cfg: ResolvedModelConfig, dir: string): Promise<string> {
  return (await expectServalErrorAsync(() => warmupRequests(cfg, dir), 'INVALID_ARG')).message;
}

// Triton's qa model onnx_float32_float32_float32 with the "regular sample" of L0_warmup.
const FLOAT32 = `
name: "onnx_float32_float32_float32"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }
]
`;

const REGULAR_SAMPLE = `
model_warmup [{
    name : "regular sample"
    batch_size: 1
    inputs {
        key: "INPUT0"
        value: {
            data_type: TYPE_FP32
            dims: 16
            zero_data: true
        }
    }
    inputs {
        key: "INPUT1"
        value: {
            data_type: TYPE_FP32
            dims: 16
            random_data: true
        }
    }
}]
`;

describe('synthetic data', () => {
  it("builds Triton's 'regular sample': zeros and random values, batch 1, every output requested", async () => {
    const cfg = config('onnx_float32_float32_float32', FLOAT32 + REGULAR_SAMPLE);
    const samples = await warmupRequests(cfg, await modelDir('f32'));
    expect(samples).toHaveLength(1);
    const [s] = samples;
    expect(s!.name).toBe('regular sample');
    expect(s!.count).toBe(1);
    expect(s!.req.outputs).toStrictEqual(['OUTPUT0', 'OUTPUT1']);
    // Inputs in model order, laid out like the scheduler's assemble: 64-byte aligned slots.
    expect(s!.req.inputs).toStrictEqual([
      { name: 'INPUT0', datatype: 'FP32', dims: [1, 16], offset: 0, byteLength: 64 },
      { name: 'INPUT1', datatype: 'FP32', dims: [1, 16], offset: 64, byteLength: 64 },
    ]);
    expect(s!.req.data.byteLength).toBe(128);
    expect([...bytesOf(s!.req, slot(s!.req, 'INPUT0'))].every((b) => b === 0)).toBe(true);
    // 64 random bytes are all zero with probability 2^-512.
    expect([...bytesOf(s!.req, slot(s!.req, 'INPUT1'))].some((b) => b !== 0)).toBe(true);
  });

  it('aligns every slot to 64 bytes and repeats the sample batch_size times', async () => {
    const cfg = config(
      'simple',
      `max_batch_size: 8
       input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 3 ] }, { name: "INPUT1" data_type: TYPE_UINT8 dims: [ 5 ] } ]
       output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 3 ] } ]
       model_warmup [{ name: "batch of 4" batch_size: 4
         inputs { key: "INPUT1" value { data_type: TYPE_UINT8 dims: [ 5 ] random_data: true } }
         inputs { key: "INPUT0" value { data_type: TYPE_INT32 dims: [ 3 ] zero_data: true } } }]`,
    );
    const [s] = await warmupRequests(cfg, await modelDir('simple'));
    const a = slot(s!.req, 'INPUT0');
    const b = slot(s!.req, 'INPUT1');
    expect(s!.req.inputs.map((i) => i.name)).toStrictEqual(['INPUT0', 'INPUT1']);
    expect(a).toStrictEqual({ name: 'INPUT0', datatype: 'INT32', dims: [4, 3], offset: 0, byteLength: 48 });
    expect(b).toStrictEqual({ name: 'INPUT1', datatype: 'UINT8', dims: [4, 5], offset: 64, byteLength: 20 });
    expect(s!.req.data.byteLength).toBe(128);
    // The random sample is the same in every batch item (one sample, duplicated).
    const rb = bytesOf(s!.req, b);
    for (let i = 1; i < 4; i++) expect([...rb.subarray(i * 5, i * 5 + 5)]).toStrictEqual([...rb.subarray(0, 5)]);
  });

  it('uses zeros for zero_data even when written as false (a set oneof member counts)', async () => {
    const cfg = config(
      'onnx_float32_float32_float32',
      FLOAT32 +
        `model_warmup { name: "w" batch_size: 2
           inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: false } }
           inputs { key: "INPUT1" value { data_type: TYPE_FP32 dims: [ 16 ] random_data: false } } }`,
    );
    const [s] = await warmupRequests(cfg, await modelDir('m'));
    expect([...bytesOf(s!.req, slot(s!.req, 'INPUT0'))].every((x) => x === 0)).toBe(true);
    expect(slot(s!.req, 'INPUT0').dims).toStrictEqual([2, 16]);
    expect([...bytesOf(s!.req, slot(s!.req, 'INPUT1'))].some((x) => x !== 0)).toBe(true);
  });

  it("builds Triton's string samples: zero and random data are both empty strings", async () => {
    // qa onnx_zero_1_object with L0_warmup's "zero string stateless" and "random string stateless".
    const cfg = config(
      'onnx_zero_1_object',
      `platform: "onnxruntime_onnx"
       max_batch_size: 8
       input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
       output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
       model_warmup [
       {
           name : "zero string stateless"
           batch_size: 1
           inputs { key: "INPUT0" value: { data_type: TYPE_STRING dims: 16 zero_data: true } }
       },
       {
           name : "random string stateless"
           batch_size: 1
           inputs { key: "INPUT0" value: { data_type: TYPE_STRING dims: 16 random_data: true } }
       }
       ]`,
    );
    const samples = await warmupRequests(cfg, await modelDir('zero_1_object'));
    expect(samples.map((s) => s.name)).toStrictEqual(['zero string stateless', 'random string stateless']);
    for (const s of samples) {
      const x = slot(s.req, 'INPUT0');
      expect(x).toMatchObject({ datatype: 'BYTES', dims: [1, 16], byteLength: 64 });
      const elements = splitBytes(bytesOf(s.req, x), 'test');
      expect(elements).toHaveLength(16);
      expect(elements.every((e) => e.byteLength === 0)).toBe(true);
    }
  });

  it('gives BOOL random data as 0/1 values', async () => {
    const cfg = config(
      'flags',
      `max_batch_size: 0
       input [ { name: "FLAGS" data_type: TYPE_BOOL dims: [ 256 ] } ]
       output [ { name: "COUNT" data_type: TYPE_INT64 dims: [ 1 ] } ]
       model_warmup { name: "r" batch_size: 1 inputs { key: "FLAGS" value { data_type: TYPE_BOOL dims: [ 256 ] random_data: true } } }`,
    );
    const [s] = await warmupRequests(cfg, await modelDir('flags'));
    const data = bytesOf(s!.req, slot(s!.req, 'FLAGS'));
    expect(data.every((b) => b === 0 || b === 1)).toBe(true);
    expect(data.some((b) => b === 1)).toBe(true);
  });

  it('uses the full dims without a batch dimension for a non-batching model', async () => {
    const cfg = config(
      'densenet_onnx',
      `platform: "onnxruntime_onnx"
       max_batch_size: 0
       input [ { name: "data_0" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ] reshape { shape: [ 1, 3, 224, 224 ] } } ]
       output [ { name: "fc6_1" data_type: TYPE_FP32 dims: [ 1000 ] reshape { shape: [ 1, 1000, 1, 1 ] } label_filename: "densenet_labels.txt" } ]
       model_warmup { name: "image" batch_size: 1 inputs { key: "data_0" value { data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true } } }`,
    );
    const [s] = await warmupRequests(cfg, await modelDir('densenet'));
    // The model sees the reshape, as for a client request.
    expect(s!.req.inputs).toStrictEqual([
      { name: 'data_0', datatype: 'FP32', dims: [1, 3, 224, 224], offset: 0, byteLength: 3 * 224 * 224 * 4 },
    ]);
    expect(s!.req.outputs).toStrictEqual(['fc6_1']);
  });

  it('applies an input reshape for a batching model ([batch, 1] to [batch])', async () => {
    const cfg = config(
      'm',
      `max_batch_size: 8
       input [ { name: "in" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } } ]
       output [ { name: "out" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } } ]
       model_warmup { name: "w" batch_size: 3 inputs { key: "in" value { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } }`,
    );
    const [s] = await warmupRequests(cfg, await modelDir('m'));
    expect(slot(s!.req, 'in')).toMatchObject({ dims: [3], byteLength: 12 });
  });
});

describe('input_data_file', () => {
  it("reads Triton's 'image sample' raw data from the model's warmup folder", async () => {
    // L0_warmup's inception_v3 sample (299x299x3 FP32, NHWC), here for an ONNX model.
    const raw = Buffer.alloc(299 * 299 * 3 * 4);
    for (let i = 0; i < raw.length; i += 4) raw.writeFloatLE((i / 4) % 255, i);
    const dir = await modelDir('inception_v3_warmup', { raw_mug_data: raw });
    const cfg = config(
      'inception_v3_warmup',
      `platform: "onnxruntime_onnx"
       max_batch_size: 128
       input [ { name: "input" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 299, 299, 3 ] } ]
       output [ { name: "InceptionV3/Predictions/Softmax" data_type: TYPE_FP32 dims: [ 1001 ] label_filename: "inception_labels.txt" } ]
       model_warmup [{
           name : "image sample"
           batch_size: 1
           inputs {
               key: "input"
               value: {
                   data_type: TYPE_FP32
                   dims: [ 299, 299, 3 ]
                   input_data_file: "raw_mug_data"
               }
           }
       }]`,
    );
    const [s] = await warmupRequests(cfg, dir);
    const x = slot(s!.req, 'input');
    expect(x).toMatchObject({ dims: [1, 299, 299, 3], offset: 0, byteLength: raw.length });
    expect(Buffer.from(bytesOf(s!.req, x)).equals(raw)).toBe(true);
    expect(s!.req.outputs).toStrictEqual(['InceptionV3/Predictions/Softmax']);
  });

  it('repeats a file sample batch_size times, and uses only the first sample-size bytes of a longer file', async () => {
    const sample = Buffer.from(Int32Array.from([1, 2, 3]).buffer);
    const longer = Buffer.concat([sample, Buffer.from([9, 9, 9, 9])]);
    const dir = await modelDir('ints', { sample: longer });
    const cfg = config(
      'ints',
      `max_batch_size: 4
       input [ { name: "X" data_type: TYPE_INT32 dims: [ 3 ] } ]
       output [ { name: "Y" data_type: TYPE_INT32 dims: [ 3 ] } ]
       model_warmup { name: "file" batch_size: 3 count: 5 inputs { key: "X" value { data_type: TYPE_INT32 dims: [ 3 ] input_data_file: "sample" } } }`,
    );
    const [s] = await warmupRequests(cfg, dir);
    expect(s!.count).toBe(5);
    const x = slot(s!.req, 'X');
    expect(x.dims).toStrictEqual([3, 3]);
    const got = new Int32Array(s!.req.data.buffer, s!.req.data.byteOffset + x.offset, x.byteLength / 4);
    expect([...got]).toStrictEqual([1, 2, 3, 1, 2, 3, 1, 2, 3]);
  });

  it('reads serialized strings from a file (L0_warmup raw_string_data)', async () => {
    // One element "233", as the L0_warmup script writes it; batch 8 as in its "string statefull" sample.
    const dir = await modelDir('strings', { raw_string_data: Buffer.from('\x03\x00\x00\x00\x32\x33\x33', 'latin1') });
    const cfg = config(
      'onnx_object',
      `max_batch_size: 8
       input [ { name: "INPUT" data_type: TYPE_STRING dims: [ 1 ] } ]
       output [ { name: "OUTPUT" data_type: TYPE_STRING dims: [ 1 ] } ]
       model_warmup [{
           name : "string sample"
           batch_size: 8
           inputs { key: "INPUT" value: { data_type: TYPE_STRING dims: 1 input_data_file: "raw_string_data" } }
       }]`,
    );
    const [s] = await warmupRequests(cfg, dir);
    const x = slot(s!.req, 'INPUT');
    expect(x).toMatchObject({ datatype: 'BYTES', dims: [8, 1], byteLength: 8 * 7 });
    expect(Buffer.from(bytesOf(s!.req, x)).equals(joinBytes(Array(8).fill('233')))).toBe(true);
  });
});

describe('samples, counts and skipping', () => {
  it('skips samples with batch_size 0 or none (Triton: "Skipping batch 0 warmup sample")', async () => {
    const cfg = config(
      'onnx_float32_float32_float32',
      FLOAT32 +
        `model_warmup [
           { name: "no batch" inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } } },
           { name: "batch 0" batch_size: 0 },
           { name: "kept" batch_size: 1 count: 0
             inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }
             inputs { key: "INPUT1" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } } },
           { name: "thrice" batch_size: 8 count: 3
             inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }
             inputs { key: "INPUT1" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } } }
         ]`,
    );
    const samples = await warmupRequests(cfg, await modelDir('m'));
    expect(samples.map((s) => [s.name, s.count, s.req.inputs[0]!.dims[0]])).toStrictEqual([
      ['kept', 1, 1],
      ['thrice', 3, 8],
    ]);
  });

  it('returns nothing for a config without model_warmup', async () => {
    expect(await warmupRequests(config('onnx_float32_float32_float32', FLOAT32), await modelDir('m'))).toStrictEqual([]);
  });

  it('gives every sample its own buffer', async () => {
    const cfg = config('onnx_float32_float32_float32', FLOAT32 + REGULAR_SAMPLE + REGULAR_SAMPLE.replace('regular sample', 'second'));
    const [a, b] = await warmupRequests(cfg, await modelDir('m'));
    expect(a!.req.data.buffer).not.toBe(b!.req.data.buffer);
  });
});

describe('errors name the model, the sample and the input', () => {
  const sample = (inputs: string, extra = 'batch_size: 1'): string => `model_warmup { name: "bad" ${extra} ${inputs} }`;
  const zero = (name: string, dims = '[ 16 ]', type = 'TYPE_FP32', source = 'zero_data: true'): string =>
    `inputs { key: "${name}" value { data_type: ${type} dims: ${dims} ${source} } }`;
  const both = zero('INPUT0') + zero('INPUT1');
  const M = "model 'onnx_float32_float32_float32': warmup sample 'bad'";
  const f32 = (text: string): ResolvedModelConfig => config('onnx_float32_float32_float32', FLOAT32 + text);

  it('rejects an input the model does not have', async () => {
    expect(await warmupError(f32(sample(both + zero('INPUT2'))), await modelDir('e'))).toBe(
      `${M}: unknown input 'INPUT2'; the model's inputs are ['INPUT0', 'INPUT1']`,
    );
  });

  it('rejects a sample that leaves out a required input', async () => {
    expect(await warmupError(f32(sample(zero('INPUT0'))), await modelDir('e'))).toBe(`${M}: no data for required input(s) ['INPUT1']`);
  });

  it('accepts a sample that leaves out an optional input', async () => {
    const cfg = config(
      'opt',
      `max_batch_size: 8
       input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] optional: true } ]
       output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
       ${sample(zero('INPUT0'))}`,
    );
    const [s] = await warmupRequests(cfg, await modelDir('opt'));
    expect(s!.req.inputs.map((i) => i.name)).toStrictEqual(['INPUT0']);
  });

  it('rejects a missing file, naming its path', async () => {
    const dir = await modelDir('nofile');
    const msg = await warmupError(f32(sample(zero('INPUT0') + zero('INPUT1', '[ 16 ]', 'TYPE_FP32', 'input_data_file: "nope.bin"'))), dir);
    expect(msg).toBe(`${M}: input 'INPUT1': cannot read input_data_file 'nope.bin' (${path.basename(dir)}/warmup/nope.bin): no such file`);
  });

  it('rejects a file shorter than one sample', async () => {
    const dir = await modelDir('short', { 'short.bin': Buffer.alloc(60) });
    expect(
      await warmupError(f32(sample(zero('INPUT0') + zero('INPUT1', '[ 16 ]', 'TYPE_FP32', 'input_data_file: "short.bin"'))), dir),
    ).toBe(
      `${M}: input 'INPUT1': input_data_file 'short.bin' has 60 bytes, but FP32 dims [16] need 64 bytes (one sample, without the batch dimension)`,
    );
  });

  it('rejects a string file with the wrong number of elements or a broken serialization', async () => {
    const cfg = (file: string): ResolvedModelConfig =>
      config(
        'strs',
        `max_batch_size: 8
         input [ { name: "INPUT" data_type: TYPE_STRING dims: [ 2 ] } ]
         output [ { name: "OUTPUT" data_type: TYPE_STRING dims: [ 2 ] } ]
         model_warmup { name: "s" batch_size: 1 inputs { key: "INPUT" value { data_type: TYPE_STRING dims: [ 2 ] input_data_file: "${file}" } } }`,
      );
    const dir = await modelDir('strs', { one: joinBytes(['a']), broken: Buffer.from([5, 0, 0, 0, 0x61]) });
    expect(await warmupError(cfg('one'), dir)).toBe(
      "model 'strs': warmup sample 's': input 'INPUT': input_data_file 'one' holds 1 string element(s), but dims [2] need 2",
    );
    expect(await warmupError(cfg('broken'), dir)).toBe(
      "model 'strs': warmup sample 's': input 'INPUT': input_data_file 'broken': malformed BYTES data, element of length 5 at byte 0 runs past the end of the 5-byte buffer",
    );
  });

  it('rejects a file outside the warmup folder', async () => {
    const dir = await modelDir('escape');
    expect(
      await warmupError(f32(sample(zero('INPUT0') + zero('INPUT1', '[ 16 ]', 'TYPE_FP32', 'input_data_file: "../config.pbtxt"'))), dir),
    ).toBe(`${M}: input 'INPUT1': input_data_file '../config.pbtxt' must name a file inside the model's 'warmup' folder`);
  });

  it('rejects variable-size dims (Triton: all variable-size dimensions must be specified)', async () => {
    expect(await warmupError(f32(sample(zero('INPUT0', '[ -1 ]') + zero('INPUT1'))), await modelDir('e'))).toBe(
      `${M}: input 'INPUT0': all variable-size dimensions must be specified in warmup dims [-1]`,
    );
  });

  it('rejects an input without a data source', async () => {
    expect(await warmupError(f32(sample(zero('INPUT0') + zero('INPUT1', '[ 16 ]', 'TYPE_FP32', ''))), await modelDir('e'))).toBe(
      `${M}: input 'INPUT1': no input data source; set one of zero_data, random_data or input_data_file`,
    );
  });

  it('rejects a data type or shape the model config does not accept, as for a request', async () => {
    expect(await warmupError(f32(sample(zero('INPUT0') + zero('INPUT1', '[ 16 ]', 'TYPE_INT32'))), await modelDir('e'))).toBe(
      `${M}: inference input 'INPUT1' data-type is 'INT32', but model 'onnx_float32_float32_float32' expects 'FP32'`,
    );
    const msg = await warmupError(f32(sample(zero('INPUT0') + zero('INPUT1', '[ 8 ]'))), await modelDir('e'));
    expect(msg).toContain(
      `${M}: unexpected shape for input 'INPUT1' for model 'onnx_float32_float32_float32'. Expected [-1,16], got [1,8].`,
    );
    expect(await warmupError(f32(sample(zero('INPUT0') + zero('INPUT1', '[ 16 ]', 'TYPE_BF16'))), await modelDir('e'))).toBe(
      `${M}: input 'INPUT1': data_type TYPE_BF16 is not supported`,
    );
  });

  it('rejects a batch_size above max_batch_size, and above 1 for a non-batching model', async () => {
    expect(await warmupError(f32(sample(both, 'batch_size: 9')), await modelDir('e'))).toBe(
      `${M}: batch_size 9 exceeds the model's max_batch_size 8`,
    );
    const nonBatching = config(
      'nb',
      `max_batch_size: 0
       input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
       output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
       ${sample(both, 'batch_size: 2')}`,
    );
    expect(await warmupError(nonBatching, await modelDir('nb'))).toBe(
      "model 'nb': warmup sample 'bad': batch_size is 2, but the model does not support batching (max_batch_size 0), so batch_size must be 1",
    );
  });

  it('names an unnamed sample by its position', async () => {
    const cfg = f32(
      `model_warmup [ ${REGULAR_SAMPLE.slice(REGULAR_SAMPLE.indexOf('{'), REGULAR_SAMPLE.lastIndexOf(']'))}, { batch_size: 1 ${zero('X')} } ]`,
    );
    expect(await warmupError(cfg, await modelDir('e'))).toBe(
      "model 'onnx_float32_float32_float32': warmup sample '#1': unknown input 'X'; the model's inputs are ['INPUT0', 'INPUT1']",
    );
  });
});
