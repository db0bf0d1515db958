#!/usr/bin/env node
// Serval's typed Node client (`serval/client`) against Serval, or any KServe v2 / Triton server:
// health, metadata, inference over HTTP (binary tensor extension) and gRPC with TypedArrays,
// a BYTES model, a gRPC stream, statistics and an error with the server's status, on the
// bundled models (`simple`: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1).
//
//   npm run build                                              # dist/src/client
//   node docs/examples/node-client.mjs                         # localhost:8000 / localhost:8001
//   node docs/examples/node-client.mjs --http 127.0.0.1:8000 --grpc 127.0.0.1:8001
//
// From another project: npm install <path to this repository> and import 'serval/client'.
// Exits non-zero if any answer is wrong.

import { parseArgs } from 'node:util';
import { ServalClient, ServalClientError } from 'serval/client';

const { values: args } = parseArgs({
  options: {
    http: { type: 'string', default: 'localhost:8000' },
    grpc: { type: 'string', default: 'localhost:8001' },
  },
});

const input0 = Int32Array.from({ length: 16 }, (_, i) => i);
const input1 = new Int32Array(16).fill(1);
const inputs = [
  { name: 'INPUT0', shape: [1, 16], data: input0 }, // datatype INT32 from the Int32Array
  { name: 'INPUT1', shape: [1, 16], data: input1 },
];
const expectedSum = input0.map((v, i) => v + input1[i]);
const expectedDiff = input0.map((v, i) => v - input1[i]);

let failures = 0;
function check(what, got, want) {
  const ok = got.length === want.length && got.every((v, i) => v === want[i]);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}: [${Array.from(got).join(', ')}]`);
  if (!ok) failures++;
}

async function example(protocol, url) {
  const client = new ServalClient({ url, protocol });
  try {
    console.log(`${protocol} ${url}: live=${await client.isServerLive()} ready=${await client.isServerReady()}`);
    const meta = await client.modelMetadata('simple');
    console.log(`${protocol} model ${meta.name} v[${meta.versions}] inputs ${meta.inputs.map((t) => `${t.name}:${t.datatype}[${t.shape}]`).join(' ')}`);

    const result = await client.infer('simple', inputs, { id: `${protocol}-1` });
    check(`${protocol} OUTPUT0 (id ${result.id})`, result.output('OUTPUT0', 'INT32').data, expectedSum); // Int32Array
    check(`${protocol} OUTPUT1`, result.output('OUTPUT1', 'INT32').data, expectedDiff);

    // BYTES tensors: strings (or Uint8Arrays) in, Uint8Arrays out; .strings() decodes them.
    const strings = await client.infer('simple_string', [
      { name: 'INPUT0', shape: [1, 16], data: Array.from(input0, String) },
      { name: 'INPUT1', shape: [1, 16], data: Array.from(input1, String) },
    ]);
    check(`${protocol} simple_string OUTPUT0`, strings.strings('OUTPUT0').map(Number), expectedSum);

    // Errors carry the server's message and status (HTTP status or gRPC code).
    try {
      await client.infer('no_such_model', inputs);
      console.log(`FAIL ${protocol} unknown model did not fail`);
      failures++;
    } catch (err) {
      if (!(err instanceof ServalClientError)) throw err;
      console.log(`ok   ${protocol} error ${err.code}: ${err.message}`);
    }

    if (protocol === 'grpc') {
      // A ModelStreamInfer stream: each answer settles its own request's promise.
      const stream = client.stream();
      const answers = await Promise.all([1, 2, 3].map((k) => stream.infer('simple', [inputs[0], { ...inputs[1], data: new Int32Array(16).fill(k) }])));
      stream.end();
      answers.forEach((r, k) => check(`grpc stream ${r.id} OUTPUT0`, r.output('OUTPUT0', 'INT32').data, input0.map((v) => v + k + 1)));
    }

    const [stats] = await client.modelStatistics('simple');
    console.log(`${protocol} simple: ${stats.inference_stats.success.count} successful requests, ${stats.execution_count} executions`);
  } finally {
    client.close();
  }
}

try {
  await example('grpc', args.grpc);
  await example('http', args.http);
} catch (err) {
  console.error(`error: ${err.message ?? err}`);
  process.exit(2);
}
if (failures) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
console.log('all checks passed');
