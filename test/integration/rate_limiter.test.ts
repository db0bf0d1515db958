// --rate-limit through the repository, the model load and the schedulers (in-process core, the
// test backend's timed executions): two models whose instance groups share a global resource of
// count 1 never execute at the same time, a load the command-line counts could never schedule
// fails with Triton's text, and without --rate-limit the same models overlap. Then the built
// server: bad flags stop it with tritonserver's texts; an ONNX model whose group needs more than
// --rate-limit-resource gives is UNAVAILABLE with Triton's reason while the other serves.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import type { InferRequest } from '../../src/kernel/types.js';
import { parseRateLimitResource, RateLimiter } from '../../src/scheduler/rate_limiter.js';
import { get, postJson } from '../helpers/http.js';
import { runServerToExit, startServer } from '../helpers/server.js';
import { i32 } from '../helpers/tensors.js';
import { spans } from '../helpers/test_backend.js';
import { identityTestModel, startTestCore, type TestCore } from '../helpers/test_core.js';

let tc: TestCore | undefined;
afterEach(async () => {
  await tc?.close();
  tc = undefined;
});

const group = (resources: string, priority = 0) =>
  `instance_group [ { kind: KIND_CPU count: 1 rate_limiter { resources [ ${resources} ] priority: ${priority} } } ]`;
const shared = (name: string, count = 1) =>
  identityTestModel(name, 'INT32', [1], 0, { delayMs: 20, extraConfig: group(`{ name: "R" global: true count: ${count} }`) });

const req = (model: string, v: number): InferRequest => ({
  modelName: model,
  modelVersion: '',
  id: '',
  parameters: {},
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: i32([v]) }],
});

/** Pairs of executions of different models that were under way at the same time. */
function overlaps(models: string[]): number {
  const mine = spans.filter((s) => models.some((m) => s.instance.startsWith(`${m}_`)));
  let n = 0;
  for (const a of mine) for (const b of mine) if (a !== b && a.instance < b.instance && a.start < b.end && b.start < a.end) n++;
  return n;
}

async function burst(models: string[], each: number): Promise<void> {
  spans.length = 0;
  await Promise.all(models.flatMap((m) => Array.from({ length: each }, (_, v) => tc!.core.infer(req(m, v)))));
}

describe('--rate-limit=execution_count', () => {
  it('two models sharing a resource count of 1 never execute at the same time, and each ran its share', async () => {
    tc = await startTestCore([shared('rl_a'), shared('rl_b')], { rateLimiter: new RateLimiter('execution_count') });
    await burst(['rl_a', 'rl_b'], 6);
    expect(spans).toHaveLength(12);
    expect(overlaps(['rl_a', 'rl_b'])).toBe(0);
    const stats = (m: string) => tc!.core.statistics(m, '1')[0]!;
    expect(stats('rl_a').execution_count).toBe(6);
    expect(stats('rl_b').execution_count).toBe(6);
  });

  it('without it the same models execute together (so the check above can fail)', async () => {
    tc = await startTestCore([shared('rl_a'), shared('rl_b')]);
    await burst(['rl_a', 'rl_b'], 6);
    expect(overlaps(['rl_a', 'rl_b'])).toBeGreaterThan(0);
  });

  it('a resource count that could never schedule an instance fails its load with Triton text; the others serve', async () => {
    tc = await startTestCore([shared('rl_a', 1), shared('rl_big', 4)], {
      rateLimiter: new RateLimiter('execution_count', [parseRateLimitResource('R:2')]),
    });
    const index = await tc.core.repositoryIndex(false);
    const big = index.find((r) => r.name === 'rl_big')!;
    expect(big.state).toBe('UNAVAILABLE');
    expect(big.reason).toContain(
      'Resource count for "R" is limited to 2 which will prevent scheduling of one or more model instances, the minimum required count is 4',
    );
    expect(index.find((r) => r.name === 'rl_a')!.state).toBe('READY');
    await tc.core.infer(req('rl_a', 1));
  });
});

describe('the command line (the built server, ONNX models)', () => {
  it("stops at start-up on a bad --rate-limit or --rate-limit-resource, with tritonserver's texts", async () => {
    const repo = inject('modelRepository');
    const bad = await runServerToExit(repo, ['--rate-limit=on']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('invalid argument for --rate-limit');
    const res = await runServerToExit(repo, ['--rate-limit=execution_count', '--rate-limit-resource=R1']);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(
      "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got R1",
    );
  });

  it('--rate-limit-resource below what an instance needs: that model is UNAVAILABLE with the reason; the others serve', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-rl-'));
    try {
      const src = path.join(inject('modelRepository'), 'identity_int32');
      for (const [name, count] of [
        ['rl_small', 2],
        ['rl_big', 4],
      ] as const) {
        cpSync(src, path.join(dir, name), { recursive: true });
        const config = readFileSync(path.join(src, 'config.pbtxt'), 'utf8')
          .replace('name: "identity_int32"', `name: "${name}"`)
          .replace('kind: KIND_CPU', `kind: KIND_CPU\n    rate_limiter { resources [ { name: "R" count: ${count} } ] priority: 2 }`);
        writeFileSync(path.join(dir, name, 'config.pbtxt'), config);
      }
      const server = await startServer(dir, [
        '--rate-limit=execution_count',
        '--rate-limit-resource=R:3',
        '--exit-on-error=false',
        '--strict-readiness=false',
      ]);
      try {
        const index = (await postJson(server.url, '/v2/repository/index', {})).json() as {
          name: string;
          state: string;
          reason: string;
        }[];
        const big = index.find((r) => r.name === 'rl_big')!;
        expect(big.state).toBe('UNAVAILABLE');
        expect(big.reason).toContain(
          'Resource count for "R" is limited to 3 which will prevent scheduling of one or more model instances, the minimum required count is 4',
        );
        expect(index.find((r) => r.name === 'rl_small')!.state).toBe('READY');
        // Its config reports the group's rate_limiter as written.
        const config = (await get(server.url, '/v2/models/rl_small/config')).json() as { instance_group: { rate_limiter: unknown }[] };
        expect(config.instance_group[0]!.rate_limiter).toEqual({ resources: [{ name: 'R', global: false, count: 2 }], priority: 2 });
      } finally {
        await server.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
