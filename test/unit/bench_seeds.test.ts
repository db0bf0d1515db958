// The pure logic of the seeds' replays (tools/bench/seeds/logic.ts): image shares, ApacheBench
// parsing, the binary request ab posts, job summaries and the studies' ratios. No speed asserted.
import { describe, expect, it } from 'vitest';
import { parsePerfAnalyzer } from '../../tools/bench/harness.js';
import {
  agreement,
  binaryInferBody,
  cellText,
  formatGain,
  type JobResult,
  median,
  parseAb,
  parseJobOutput,
  peakSum,
  ratio,
  reproduces,
  STUDY1_REPORTED,
  shares,
  study1Ratios,
  summarizeJobs,
} from '../../tools/bench/seeds/logic.js';

const AB_REPORT = `This is ApacheBench, Version 2.3 <$Revision$>
Benchmarking 127.0.0.1 (be patient).....done

Server Software:
Server Hostname:        127.0.0.1
Server Port:            39989

Document Path:          /v2/models/ranker_mlp__db/infer
Document Length:        153 bytes

Concurrency Level:      32
Time taken for tests:   0.393 seconds
Complete requests:      1000
Failed requests:        3
   (Connect: 0, Receive: 0, Length: 3, Exceptions: 0)
Non-2xx responses:      7
Total transferred:      327000 bytes
Requests per second:    2546.12 [#/sec] (mean)
Time per request:       12.568 [ms] (mean)
Time per request:       0.393 [ms] (mean, across all concurrent requests)
Transfer rate:          813.07 [Kbytes/sec] received

Percentage of the requests served within a certain time (ms)
  50%     11
  66%     12
  75%     14
  80%     14
  90%     18
  95%     23
  98%     31
  99%     33
 100%     41 (longest request)
`;

describe('shares', () => {
  it('covers every image once, contiguously, the remainder going to the first jobs', () => {
    const s = shares(10, 4);
    expect(s).toEqual([
      { first: 0, count: 3 },
      { first: 3, count: 3 },
      { first: 6, count: 2 },
      { first: 8, count: 2 },
    ]);
    expect(s.reduce((n, x) => n + x.count, 0)).toBe(10);
  });

  it('gives empty shares when there are more jobs than images, and rejects nonsense', () => {
    expect(shares(2, 3).map((x) => x.count)).toEqual([1, 1, 0]);
    expect(() => shares(5, 0)).toThrow();
    expect(() => shares(-1, 2)).toThrow();
    expect(() => shares(2.5, 2)).toThrow();
  });
});

describe('parseAb', () => {
  it('reads throughput, mean, percentiles and the error counts', () => {
    const r = parseAb(AB_REPORT)!;
    expect(r.complete).toBe(1000);
    expect(r.failed).toBe(3);
    expect(r.non2xx).toBe(7);
    expect(r.requestsPerS).toBeCloseTo(2546.12);
    // The first "Time per request" (per request), not the one across concurrent requests.
    expect(r.meanMs).toBeCloseTo(12.568);
    expect(r.p50Ms).toBe(11);
    expect(r.p99Ms).toBe(33);
    expect(r.longestMs).toBe(41);
  });

  it('counts no non-2xx responses when ab prints no such line', () => {
    const r = parseAb(AB_REPORT.replace(/^Non-2xx responses:.*\n/m, ''))!;
    expect(r.non2xx).toBe(0);
    expect(r.failed).toBe(3);
  });

  it('returns undefined for a run that never completed (e.g. connection refused)', () => {
    expect(parseAb('apr_socket_recv: Connection refused (111)\nTotal of 5 requests completed\n')).toBeUndefined();
  });
});

describe('binaryInferBody', () => {
  it('is a JSON header of exactly headerLength bytes followed by the raw tensor', () => {
    const data = Buffer.alloc(8);
    data.writeFloatLE(1.5, 0);
    data.writeFloatLE(-2, 4);
    const { body, headerLength } = binaryInferBody({ name: 'INPUT', shape: [1, 2], datatype: 'FP32', data }, 'OUTPUT');
    expect(body.length).toBe(headerLength + 8);
    const header = JSON.parse(body.subarray(0, headerLength).toString()) as {
      inputs: { name: string; parameters: { binary_data_size: number } }[];
      outputs: { name: string; parameters: { binary_data: boolean } }[];
    };
    expect(header.inputs[0]!.parameters.binary_data_size).toBe(8);
    expect(header.outputs[0]).toEqual({ name: 'OUTPUT', parameters: { binary_data: true } });
    expect(body.subarray(headerLength).equals(data)).toBe(true);
  });
});

const job = (first: number, top1: number[], sums: number[], over: Partial<JobResult> = {}): JobResult => ({
  first,
  images: top1.length,
  top1,
  sums,
  load_s: 1,
  loop_s: 2,
  cpu_s: 3,
  maxrss_kib: 1000,
  ...over,
});

describe('job results', () => {
  it('parses the JSON line a job prints, ignoring other output', () => {
    const line = JSON.stringify(job(4, [1, 2], [0.5, 0.25]));
    expect(parseJobOutput(`warning: something\n${line}\n`)?.first).toBe(4);
    expect(parseJobOutput('Traceback (most recent call last):\n  boom\n')).toBeUndefined();
    expect(parseJobOutput('{"not": "a result"}\n')).toBeUndefined();
  });

  it('summarises jobs in image order, whatever order they finished in', () => {
    const s = summarizeJobs([job(2, [7, 8], [3, 4], { load_s: 3, cpu_s: 5 }), job(0, [5, 6], [1, 2])], 2);
    expect(s.images).toBe(4);
    expect(s.imagesPerS).toBe(2);
    expect(s.top1).toEqual([5, 6, 7, 8]);
    expect(s.sums).toEqual([1, 2, 3, 4]);
    expect(s.loadS).toBe(2);
    expect(s.jobsCpuS).toBe(8);
  });

  it('counts images whose class and score sum agree within the tolerance', () => {
    const a = { top1: [1, 2, 3, 4], sums: [100, 200, 300, 400] };
    const b = { top1: [1, 2, 9, 4], sums: [100.05, 201, 300, 400] };
    // image 1: sum off by 0.5%; image 2: other class.
    expect(agreement(a, b)).toEqual({ same: 2, of: 4 });
    expect(agreement(a, a)).toEqual({ same: 4, of: 4 });
    expect(agreement(a, { top1: [1], sums: [100] })).toEqual({ same: 1, of: 4 });
  });

  it('takes the peak of RSS summed at the same instant, optionally over some pids', () => {
    const samples = [
      new Map([
        [1, 100],
        [2, 50],
      ]),
      new Map([
        [1, 80],
        [2, 90],
        [3, 10],
      ]),
    ];
    expect(peakSum(samples)).toBe(180);
    expect(peakSum(samples, new Set([1]))).toBe(100);
    expect(peakSum([])).toBe(0);
  });
});

describe('ratios', () => {
  it('computes the centralized study ratios from images/s', () => {
    const r = study1Ratios({ local: 10, servedNoBatching: 8, servedBatching: 10, servedBatchingX2: 12 });
    expect(r.map((x) => x.reported)).toEqual([STUDY1_REPORTED.batching, STUDY1_REPORTED.workers, STUDY1_REPORTED.total]);
    expect(r[0]!.measured).toBeCloseTo(1.25);
    expect(r[1]!.measured).toBeCloseTo(1.2);
    expect(r[2]!.measured).toBeCloseTo(1.2); // batching + 2 instances (12) / local (10)
    // The total is the study's last configuration, not the best one.
    expect(study1Ratios({ local: 10, servedNoBatching: 30, servedBatching: 10, servedBatchingX2: 5 })[2]!.measured).toBeCloseTo(0.5);
  });

  it('is NaN when a variant is missing, never Infinity', () => {
    expect(ratio(5, 0)).toBeNaN();
    expect(ratio(undefined, 3)).toBeNaN();
    expect(study1Ratios({ local: NaN, servedNoBatching: 1, servedBatching: 2, servedBatchingX2: 3 })[2]!.measured).toBeNaN();
    expect(study1Ratios({ local: 10, servedNoBatching: 1, servedBatching: NaN, servedBatchingX2: 3 })[0]!.measured).toBeNaN();
  });

  it('calls a gain reproduced only when it is real and at least half as large', () => {
    expect(reproduces(1.265, 1.2)).toBe(true);
    expect(reproduces(1.265, 1.1)).toBe(false); // under half of +26.5%
    expect(reproduces(1.08, 1.04)).toBe(false); // within noise
    expect(reproduces(3.75, 2.4)).toBe(true);
    expect(reproduces(3.75, 1.8)).toBe(false);
    expect(reproduces(2.5, 0.7)).toBe(false);
    expect(reproduces(2.5, NaN)).toBe(false);
  });

  it('formats gains as the studies did', () => {
    expect(formatGain(1.265)).toBe('+26.5%');
    expect(formatGain(0.711)).toBe('−28.9%');
    expect(formatGain(3.75)).toBe('3.75×');
    expect(formatGain(NaN)).toBe('–');
  });

  it('takes medians over rounds, ignoring failed ones', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, NaN, 2, 3])).toBe(2.5);
    expect(median([])).toBeNaN();
  });

  it('keeps tool errors from breaking a Markdown table', () => {
    const t = cellText('Request concurrency: 1 | Failed to obtain\nstable measurement', 30);
    expect(t).not.toMatch(/[|\n]/);
    expect(t.length).toBeLessThanOrEqual(30);
  });
});

describe("perf_analyzer's server section (the tutorial sequence)", () => {
  it('yields the queue / compute split the tables show', () => {
    const text = `*** Measurement Settings ***
  Batch size: 1
Request concurrency: 8
  Client:
    Request count: 550
    Throughput: 152.1 infer/sec
    p50 latency: 45000 usec
    p90 latency: 80000 usec
    p95 latency: 90000 usec
    p99 latency: 98400 usec
    Avg HTTP time: 47000 usec (send/recv 100 usec + response wait 46900 usec)
  Server:
    Inference count: 550
    Execution count: 278
    Successful request count: 550
    Avg request latency: 47428 usec (overhead 1178 usec + queue 9329 usec + compute input 354 usec + compute infer 36531 usec + compute output 35 usec)
`;
    const r = parsePerfAnalyzer(text)!;
    expect(r.throughput).toBeCloseTo(152.1);
    expect(r.p99Us).toBe(98400);
    expect(r.queueUs).toBe(9329);
    expect(r.computeInferUs).toBe(36531);
    expect(r.serverRequestUs).toBe(47428);
    expect(r.inferenceCount! / r.executionCount!).toBeCloseTo(550 / 278);
  });
});
