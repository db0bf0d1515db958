// Request parameters as the front-ends hand them to the core (what a model then sees), against the
// fake core that records every request: the reserved `triton_` keys refused with Triton's texts,
// HTTP's binary_data_output taken out, and headers / metadata forwarded by
// --http-header-forward-pattern / --grpc-header-forward-pattern (Triton 2.51 checked side by side:
// HTTP header names as sent, gRPC keys lower case, both matched case-insensitively anywhere in the
// name). test/conformance/test_request_parameters.py checks the same through a Python model.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GrpcServer, startGrpcServer } from '../../src/frontends/grpc/server.js';
import { addForwarded, headerPattern } from '../../src/frontends/header_forward.js';
import { buildHttpServer } from '../../src/frontends/http/server.js';
import { capturedLogger, fakeCore } from '../helpers/frontends.js';
import { packageDefinition } from '../helpers/grpc.js';

const HTTP_TRITON_TEXT = "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.";
const GRPC_TRITON_TEXT =
  "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: triton_enable_empty_final_response";

const fake = fakeCore();
let app: FastifyInstance;
let httpPort = 0;
let server: GrpcServer;
type InferClient = grpc.Client & {
  ModelInfer(req: object, md: grpc.Metadata, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null) => void): void;
};
let client: InferClient;

beforeAll(async () => {
  app = buildHttpServer(fake, capturedLogger().log, {
    maxInputSize: 1 << 20,
    forwardPattern: headerPattern('MY_HEADER.*', 'http-header-forward-pattern'),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  httpPort = (app.server.address() as AddressInfo).port;
  server = await startGrpcServer(fake, capturedLogger().log, '127.0.0.1', 0, {
    forwardPattern: headerPattern('my_header.*', 'grpc-header-forward-pattern'),
  });
  const pkg = grpc.loadPackageDefinition(packageDefinition()) as unknown as {
    inference: { GRPCInferenceService: new (a: string, c: grpc.ChannelCredentials) => InferClient };
  };
  client = new pkg.inference.GRPCInferenceService(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
});
afterAll(async () => {
  client.close();
  await server.shutdown();
  await app.close();
});

const INPUT = { name: 'IN', shape: [1], datatype: 'INT32' };

/** One HTTP infer to the fake core's `traced` model: the parameters the core got, or the error. */
async function httpParams(parameters: unknown, headers: Record<string, string> = {}): Promise<unknown> {
  const before = fake.requests.length;
  // Over a socket (node:http keeps header names as given), not inject(), which lower-cases them.
  const body = JSON.stringify({ inputs: [{ ...INPUT, data: [1] }], parameters });
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request({ port: httpPort, method: 'POST', path: '/v2/models/traced/infer', headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => {
        text += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
  if (status !== 200) return { status, error: (JSON.parse(text) as { error: string }).error };
  return fake.requests[before]!.parameters;
}

type GrpcParam = { bool_param?: boolean; int64_param?: number; string_param?: string };

/** One unary gRPC ModelInfer the same way; `compress` takes grpc-js' own call path instead of unary_infer.ts'. */
function grpcParams(parameters: Record<string, GrpcParam>, metadata: Record<string, string> = {}, compress = false): Promise<unknown> {
  const before = fake.requests.length;
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  const req = { model_name: 'traced', inputs: [{ ...INPUT, contents: { int_contents: [1] } }], parameters };
  const opts: grpc.CallOptions = { deadline: Date.now() + 5000 };
  if (compress) md.set('grpc-internal-encoding-request', 'gzip');
  return new Promise((resolve) =>
    client.ModelInfer(req, md, opts, (e: grpc.ServiceError | null) =>
      resolve(e ? { code: e.code, details: e.details } : fake.requests[before]!.parameters),
    ),
  );
}

describe('reserved request parameters', () => {
  it('HTTP refuses every triton_ key with 400 and Triton’s text', async () => {
    for (const key of ['triton_x', 'triton_enable_empty_final_response', 'triton_final_response']) {
      expect(await httpParams({ [key]: true }), key).toEqual({ status: 400, error: HTTP_TRITON_TEXT });
    }
  });

  it('gRPC refuses triton_ keys but triton_enable_empty_final_response, which must be a bool and is not passed on', async () => {
    for (const compress of [false, true]) {
      expect(await grpcParams({ triton_x: { bool_param: true } }, {}, compress)).toEqual({
        code: grpc.status.INVALID_ARGUMENT,
        details: GRPC_TRITON_TEXT,
      });
      expect(await grpcParams({ triton_enable_empty_final_response: { int64_param: 3 } }, {}, compress)).toEqual({
        code: grpc.status.INVALID_ARGUMENT,
        details: "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.",
      });
      expect(await grpcParams({ triton_enable_empty_final_response: { bool_param: true }, k: { int64_param: 1 } }, {}, compress)).toEqual({
        k: 1,
      });
    }
  });

  it('HTTP takes binary_data_output out (it frames the response) and refuses one that is not a bool', async () => {
    expect(await httpParams({ binary_data_output: true, k: 'v' })).toEqual({ k: 'v' });
    expect(await httpParams({ binary_data_output: 3 })).toEqual({
      status: 400,
      error: "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean",
    });
  });

  it('passes other parameters as they came, binary_data and binary_data_size included', async () => {
    expect(await httpParams({ s: 'a', n: 2, b: true, binary_data: true, binary_data_size: 4 })).toEqual({
      s: 'a',
      n: 2,
      b: true,
      binary_data: true,
      binary_data_size: 4,
    });
    expect(await grpcParams({ s: { string_param: 'a' }, binary_data_size: { int64_param: 4 } })).toEqual({ s: 'a', binary_data_size: 4 });
  });
});

describe('header forwarding', () => {
  it('HTTP forwards matching headers, case-insensitively, with their names as sent, after the request’s parameters', async () => {
    const got = await httpParams({ a: 1 }, { My_Header_1: 'v1', 'x-my_header_2': 'v2', other: 'no' });
    expect(got).toEqual({ a: 1, My_Header_1: 'v1', 'x-my_header_2': 'v2' });
    expect(Object.keys(got as object)[0]).toBe('a');
  });

  it('gRPC forwards matching metadata on both unary paths, not the transport headers', async () => {
    for (const compress of [false, true]) {
      expect(await grpcParams({ a: { int64_param: 1 } }, { my_header_1: 'v1', 'x-my_header': 'y', other: 'no' }, compress)).toEqual({
        a: 1,
        my_header_1: 'v1',
        'x-my_header': 'y',
      });
    }
  });

  it('never lets a header replace the request’s own parameter or set its priority, timeout or sequence', async () => {
    expect(await httpParams({ my_header_1: 'own' }, { my_header_1: 'forwarded', my_header_2: 'v2' })).toEqual({
      my_header_1: 'own',
      my_header_2: 'v2',
    });
    const params: Record<string, unknown> = { k: 1 };
    addForwarded(params, { timeout: '5', priority: '1', sequence_id: '7', k: 'x', other: 'y' });
    expect(params).toEqual({ k: 1, other: 'y' });
  });

  it('forwards nothing without a pattern, and a pattern that starts with (?-i) is case-sensitive', () => {
    expect(headerPattern('', 'x')).toBeUndefined();
    expect(headerPattern('(?-i)MY_HEADER.*', 'x')!.test('my_header_1')).toBe(false);
    expect(headerPattern('MY_HEADER.*', 'x')!.test('my_header_1')).toBe(true);
    expect(() => headerPattern('(', 'grpc-header-forward-pattern')).toThrow(
      "--grpc-header-forward-pattern: invalid regular expression '('",
    );
  });
});
