// The layering of src/ (docs/architecture.md): folders depend one way, no file imports itself
// through a cycle, and ONNX Runtime stays inside its backend folder.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '..', '..', 'src');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return files(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

/** Every import/export-from specifier of a file (type-only ones too: they are dependencies of the design). */
function specifiers(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'([^']+)'/g), ...text.matchAll(/import\(\s*'([^']+)'\s*\)/g)].map(
    (m) => m[1]!,
  );
}

const all = files(SRC);
const graph = new Map<string, string[]>(
  all.map((f) => [
    f,
    specifiers(f)
      .filter((s) => s.startsWith('.'))
      .map((s) => path.resolve(path.dirname(f), s).replace(/\.js$/, '.ts')),
  ]),
);

/** The layer of a file: its first folder under src/ (backends/<name> counts as its own). */
function layer(file: string): string {
  const parts = path.relative(SRC, file).split(path.sep);
  if (parts.length === 1) return '(root)';
  if (parts[0] === 'backends' && parts.length > 2) return `backends/${parts[1]}`;
  return parts[0]!;
}

function findCycle(nodes: Iterable<string>, edges: (n: string) => Iterable<string>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (n: string): string[] | undefined => {
    if (state.get(n) === 'done') return undefined;
    if (state.get(n) === 'open') return [...stack.slice(stack.indexOf(n)), n];
    state.set(n, 'open');
    stack.push(n);
    for (const m of edges(n)) {
      const c = visit(m);
      if (c) return c;
    }
    stack.pop();
    state.set(n, 'done');
    return undefined;
  };
  for (const n of nodes) {
    const c = visit(n);
    if (c) return c;
  }
  return undefined;
}

describe('src/ layering', () => {
  it('every relative import resolves to a file in src/', () => {
    for (const [f, deps] of graph) for (const d of deps) expect(all, `${path.relative(SRC, f)} imports ${d}`).toContain(d);
  });

  it('has no file-level import cycle', () => {
    const cycle = findCycle(graph.keys(), (n) => graph.get(n) ?? []);
    expect(cycle?.map((f) => path.relative(SRC, f))).toBeUndefined();
  });

  it('has no folder-level cycle', () => {
    const layers = new Map<string, Set<string>>();
    for (const [f, deps] of graph) {
      const from = layer(f);
      const set = layers.get(from) ?? new Set<string>();
      for (const d of deps) if (layer(d) !== from) set.add(layer(d));
      layers.set(from, set);
    }
    const cycle = findCycle(layers.keys(), (n) => layers.get(n) ?? []);
    expect(cycle).toBeUndefined();
  });

  it('the kernel depends on nothing else in src/, and front-ends reach the core only through its API', () => {
    for (const [f, deps] of graph) {
      const l = layer(f);
      for (const d of deps) {
        if (l === 'kernel') expect(layer(d), path.relative(SRC, f)).toBe('kernel');
        if (l === 'frontends') {
          expect(
            ['core', 'repository', 'model', 'scheduler', 'backends'].includes(layer(d)) && !d.endsWith(path.join('core', 'api.ts')),
            `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`,
          ).toBe(false);
        }
      }
    }
  });

  it('the trace layer (trace extension state) depends on the kernel only, and only the core and the composition root use it', () => {
    for (const [f, deps] of graph) {
      const l = layer(f);
      for (const d of deps) {
        if (l === 'trace') expect(['trace', 'kernel'], `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`).toContain(layer(d));
        if (layer(d) === 'trace' && l !== 'trace') {
          // Front-ends see its types only through core/api.ts; the scheduler only kernel/trace.ts.
          expect(['core', '(root)'], `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`).toContain(l);
        }
      }
    }
  });

  it('nothing outside src/backends/onnxruntime/ imports onnxruntime-node', () => {
    const ortDir = path.join(SRC, 'backends', 'onnxruntime') + path.sep;
    const importers = all.filter((f) => specifiers(f).some((s) => s === 'onnxruntime-node' || s.startsWith('onnxruntime-node/')));
    expect(importers.length).toBeGreaterThan(0);
    expect(importers.filter((f) => !f.startsWith(ortDir)).map((f) => path.relative(SRC, f))).toEqual([]);
    // Nor does anything outside it name the package some other way (require.resolve, dynamic import).
    const mentions = all.filter((f) => !f.startsWith(ortDir) && /['"]onnxruntime-node/.test(readFileSync(f, 'utf8')));
    expect(mentions.map((f) => path.relative(SRC, f))).toEqual([]);
  });

  it('the Python backend stays in src/backends/python/: only the composition root imports it, and it imports backends, config and kernel', () => {
    const pyDir = path.join(SRC, 'backends', 'python') + path.sep;
    for (const [f, deps] of graph) {
      const inside = f.startsWith(pyDir);
      for (const d of deps) {
        if (!inside && d.startsWith(pyDir)) expect(layer(f), `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`).toBe('(root)');
        if (inside)
          expect(
            ['backends/python', 'backends', 'config', 'kernel'],
            `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`,
          ).toContain(layer(d));
      }
    }
    // Nor does anything else start the stub or name the module models import.
    const mentions = all.filter(
      (f) => !f.startsWith(pyDir) && /serval_python_stub|triton_python_backend_utils/.test(readFileSync(f, 'utf8')),
    );
    expect(mentions.map((f) => path.relative(SRC, f))).toEqual([]);
  });

  it('the response cache (cache/) depends on the kernel only; the model version, the repository (its type) and the composition root use it', () => {
    for (const [f, deps] of graph) {
      const l = layer(f);
      for (const d of deps) {
        if (l === 'cache') expect(['cache', 'kernel'], `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`).toContain(layer(d));
        if (layer(d) === 'cache' && l !== 'cache') {
          expect(['model', 'repository', '(root)'], `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`).toContain(l);
        }
      }
    }
  });

  it('the client (serval/client) is a package of its own: of src/ it imports only the datatype list, and nothing in src/ imports it', () => {
    const clientDir = path.join(SRC, 'client') + path.sep;
    // kernel/datatypes.ts holds no server state; it and what it imports come with the client.
    const shared = [path.join(SRC, 'kernel', 'datatypes.ts'), path.join(SRC, 'kernel', 'errors.ts')];
    const clientFiles = all.filter((f) => f.startsWith(clientDir));
    expect(clientFiles.length).toBeGreaterThan(0);
    for (const [f, deps] of graph) {
      for (const d of deps) {
        if (f.startsWith(clientDir))
          expect(d.startsWith(clientDir) || shared.includes(d), `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`).toBe(true);
        else expect(d.startsWith(clientDir), `${path.relative(SRC, f)} imports ${path.relative(SRC, d)}`).toBe(false);
      }
    }
  });
});
