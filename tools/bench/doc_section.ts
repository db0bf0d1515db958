// Each benchmark section owns one marked block of docs/benchmarks.md and rewrites only that
// block, so sections can run alone (`node dist/tools/bench/<section>.js`) or all together from
// `npm run bench` without touching each other's results or the hand-written analysis.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

export const beginMarker = (key: string): string =>
  `<!-- bench:${key}:begin (tools/bench/run.sh rewrites everything up to the end marker) -->`;
export const endMarker = (key: string): string => `<!-- bench:${key}:end -->`;

/**
 * Replaces the block marked `key` in `file` with `body`; a block not there yet is inserted before
 * `## Analysis` (or appended when the file has no such heading).
 */
export function writeSection(file: string, key: string, body: string): void {
  const begin = beginMarker(key);
  const end = endMarker(key);
  const block = `${begin}\n\n${body.trim()}\n\n${end}`;
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const i = text.indexOf(`<!-- bench:${key}:begin`);
  const j = text.indexOf(end);
  if (i >= 0 && j > i) {
    writeFileSync(file, text.slice(0, i) + block + text.slice(j + end.length));
    return;
  }
  const analysis = text.indexOf('\n## Analysis');
  if (analysis >= 0) {
    writeFileSync(file, `${text.slice(0, analysis).replace(/\n*$/, '\n\n')}${block}\n${text.slice(analysis)}`);
    return;
  }
  writeFileSync(file, `${text.replace(/\n*$/, '\n\n')}${block}\n`);
}
