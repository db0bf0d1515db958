// Resolved configs for unit tests: the real resolveConfig over a raw config, with a stand-in
// backend (one CPU instance) and, unless given, a model signature that matches the config.

import { resolveConfig } from '../../src/config/resolve.js';
import type { ResolvedModelConfig } from '../../src/config/resolved.js';
import type { IoSignature, ModelSignature } from '../../src/config/signature.js';
import type { ModelConfig, ModelInput, ModelOutput } from '../../src/config/types.js';
import { fromConfigType } from '../../src/kernel/datatypes.js';

/** The signature a model file matching `config` would have. */
export function signatureOf(config: ModelConfig): ModelSignature {
  const batch = (config.max_batch_size ?? 0) > 0 ? [-1] : [];
  const io = (t: ModelInput | ModelOutput): IoSignature => {
    const datatype = fromConfigType(t.data_type ?? 'TYPE_INVALID');
    return {
      name: t.name ?? '',
      datatype,
      rawType: datatype ?? 'unknown',
      dims: [...batch, ...(t.reshape ? (t.reshape.shape ?? []) : (t.dims ?? []))],
    };
  };
  return { inputs: (config.input ?? []).map(io), outputs: (config.output ?? []).map(io) };
}

export function resolveForTest(
  config: ModelConfig,
  opts: { folderName?: string; signature?: ModelSignature; labels?: Map<string, string[]> } = {},
): ResolvedModelConfig {
  const folderName = opts.folderName ?? config.name ?? 'model';
  return resolveConfig(config, {
    folderName,
    backend: {
      name: 'onnxruntime',
      platforms: ['onnxruntime_onnx'],
      defaultModelFilename: 'model.onnx',
      placeInstances: () => ({
        groups: [{ name: folderName, kind: 'KIND_CPU', count: 1 }],
        placements: [{ name: `${folderName}_0`, kind: 'KIND_CPU', deviceId: -1 }],
        settings: undefined,
      }),
    },
    signature: opts.signature ?? signatureOf(config),
    // Label files not given read as empty.
    labels: new Map([
      ...(config.output ?? []).flatMap((o) => (o.label_filename ? [[o.label_filename, [] as string[]] as const] : [])),
      ...(opts.labels ?? []),
    ]),
  });
}
