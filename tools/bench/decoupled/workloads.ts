/**
 * The decoupled section's streaming workloads: what each request asks of the model, over gRPC
 * (the Node client's tensors) and over HTTP generate_stream (a flat JSON body), and how many
 * responses it must produce. Shared by the driver (tools/bench/decoupled.ts) and the load
 * generator (stream_load.ts).
 */
import type { InferInput } from '../../../src/client/index.js';

export type StreamProto = 'grpc' | 'sse';

export interface StreamWorkload {
  id: 'repeat32' | 'text10';
  model: string;
  /** Responses with data per request (the final flag comes alone after them). */
  responses: number;
  label: string;
  grpcInputs(): InferInput[];
  sseBody(): string;
}

const REPEAT_N = 32;
const TEXT_PROMPT = 'hello';
const TEXT_DELAY_MS = 10;
/** text_generator's template around the prompt, one response per word (model_repository/text_generator/1/model.py). */
const TEXT_WORDS = `You said: ${TEXT_PROMPT}. This is a canned answer streamed one word at a time by a decoupled Python model.`.split(
  ' ',
).length;

export const STREAM_WORKLOADS: readonly StreamWorkload[] = [
  {
    id: 'repeat32',
    model: 'repeat_int32',
    responses: REPEAT_N,
    label: `\`repeat_int32\`, ${REPEAT_N} responses, DELAY 0`,
    grpcInputs: () => [
      { name: 'IN', shape: [REPEAT_N], data: Int32Array.from({ length: REPEAT_N }, (_, i) => i) },
      { name: 'DELAY', shape: [REPEAT_N], data: new Uint32Array(REPEAT_N) },
      { name: 'WAIT', shape: [1], data: new Uint32Array(1) },
    ],
    sseBody: () =>
      JSON.stringify({
        IN: Array.from({ length: REPEAT_N }, (_, i) => i),
        DELAY: new Array<number>(REPEAT_N).fill(0),
        WAIT: [0],
      }),
  },
  {
    id: 'text10',
    model: 'text_generator',
    responses: TEXT_WORDS,
    label: `\`text_generator\`, ${TEXT_WORDS} words, delay_ms ${TEXT_DELAY_MS}`,
    grpcInputs: () => [
      { name: 'text_input', shape: [1], data: [TEXT_PROMPT], datatype: 'BYTES' },
      { name: 'delay_ms', shape: [1], data: Int32Array.of(TEXT_DELAY_MS) },
    ],
    sseBody: () => JSON.stringify({ text_input: TEXT_PROMPT, delay_ms: TEXT_DELAY_MS }),
  },
];

export const TEXT_DELAY = TEXT_DELAY_MS;

export function streamWorkload(id: string): StreamWorkload {
  const w = STREAM_WORKLOADS.find((x) => x.id === id);
  if (!w) throw new Error(`unknown workload '${id}' (${STREAM_WORKLOADS.map((x) => x.id).join(', ')})`);
  return w;
}

/** What the load generator prints (one JSON line). */
export interface StreamResult {
  proto: StreamProto;
  workload: string;
  concurrency: number;
  /** Length of the measured window, s (after the warm-up). */
  windowS: number;
  /** Requests started in the window and completed. */
  requests: number;
  /** Responses with data that arrived in the window. */
  responses: number;
  responsesPerS: number;
  requestsPerS: number;
  /** Time to first response (send → first data response), ms, requests started in the window. */
  ttfr: Dist;
  /** Time between consecutive data responses of one request, ms. */
  gap: Dist;
  /** Send → last data response, ms. */
  total: Dist;
  /** Requests that failed (error, or not exactly `responses` data responses); the first reason. */
  failed: number;
  firstError?: string;
  /** The load generator's own CPU, s (process.cpuUsage). */
  cpuS: number;
}

export interface Dist {
  n: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentiles of `xs` (sorted in place). */
export function dist(xs: number[]): Dist {
  const n = xs.length;
  if (n === 0) return { n, mean: NaN, p50: NaN, p90: NaN, p99: NaN, max: NaN };
  xs.sort((a, b) => a - b);
  const at = (q: number) => xs[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!;
  let sum = 0;
  for (const x of xs) sum += x;
  return { n, mean: sum / n, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: xs[n - 1]! };
}
