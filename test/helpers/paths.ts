import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = path.join(ROOT, 'dist', 'src', 'cli.js');
export const WORKER = path.join(ROOT, 'dist', 'src', 'backends', 'onnxruntime', 'worker.js');
export const PROTO_DIR = path.join(ROOT, 'proto');
