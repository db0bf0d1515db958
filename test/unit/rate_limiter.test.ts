// src/scheduler/rate_limiter.ts: Triton's rate limiter. Resource counts (the largest an instance
// needs, or the command line's), per device vs global, the load-time refusals with Triton's texts,
// and through real Schedulers: instances sharing a resource never execute together, and priority
// weights how often each one runs.
import { describe, expect, it } from 'vitest';
import type { ExecResult, Execution as InstanceExecution } from '../../src/backends/backend.js';
import { UNBOUNDED } from '../../src/config/resolve.js';
import type { BatchingPolicy, InstancePlacement } from '../../src/config/resolved.js';
import {
  type InstanceRateLimit,
  instanceRateLimits,
  parseRateLimitResource,
  RateLimiter,
  rateLimiterFromOptions,
} from '../../src/scheduler/rate_limiter.js';
import { Scheduler, type SchedulerRequest } from '../../src/scheduler/scheduler.js';
import { SequenceBatcher } from '../../src/scheduler/sequence_batcher.js';
import { ModelStats } from '../../src/stats/model_stats.js';
import { type Batch, FakeInstanceBase } from '../helpers/instances.js';
import { resolveForTest } from '../helpers/resolve.js';
import { fromI32, i32 } from '../helpers/tensors.js';

const need = (resources: [string, number, boolean?][], priority = 0, device = 0): InstanceRateLimit => ({
  resources: resources.map(([name, count, global]) => ({ name, count, global: global ?? false })),
  priority,
  device,
});

/** Grants in the order they happen; each grant is held until the test releases it. */
function grants(limiter: RateLimiter, limits: InstanceRateLimit[]) {
  const order: number[] = [];
  const insts = limiter.register(limits);
  const stage = (i: number) => insts[i]!.request(() => order.push(i));
  return { insts, order, stage };
}

describe('resource counts', () => {
  it('defaults each resource to the largest count an instance needs (Triton docs example, R4 = 5)', () => {
    const limiter = new RateLimiter('execution_count');
    const { insts, order, stage } = grants(limiter, [
      need([
        ['R1', 4],
        ['R2', 4],
      ]),
      need([
        ['R2', 5],
        ['R3', 10],
        ['R4', 5],
      ]),
      need([
        ['R1', 1],
        ['R3', 7],
        ['R4', 2],
      ]),
    ]);
    // A (R1 4, R2 4) runs; B needs R2 5 of 5 and waits; C (R1 1 of 4 left? no: A holds all 4 of R1) waits.
    stage(0);
    stage(1);
    stage(2);
    expect(order).toEqual([0]);
    insts[0]!.release(true);
    // B and C fit together (R3 10 + 7 > 10 does not): B first (staged earlier), then C waits for R3.
    expect(order).toEqual([0, 1]);
    insts[1]!.release(true);
    expect(order).toEqual([0, 1, 2]);
  });

  it('per-device resources are counted on each device; global ones once', () => {
    const limiter = new RateLimiter('execution_count');
    const { order, stage } = grants(limiter, [
      need([['R', 1]], 0, 0),
      need([['R', 1]], 0, 1),
      need([['G', 1, true]], 0, 0),
      need([['G', 1, true]], 0, 1),
    ]);
    for (const i of [0, 1, 2, 3]) stage(i);
    // R on device 0 and on device 1 are different copies; G is one copy for the whole server.
    expect(order).toEqual([0, 1, 2]);
  });

  it('counts CPU instances on device 0, as Triton does (--rate-limit-resource R:C:0 applies to them)', () => {
    const placements: InstancePlacement[] = [
      { name: 'g_0', kind: 'KIND_CPU', deviceId: -1 },
      { name: 'g_big_0', kind: 'KIND_CPU', deviceId: -1 },
      { name: 'g_0_gpu1', kind: 'KIND_GPU', deviceId: 1 },
    ];
    const limits = instanceRateLimits(
      [
        { name: 'g', rate_limiter: { resources: [{ name: 'R', count: 2 }], priority: 3 } },
        { name: 'g_big', rate_limiter: { resources: [{ name: 'R', count: 5, global: true }] } },
      ],
      placements,
    );
    expect(limits).toEqual([
      { resources: [{ name: 'R', count: 2, global: false }], priority: 3, device: 0 },
      { resources: [{ name: 'R', count: 5, global: true }], priority: 0, device: 0 },
      { resources: [{ name: 'R', count: 2, global: false }], priority: 3, device: 1 },
    ]);
  });

  it('refuses a load the command-line counts could never schedule, with Triton text, and keeps the old counts', () => {
    const limiter = new RateLimiter('execution_count', [parseRateLimitResource('resource1:3'), parseRateLimitResource('resource2:2')]);
    limiter.register([need([['resource1', 2]])]);
    expect(() => limiter.register([need([['resource1', 4]])])).toThrow(
      'Resource count for "resource1" is limited to 3 which will prevent scheduling of one or more model instances, the minimum required count is 4',
    );
    // A count given only for another device leaves 0 on this one (Triton's qa case 3).
    const other = new RateLimiter('execution_count', [parseRateLimitResource('resource1:10:10')]);
    expect(() => other.register([need([['resource1', 4]], 0, 0)])).toThrow('Resource count for "resource1" is limited to 0');
    // A device's own count and the every-device count: the larger wins.
    const both = new RateLimiter('execution_count', [parseRateLimitResource('R:2'), parseRateLimitResource('R:6:0')]);
    expect(() => both.register([need([['R', 6]], 0, 0)])).not.toThrow();
    expect(() => both.register([need([['R', 3]], 0, 1)])).toThrow('Resource count for "R" is limited to 2');
  });

  it('refuses a resource that is global in one instance and per-device in another, with Triton text', () => {
    const limiter = new RateLimiter('execution_count');
    limiter.register([need([['resource2', 2, true]])]);
    expect(() => limiter.register([need([['resource2', 2]])])).toThrow(
      'Resource "resource2" is present as both global and device-specific resource in the model configuration.',
    );
  });

  it('an unloaded instance no longer counts, and stops waiting', () => {
    const limiter = new RateLimiter('execution_count');
    const a = limiter.register([need([['R', 4]])]);
    const b = limiter.register([need([['R', 1]])]);
    const got: string[] = [];
    b[0]!.request(() => got.push('b'));
    b[0]!.release(true);
    limiter.unregister(a);
    // R is now 1 (only b needs it): two b-sized grants cannot overlap.
    const c = limiter.register([need([['R', 1]])]);
    b[0]!.request(() => got.push('b'));
    c[0]!.request(() => got.push('c'));
    expect(got).toEqual(['b', 'b']);
    b[0]!.release(true);
    expect(got).toEqual(['b', 'b', 'c']);
  });
});

describe('command line', () => {
  it("parses tritonserver's --rate-limit-resource forms and refuses others with its text", () => {
    expect(parseRateLimitResource('R1:10')).toEqual({ name: 'R1', count: 10 });
    expect(parseRateLimitResource('R2:5:1')).toEqual({ name: 'R2', count: 5, device: 1 });
    expect(() => parseRateLimitResource('R1')).toThrow(
      "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got R1",
    );
    expect(() => parseRateLimitResource('a:1:2:3')).toThrow('Got a:1:2:3');
    expect(() => parseRateLimitResource('R:x')).toThrow('Invalid option value. Got x');
    expect(() => parseRateLimitResource('R:99999999999')).toThrow('Provided option value is out of bound. Got 99999999999');
  });

  it('--rate-limit takes off or execution_count (any case), else tritonserver text', () => {
    expect(rateLimiterFromOptions('off', []).enabled).toBe(false);
    expect(rateLimiterFromOptions('EXECUTION_COUNT', ['R:1']).enabled).toBe(true);
    expect(() => rateLimiterFromOptions('on', [])).toThrow('invalid argument for --rate-limit');
  });
});

// ---------------------------------------------------------------------------------------------
// Through Schedulers: fake instances that hold each execution until the test lets it finish.

class Held extends FakeInstanceBase {
  readonly placement: InstancePlacement;
  readonly capacity = 2;
  constructor(
    name: string,
    private readonly log: string[],
  ) {
    super();
    this.placement = { name, kind: 'KIND_CPU', deviceId: -1 };
  }
  protected run(b: Batch): InstanceExecution {
    this.log.push(this.placement.name);
    return { result: this.finish(b), held: false, withdraw: () => false };
  }
  private async finish(b: Batch): Promise<ExecResult> {
    await this.hold();
    const s = b.inputs[0]!;
    const data = i32(fromI32(b.data.subarray(s.offset, s.offset + s.byteLength)));
    const outputs = b.outputs.map((name) => ({ name, datatype: 'INT32' as const, dims: s.dims, data }));
    return { outputs, computeInputNs: 1, computeInferNs: 1, computeOutputNs: 1 };
  }
}

const POLICY: BatchingPolicy = {
  maxBatchSize: 0,
  dynamic: false,
  preferredBatchSizes: [],
  maxQueueDelayNs: 0,
  preserveOrdering: false,
  queue: { levels: 1, defaultLevel: 1, policies: [UNBOUNDED] },
};

const request = (v: number): SchedulerRequest => ({
  batchSize: 0,
  inputs: [{ name: 'X', datatype: 'INT32', shape: [1], data: i32([v]) }],
  outputs: ['Y'],
  requestStartNs: process.hrtime.bigint(),
});

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

function model(limiter: RateLimiter | undefined, name: string, log: string[], limit: InstanceRateLimit) {
  const inst = new Held(name, log);
  const limited = limiter?.register([limit]);
  return { inst, sched: new Scheduler([inst], POLICY, new ModelStats(), limited) };
}

describe('scheduling through the limiter', () => {
  it('two models sharing a resource count of 1 never execute at the same time', async () => {
    const limiter = new RateLimiter('execution_count');
    const log: string[] = [];
    const a = model(limiter, 'a', log, need([['R', 1, true]]));
    const b = model(limiter, 'b', log, need([['R', 1, true]]));
    const done = [1, 2, 3].flatMap((v) => [a.sched.enqueue(request(v)), b.sched.enqueue(request(v))]);
    for (let n = 0; n < 6; n++) {
      await tick();
      // Exactly one execution is under way across both models.
      expect(a.inst.held + b.inst.held).toBe(1);
      (a.inst.held ? a.inst : b.inst).release();
    }
    const outs = await Promise.all(done);
    expect(outs.map((o) => fromI32(o[0]!.data)[0])).toEqual([1, 1, 2, 2, 3, 3]);
    // They took turns: neither model waited for the other's whole queue.
    expect(log).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
  });

  it('without --rate-limit the same models run together (the check above can fail)', async () => {
    const log: string[] = [];
    const a = model(undefined, 'a', log, need([['R', 1, true]]));
    const b = model(undefined, 'b', log, need([['R', 1, true]]));
    const done = [a.sched.enqueue(request(1)), b.sched.enqueue(request(2))];
    await tick();
    expect(a.inst.held + b.inst.held).toBe(2);
    a.inst.release();
    b.inst.release();
    await Promise.all(done);
  });

  it('priority weights the turns: priority 2 runs half as often as priority 1', async () => {
    const limiter = new RateLimiter('execution_count');
    const log: string[] = [];
    const a = model(limiter, 'a', log, need([['R', 1, true]], 1));
    const b = model(limiter, 'b', log, need([['R', 1, true]], 2));
    const done: Promise<unknown>[] = [];
    for (let v = 0; v < 40; v++) done.push(a.sched.enqueue(request(v)), b.sched.enqueue(request(v)));
    for (let n = 0; n < 30; n++) {
      await tick();
      expect(a.inst.held + b.inst.held).toBe(1);
      (a.inst.held ? a.inst : b.inst).release();
    }
    const count = (m: string) => log.slice(0, 30).filter((x) => x === m).length;
    expect(Math.abs(count('a') - 20)).toBeLessThanOrEqual(1);
    expect(Math.abs(count('b') - 10)).toBeLessThanOrEqual(1);
    for (let n = 30; n < 80; n++) {
      await tick();
      (a.inst.held ? a.inst : b.inst).release();
    }
    await Promise.all(done);
  });

  it('instances that need no shared resource still run together when rate limiting is on', async () => {
    const limiter = new RateLimiter('execution_count');
    const log: string[] = [];
    const a = model(limiter, 'a', log, need([['R', 1]], 0, 0));
    const b = model(limiter, 'b', log, need([['R', 1]], 0, 1));
    const done = [a.sched.enqueue(request(1)), b.sched.enqueue(request(2))];
    await tick();
    expect(a.inst.held + b.inst.held).toBe(2);
    a.inst.release();
    b.inst.release();
    await Promise.all(done);
  });
});

describe('sequence models through the limiter', () => {
  /** A direct-strategy sequence model (START control) with one instance, on `limiter`. */
  function sequenceModel(limiter: RateLimiter, name: string, log: string[]) {
    const config = resolveForTest(
      {
        name,
        max_batch_size: 1,
        input: [{ name: 'INPUT', data_type: 'TYPE_INT32', dims: [1] }],
        output: [{ name: 'OUTPUT', data_type: 'TYPE_INT32', dims: [1] }],
        sequence_batching: {
          direct: {},
          control_input: [{ name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', int32_false_true: [0, 1] }] }],
        },
      },
      {
        folderName: name,
        signature: {
          inputs: ['INPUT', 'START'].map((n) => ({ name: n, datatype: 'INT32' as const, rawType: 'int32', dims: [-1, 1] })),
          outputs: [{ name: 'OUTPUT', datatype: 'INT32', rawType: 'int32', dims: [-1, 1] }],
        },
      },
    );
    const inst = new Held(name, log);
    const limited = limiter.register([need([['R', 1, true]])]);
    const batcher = new SequenceBatcher([inst], { name, maxBatchSize: 1, policy: config.sequence!, limited }, new ModelStats());
    const send = (v: number, start: boolean) =>
      batcher.enqueue({
        batchSize: 1,
        inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: i32([v]) }],
        outputs: ['OUTPUT'],
        requestStartNs: process.hrtime.bigint(),
        sequence: { id: 1n, start, end: false },
      });
    return { inst, send };
  }

  it('a sequence model and a plain one sharing a resource of 1 take turns, never together', async () => {
    const limiter = new RateLimiter('execution_count');
    const log: string[] = [];
    const s = sequenceModel(limiter, 'seq', log);
    const p = model(limiter, 'plain', log, need([['R', 1, true]]));
    const done = [s.send(1, true), p.sched.enqueue(request(1)), s.send(2, false), p.sched.enqueue(request(2))];
    for (let n = 0; n < 4; n++) {
      await tick();
      expect(s.inst.held + p.inst.held).toBe(1);
      (s.inst.held ? s.inst : p.inst).release();
    }
    const outs = await Promise.all(done);
    expect(outs.map((o) => fromI32(o[0]!.data)[0])).toEqual([1, 1, 2, 2]);
    expect(log).toEqual(['seq', 'plain', 'seq', 'plain']);
  });
});
