// repository/instance_limit.ts: the bound on the instances one load starts (issue 25).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../src/config/types.js';
import { parseArgs } from '../../src/options.js';
import { checkInstanceLimits, declaredInstances, defaultInstanceLimits } from '../../src/repository/instance_limit.js';
import { expectServalError } from '../helpers/errors.js';

const withGroups = (...groups: NonNullable<ModelConfig['instance_group']>): ModelConfig => ({ name: 'm', instance_group: groups });

describe('declaredInstances', () => {
  it('sums each group’s count (default 1) on each GPU it lists; no group is one instance', () => {
    expect(declaredInstances({ name: 'm' })).toBe(1);
    expect(declaredInstances(withGroups({ count: 3, kind: 'KIND_CPU' }, { kind: 'KIND_CPU' }))).toBe(4);
    expect(declaredInstances(withGroups({ count: 2, kind: 'KIND_GPU', gpus: [0, 1, 2] }))).toBe(6);
    expect(declaredInstances(withGroups({ count: 0 }))).toBe(0);
  });

  it('leaves an invalid count to the placement, which reports it in Triton’s words', () => {
    expect(declaredInstances(withGroups({ count: -1 }))).toBe(0);
  });
});

describe('checkInstanceLimits', () => {
  const limits = { model: 16, server: 100 };

  it('refuses a model over its bound, naming the model, its count and the flag', () => {
    const e = expectServalError(() => checkInstanceLimits('big', withGroups({ count: 1000 }), 1, 0, limits), 'INVALID_ARG');
    expect(e.message).toBe(
      "model 'big' asks for 1000 instances (instance_group count 1000), more than the 16 that --model-instance-limit allows for one model; lower the count or raise the flag",
    );
  });

  it('counts every version the load serves', () => {
    expect(() => checkInstanceLimits('m', withGroups({ count: 8 }), 2, 0, limits)).not.toThrow();
    const e = expectServalError(() => checkInstanceLimits('m', withGroups({ count: 8 }), 3, 0, limits));
    expect(e.message).toContain("model 'm' asks for 24 instances (8 instances in each of 3 versions)");
  });

  it('refuses a load that would bring the server over its bound, counting the other models’ instances', () => {
    expect(() => checkInstanceLimits('m', withGroups({ count: 10 }), 1, 90, limits)).not.toThrow();
    const e = expectServalError(() => checkInstanceLimits('m', withGroups({ count: 10 }), 1, 91, limits));
    expect(e.message).toBe(
      "model 'm' asks for 10 instances (instance_group count 10), which with the 91 instances of the other loaded models is more than the 100 that --server-instance-limit allows for the server; unload models or raise the flag",
    );
  });

  it('0 is no limit', () => {
    expect(() => checkInstanceLimits('m', withGroups({ count: 100_000 }), 2, 1_000_000, { model: 0, server: 0 })).not.toThrow();
  });

  it('defaults: 4 per core but at least 16 for a model, 1024 for the server', () => {
    expect(defaultInstanceLimits(2)).toEqual({ model: 16, server: 1024 });
    expect(defaultInstanceLimits(32)).toEqual({ model: 128, server: 1024 });
  });
});

describe('the flags', () => {
  it('come from the command line or the YAML settings file (the command line wins); unset means the default', () => {
    expect(parseArgs(['--model-instance-limit', '4', '--server-instance-limit=0'])).toMatchObject({
      modelInstanceLimit: 4,
      serverInstanceLimit: 0,
    });
    const unset = parseArgs([]);
    expect(unset.modelInstanceLimit).toBeUndefined();
    expect(unset.serverInstanceLimit).toBeUndefined();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'serval-limits-'));
    try {
      const file = path.join(dir, 'serval.yaml');
      writeFileSync(file, 'model-instance-limit: 32\nserver-instance-limit: 200\n');
      expect(parseArgs(['--config-file', file])).toMatchObject({ modelInstanceLimit: 32, serverInstanceLimit: 200 });
      expect(parseArgs(['--config-file', file, '--model-instance-limit', '8'])).toMatchObject({
        modelInstanceLimit: 8,
        serverInstanceLimit: 200,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(() => parseArgs(['--model-instance-limit', '-1'])).toThrow('Bad option: "--model-instance-limit". Invalid option value. Got -1');
  });
});
