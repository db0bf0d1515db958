// Files a model config names stay inside the model's folder: by name (no "..", no absolute paths)
// and after symlinks; error texts name the field and the value as written, never a server path.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { confinedPath, confinedPathSync, displayPath, scrubPaths } from '../../src/kernel/confine.js';
import { readLabels } from '../../src/model/model_version.js';
import { expectServalErrorAsync } from '../helpers/errors.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'serval-confine-'));
const modelDir = path.join(tmp, 'repo', 'm');
const outside = path.join(tmp, 'secret.txt');
mkdirSync(path.join(modelDir, '1'), { recursive: true });
mkdirSync(path.join(modelDir, 'warmup'), { recursive: true });
writeFileSync(path.join(modelDir, '1', 'model.onnx'), 'x');
writeFileSync(path.join(modelDir, 'labels.txt'), 'a\nb\n');
writeFileSync(outside, 'top secret\n');
symlinkSync(outside, path.join(modelDir, 'escape.txt'));
symlinkSync(path.join(tmp), path.join(modelDir, 'up'));
symlinkSync(path.join(modelDir, 'labels.txt'), path.join(modelDir, 'warmup', 'inner_link'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const name = (value: string, field = 'default_model_filename') => ({ model: 'm', field, value });

describe('confinedPath', () => {
  it('accepts names inside the folder, including symlinks that stay inside', async () => {
    expect(await confinedPath(modelDir, '1', name('model.onnx'))).toBe(path.join(modelDir, '1', 'model.onnx'));
    expect(await confinedPath(modelDir, '', name('labels.txt'))).toBe(path.join(modelDir, 'labels.txt'));
    expect(await confinedPath(modelDir, 'warmup', name('inner_link'))).toBe(path.join(modelDir, 'warmup', 'inner_link'));
    // A missing file passes: the caller's read reports it.
    expect(await confinedPath(modelDir, '1', name('missing.onnx'))).toBe(path.join(modelDir, '1', 'missing.onnx'));
    expect(confinedPathSync(modelDir, '', name('labels.txt'))).toBe(path.join(modelDir, 'labels.txt'));
  });

  it('refuses ".." escapes and absolute paths, naming the field and the value as written', async () => {
    for (const value of ['../../../../etc/passwd', '/etc/passwd', '..', '', 'a/../../x', 'nul\0byte']) {
      const e = await expectServalErrorAsync(confinedPath(modelDir, '1', name(value)), 'INVALID_ARG');
      expect(e.message).toBe(`model 'm': default_model_filename '${value}' must name a file inside the model's '1' folder`);
      expect(e.message).not.toContain(tmp);
    }
    const e = await expectServalErrorAsync(confinedPath(modelDir, '', name('../m2/labels', 'label_filename')), 'INVALID_ARG');
    expect(e.message).toBe("model 'm': label_filename '../m2/labels' must name a file inside the model's folder");
  });

  it('refuses a symlink (to a file or through a folder) that leads outside the model folder', async () => {
    for (const value of ['escape.txt', 'up/secret.txt']) {
      const e = await expectServalErrorAsync(confinedPath(modelDir, '', name(value, 'label_filename')), 'INVALID_ARG');
      expect(e.message).toBe(`model 'm': label_filename '${value}' must name a file inside the model's folder`);
      expect(() => confinedPathSync(modelDir, '', name(value, 'label_filename'))).toThrow('must name a file inside');
    }
  });

  it('a label file that escapes fails the load with the output named, and nothing is read', async () => {
    const cfg = { name: 'm', output: [{ name: 'OUT', label_filename: 'escape.txt' }] };
    const e = await expectServalErrorAsync(readLabels(cfg, 'm', modelDir), 'INVALID_ARG');
    expect(e.message).toBe("model 'm': label_filename of output 'OUT' 'escape.txt' must name a file inside the model's folder");
    const ok = await readLabels({ name: 'm', output: [{ name: 'OUT', label_filename: 'labels.txt' }] }, 'm', modelDir);
    expect(ok.get('labels.txt')).toEqual(['a', 'b']);
  });
});

describe('displayPath', () => {
  it('is repository-relative inside the model folder and a base name elsewhere', () => {
    expect(displayPath(modelDir, path.join(modelDir, '1', 'model.onnx'))).toBe('m/1/model.onnx');
    expect(displayPath(modelDir, outside)).toBe('secret.txt');
  });
});

describe('scrubPaths', () => {
  it("replaces the model folder's absolute path in a backend's message with the model's name", () => {
    const msg = `Load model from ${path.join(modelDir, '1', 'model.onnx')} failed; see ${modelDir}`;
    expect(scrubPaths(msg, modelDir)).toBe('Load model from m/1/model.onnx failed; see m');
  });
});
