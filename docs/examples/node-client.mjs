#!/usr/bin/env node
// A Node.js client for Serval (or Triton): gRPC ModelInfer with
// @grpc/grpc-js + @grpc/proto-loader against proto/grpc_service.proto, and
// HTTP inference with fetch(), both JSON tensors and the binary tensor
// extension, on the `simple` model (OUTPUT0 = INPUT0 + INPUT1,
// OUTPUT1 = INPUT0 - INPUT1).
//
//   node docs/examples/node-client.mjs                       # localhost:8000 / localhost:8001
//   node docs/examples/node-client.mjs --http 127.0.0.1:8000 --grpc 127.0.0.1:8001
//
// From another project: npm install @grpc/grpc-js @grpc/proto-loader, copy
// proto/grpc_service.proto and proto/model_config.proto, and point --proto-dir
// at them. Exits non-zero if any answer is wrong.

import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    http: { type: 'string', default: 'localhost:8000' },
    grpc: { type: 'string', default: 'localhost:8001' },
    'proto-dir': { type: 'string', default: path.join(here, '..', '..', 'proto') },
    model: { type: 'string', default: 'simple' },
  },
});

// Inputs: INPUT0 = 0..15, INPUT1 = all 1, shape [1, 16] (batch of one).
const input0 = Int32Array.from({ length: 16 }, (_, i) => i);
const input1 = new Int32Array(16).fill(1);
const expectedSum = input0.map((v, i) => v + input1[i]);
const expectedDiff = input0.map((v, i) => v - input1[i]);

let failures = 0;
function check(what, got, want) {
  const ok = got.length === want.length && got.every((v, i) => v === want[i]);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}: [${Array.from(got).join(', ')}]`);
  if (!ok) failures++;
}

// Raw tensor bytes are little-endian; Int32Array uses the host order, which
// is little-endian on every platform Node supports, so a view is enough.
const toBytes = (typed) => Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
const toInt32 = (buf) => {
  const copy = Buffer.from(buf); // aligned copy
  return new Int32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4);
};

// ---------------------------------------------------------------- gRPC ----

async function grpcExample() {
  const definition = protoLoader.loadSync(path.join(args['proto-dir'], 'grpc_service.proto'), {
    includeDirs: [args['proto-dir']],
    keepCase: true, // field names as in the .proto (raw_input_contents, ...)
    longs: String, // int64/uint64 (shape, counts) as strings: no precision loss
    enums: String,
    defaults: true,
  });
  const inference = grpc.loadPackageDefinition(definition).inference;
  const client = new inference.GRPCInferenceService(args.grpc, grpc.credentials.createInsecure(), {
    // Tensors can be large: lift grpc-js's 4 MiB default receive limit.
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  });
  const call = (method, request) =>
    new Promise((resolve, reject) =>
      client[method](request, { deadline: Date.now() + 10_000 }, (err, res) => (err ? reject(err) : resolve(res))),
    );

  try {
    const ready = await call('ServerReady', {});
    console.log(`gRPC ${args.grpc}: server ready = ${ready.ready}`);
    const meta = await call('ModelMetadata', { name: args.model });
    console.log(
      `gRPC model ${meta.name} versions [${meta.versions}] inputs ` +
        meta.inputs.map((t) => `${t.name}:${t.datatype}[${t.shape}]`).join(' '),
    );

    const response = await call('ModelInfer', {
      model_name: args.model,
      id: 'node-grpc-1',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
      ],
      outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }],
      // One entry per input, in the order of `inputs`.
      raw_input_contents: [toBytes(input0), toBytes(input1)],
    });
    // Outputs come back in raw_output_contents, in the order of `outputs`.
    response.outputs.forEach((out, i) => {
      const values = toInt32(response.raw_output_contents[i]);
      check(`gRPC ${out.name} ${out.datatype}[${out.shape}] (id ${response.id})`, values,
        out.name === 'OUTPUT0' ? expectedSum : expectedDiff);
    });

    // Errors arrive as gRPC status codes with Triton's messages.
    try {
      await call('ModelInfer', { model_name: 'no_such_model', inputs: [] });
      console.log('FAIL gRPC unknown model did not fail');
      failures++;
    } catch (err) {
      console.log(`ok   gRPC error for an unknown model: ${grpc.status[err.code]}: ${err.details}`);
    }
  } finally {
    client.close();
  }
}

// ---------------------------------------------------------------- HTTP ----

async function httpJsonExample() {
  const url = `http://${args.http}/v2/models/${args.model}/infer`;
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      id: 'node-http-1',
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from(input0) },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array.from(input1) },
      ],
      outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }],
    }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${body.error}`);
  for (const out of body.outputs) {
    check(`HTTP JSON ${out.name} ${out.datatype}[${out.shape}] (id ${body.id})`, Int32Array.from(out.data),
      out.name === 'OUTPUT0' ? expectedSum : expectedDiff);
  }
}

async function httpBinaryExample() {
  // Binary tensor data extension: a JSON header, then the raw tensors; the
  // header's length goes in Inference-Header-Content-Length.
  const header = Buffer.from(JSON.stringify({
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
    ],
    outputs: [
      { name: 'OUTPUT0', parameters: { binary_data: true } },
      { name: 'OUTPUT1', parameters: { binary_data: true } },
    ],
  }));
  const res = await fetch(`http://${args.http}/v2/models/${args.model}/infer`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/octet-stream',
      'Inference-Header-Content-Length': String(header.length),
    },
    body: Buffer.concat([header, toBytes(input0), toBytes(input1)]),
  });
  const raw = Buffer.from(await res.arrayBuffer());
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${raw.toString()}`);
  const jsonLength = Number(res.headers.get('inference-header-content-length') ?? raw.length);
  const meta = JSON.parse(raw.subarray(0, jsonLength).toString());
  let offset = jsonLength;
  for (const out of meta.outputs) {
    const size = out.parameters.binary_data_size;
    check(`HTTP binary ${out.name} ${out.datatype}[${out.shape}]`, toInt32(raw.subarray(offset, offset + size)),
      out.name === 'OUTPUT0' ? expectedSum : expectedDiff);
    offset += size;
  }
}

try {
  await grpcExample();
  await httpJsonExample();
  await httpBinaryExample();
} catch (err) {
  console.error(`error: ${err.message ?? err}`);
  process.exit(2);
}
if (failures) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
console.log('all checks passed');
