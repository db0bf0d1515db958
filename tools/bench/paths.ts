// Where the benchmark sections find the project, the built server and perf_analyzer.
import path from 'node:path';
import { projectRoot } from '../../src/kernel/paths.js';

export const ROOT = projectRoot();
/** A path as the reports print it: relative to the project. */
export const rel = (p: string): string => path.relative(ROOT, p) || '.';
export const PERF_ANALYZER = process.env.PERF_ANALYZER ?? path.join(ROOT, '.venv', 'bin', 'perf_analyzer');
export const SERVAL_CLI = path.join(ROOT, 'dist', 'src', 'cli.js');
