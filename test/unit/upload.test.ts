// src/repository/upload.ts: a load request's `file:` parameters written into a fresh folder, every
// path confined to it, with Triton's texts; nothing left behind when one is refused.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ServalError } from '../../src/kernel/errors.js';
import { uploadFiles, writeUploadedModel } from '../../src/repository/upload.js';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const files = (entries: Record<string, string>): Map<string, Uint8Array> => new Map(Object.entries(entries).map(([k, v]) => [k, bytes(v)]));

async function refusal(p: Promise<unknown>): Promise<ServalError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ServalError);
    return e as ServalError;
  }
  throw new Error('expected a refusal');
}

describe('model upload', () => {
  it('writes every file under a fresh folder (joined as Triton joins: an absolute name stays inside) and removes it', async () => {
    const up = await writeUploadedModel('m', files({ 'file:1/model.onnx': 'onnx', 'file:/etc/extra.txt': 'x', 'file:2/sub/a.bin': 'a' }));
    expect(readFileSync(path.join(up.dir, '1', 'model.onnx'), 'utf8')).toBe('onnx');
    expect(readFileSync(path.join(up.dir, 'etc', 'extra.txt'), 'utf8')).toBe('x');
    expect(readFileSync(path.join(up.dir, '2', 'sub', 'a.bin'), 'utf8')).toBe('a');
    await up.remove();
    expect(existsSync(up.dir)).toBe(false);
  });

  it("refuses paths out of the folder, the folder itself and a file used as a folder, with Triton's texts, leaving nothing", async () => {
    const poll = "failed to load 'm', failed to poll from model repository: ";
    for (const [name, text] of [
      ['file:../x', /^Invalid file parameter 'file:\.\.\/x' with normalized path '.*' must stay within model directory\.$/],
      ['file:1/../../x', /must stay within model directory\.$/],
      ['file:', /^Invalid file parameter 'file:': it names the model directory/],
    ] as const) {
      const e = await refusal(writeUploadedModel('m', files({ 'file:1/model.onnx': 'ok', [name]: 'x' })));
      expect(e.code).toBe('INTERNAL');
      expect(e.clientFault).toBe(true);
      expect(e.message.startsWith(poll)).toBe(true);
      expect(e.message.slice(poll.length)).toMatch(text);
    }
    const e = await refusal(writeUploadedModel('m', files({ 'file:1/model.onnx': 'ok', 'file:1/model.onnx/x': 'x' })));
    expect(e.message).toBe(`${poll}Invalid file parameter 'file:1/model.onnx/x', directory has been created as a file`);
  });

  it('takes bytes only, and a config with them', () => {
    expect(uploadFiles('m', { config: '{}' })).toBeUndefined();
    expect([...(uploadFiles('m', { config: '{}', 'file:1/a': bytes('a') }) ?? new Map()).keys()]).toEqual(['file:1/a']);
    expect(() => uploadFiles('m', { config: '{}', 'file:1/a': 'text' })).toThrow(
      "failed to load 'm', failed to poll from model repository: File parameter 'file:1/a' must have bytes type for its value",
    );
    expect(() => uploadFiles('m', { 'file:1/a': bytes('a') })).toThrow(
      "failed to load 'm', failed to poll from model repository: Load parameter 'config' must be specified for model file override",
    );
  });
});
