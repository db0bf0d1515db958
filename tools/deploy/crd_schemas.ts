// CRD YAML (apiextensions.k8s.io/v1) → the JSON Schema files kubeconform reads for custom
// resources, one per kind and version: <out>/<group>/<kind>_<version>.json. Used by
// tools/deploy/gen-crd-schemas.sh; its output is committed under deploy/schemas/.
//
//   node dist/tools/deploy/crd_schemas.js --out deploy/schemas --relax-kserve CRD.yaml...
//
// --relax-kserve applies what KServe's release does to the InferenceService CRD after
// controller-gen (fields a user may leave out, which the generated schema would require):
// no `required` on the predictor/explainer/transformer framework specs, on their probes'
// httpGet/tcpSocket, on the containers' probes' httpGet, nor on `os`; no ephemeralContainers. The generator checks the result
// against the release's own CRD file when it has one.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';

type Schema = Record<string, unknown> & {
  type?: string | string[];
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: boolean | Schema;
  required?: string[];
};

/** OpenAPI v3 (Kubernetes structural schema) → JSON Schema, strict: unknown fields are errors. */
export function toJsonSchema(s: Schema): Schema {
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === 'properties')
      out.properties = Object.fromEntries(Object.entries(v as Record<string, Schema>).map(([p, ps]) => [p, toJsonSchema(ps)]));
    else if (k === 'items') out.items = toJsonSchema(v as Schema);
    else if (k === 'additionalProperties' && typeof v === 'object') out.additionalProperties = toJsonSchema(v as Schema);
    else if (k === 'allOf' || k === 'anyOf' || k === 'oneOf') out[k] = (v as Schema[]).map(toJsonSchema);
    else if (k.startsWith('x-kubernetes-') || k === 'nullable') continue;
    else out[k] = v;
  }
  // int-or-string: the API server takes either (ports, resource quantities, percentages).
  if (s['x-kubernetes-int-or-string'] === true) {
    delete out.type;
    out.oneOf = [{ type: 'string' }, { type: 'integer' }];
  }
  if (s.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  // Strict, as kubeconform's -strict: an object with declared fields takes no others, unless
  // the schema keeps unknown fields (embedded resources, free-form config).
  if (out.properties && out.additionalProperties === undefined && s['x-kubernetes-preserve-unknown-fields'] !== true) {
    out.additionalProperties = false;
  }
  return out;
}

/** KServe's post-generation edits of the InferenceService CRD (see the header). */
export function relaxKserve(spec: Schema): void {
  for (const component of Object.values(spec.properties ?? {})) {
    delete component.properties?.ephemeralContainers;
    for (const [name, field] of Object.entries(component.properties ?? {})) {
      delete field.required;
      // The framework specs' probes, and the containers' (httpGet only; initContainers keep theirs).
      for (const holder of name === 'containers' ? [field.items] : [field]) {
        for (const probe of ['readinessProbe', 'livenessProbe']) {
          const p = holder?.properties?.[probe]?.properties;
          delete p?.httpGet?.required;
          if (holder === field) delete p?.tcpSocket?.required;
        }
      }
    }
  }
}

interface Crd {
  kind: string;
  spec: {
    group: string;
    names: { kind: string };
    versions: { name: string; schema?: { openAPIV3Schema: Schema } }[];
  };
}

function main(): void {
  const { values, positionals } = parseArgs({
    options: { out: { type: 'string' }, 'relax-kserve': { type: 'boolean', default: false } },
    allowPositionals: true,
  });
  if (!values.out || positionals.length === 0) throw new Error('usage: crd_schemas --out DIR [--relax-kserve] CRD.yaml...');
  for (const file of positionals) {
    for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
      const crd = doc.toJS() as Crd | null;
      if (crd?.kind !== 'CustomResourceDefinition') continue;
      for (const v of crd.spec.versions) {
        const schema = structuredClone(v.schema?.openAPIV3Schema);
        if (!schema) continue;
        if (values['relax-kserve'] && crd.spec.names.kind === 'InferenceService' && schema.properties?.spec)
          relaxKserve(schema.properties.spec);
        const json = toJsonSchema(schema);
        const dir = path.join(values.out, crd.spec.group);
        mkdirSync(dir, { recursive: true });
        const target = path.join(dir, `${crd.spec.names.kind.toLowerCase()}_${v.name}.json`);
        writeFileSync(target, `${JSON.stringify(json)}\n`);
        process.stdout.write(`${target}\n`);
      }
    }
  }
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) main();
