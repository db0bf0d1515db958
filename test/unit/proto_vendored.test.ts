// proto/: every protocol file is written in the project and listed in proto/README.md with the
// compiled descriptors it is compared with (test/conformance/test_proto_vendored.py does the
// field-by-field comparison); here, that the table and the folder agree, that no file carries
// another project's licence text, and the facts clients rely on, read with protobufjs as Serval
// reads the files (keepCase).
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';

const PROTO_DIR = resolve(import.meta.dirname, '../../proto');
const README = join(PROTO_DIR, 'README.md');

interface Row {
  file: string;
  reference: string;
}

/** The rows of the files table in proto/README.md (the one whose header has "Compared with"). */
function readmeRows(): Row[] {
  const lines = readFileSync(README, 'utf8').split('\n');
  const cells = (line: string): string[] =>
    line
      .trim()
      .replace(/^\|/, '')
      .replace(/\|$/, '')
      .split('|')
      .map((c) => c.trim());
  const unquote = (c: string): string => c.replace(/^`([^`]*)`.*$/, '$1');
  const start = lines.findIndex((l) => l.trim().startsWith('|') && cells(l).some((c) => c.startsWith('Compared with')));
  if (start < 0) throw new Error('proto/README.md has no files table with a "Compared with" column');
  const rows: Row[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.trim().startsWith('|')) break;
    const c = cells(line);
    rows.push({ file: unquote(c[0]!), reference: unquote(c[1]!) });
  }
  return rows;
}

function loadRoot(files: string[]): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string): string => resolve(PROTO_DIR, target);
  root.loadSync(files, { keepCase: true });
  root.resolveAll();
  return root;
}

describe('proto/README.md records every protocol file', () => {
  const rows = readmeRows();
  const protoFiles = readdirSync(PROTO_DIR)
    .filter((f) => f.endsWith('.proto'))
    .sort();

  it('lists each .proto file in proto/ exactly once, with the compiled module it is compared with', () => {
    expect(rows.map((r) => r.file).sort()).toStrictEqual(protoFiles);
    expect(protoFiles).toStrictEqual(['grpc_service.proto', 'health.proto', 'model_config.proto']);
    for (const row of rows) expect(row.reference, `reference of ${row.file}`).toMatch(/^[a-z0-9_.]+_pb2$/);
  });

  it.each(protoFiles)('%s is written in the project (no copied licence header)', (file) => {
    const text = readFileSync(join(PROTO_DIR, file), 'utf8');
    expect(text).not.toMatch(/Copyright|Redistribution and use|NVIDIA CORPORATION|Licensed under/);
  });
});

describe('protocol facts clients depend on (protobufjs, keepCase)', () => {
  const root = loadRoot(['grpc_service.proto', 'health.proto']);

  it('ModelEnsembling field 2 is max_inflight_requests, as Triton names it', () => {
    const t = root.lookupType('inference.ModelEnsembling');
    expect(t.fields.max_inflight_requests?.id).toBe(2);
    expect(t.fields.max_inflight_requests?.type).toBe('uint32');
    expect(t.fields.max_inflight_responses).toBeUndefined();
    expect(t.fields.step?.repeated).toBe(true);
  });

  it('GRPCInferenceService has Triton’s rpcs with their message types and streaming flags', () => {
    const svc = root.lookupService('inference.GRPCInferenceService');
    const rpcs: Array<[string, string, string, boolean]> = [
      ['ServerLive', 'ServerLiveRequest', 'ServerLiveResponse', false],
      ['ServerReady', 'ServerReadyRequest', 'ServerReadyResponse', false],
      ['ModelReady', 'ModelReadyRequest', 'ModelReadyResponse', false],
      ['ServerMetadata', 'ServerMetadataRequest', 'ServerMetadataResponse', false],
      ['ModelMetadata', 'ModelMetadataRequest', 'ModelMetadataResponse', false],
      ['ModelInfer', 'ModelInferRequest', 'ModelInferResponse', false],
      ['ModelStreamInfer', 'ModelInferRequest', 'ModelStreamInferResponse', true],
      ['ModelConfig', 'ModelConfigRequest', 'ModelConfigResponse', false],
      ['ModelStatistics', 'ModelStatisticsRequest', 'ModelStatisticsResponse', false],
      ['RepositoryIndex', 'RepositoryIndexRequest', 'RepositoryIndexResponse', false],
      ['RepositoryModelLoad', 'RepositoryModelLoadRequest', 'RepositoryModelLoadResponse', false],
      ['RepositoryModelUnload', 'RepositoryModelUnloadRequest', 'RepositoryModelUnloadResponse', false],
      ['SystemSharedMemoryStatus', 'SystemSharedMemoryStatusRequest', 'SystemSharedMemoryStatusResponse', false],
      ['SystemSharedMemoryRegister', 'SystemSharedMemoryRegisterRequest', 'SystemSharedMemoryRegisterResponse', false],
      ['SystemSharedMemoryUnregister', 'SystemSharedMemoryUnregisterRequest', 'SystemSharedMemoryUnregisterResponse', false],
      ['CudaSharedMemoryStatus', 'CudaSharedMemoryStatusRequest', 'CudaSharedMemoryStatusResponse', false],
      ['CudaSharedMemoryRegister', 'CudaSharedMemoryRegisterRequest', 'CudaSharedMemoryRegisterResponse', false],
      ['CudaSharedMemoryUnregister', 'CudaSharedMemoryUnregisterRequest', 'CudaSharedMemoryUnregisterResponse', false],
      ['TraceSetting', 'TraceSettingRequest', 'TraceSettingResponse', false],
      ['LogSettings', 'LogSettingsRequest', 'LogSettingsResponse', false],
    ];
    for (const [name, req, res, stream] of rpcs) {
      const m = svc.methods[name];
      expect(m, `rpc ${name}`).toBeDefined();
      expect([m!.resolvedRequestType?.fullName, m!.resolvedResponseType?.fullName], `rpc ${name}`).toStrictEqual([
        `.inference.${req}`,
        `.inference.${res}`,
      ]);
      expect([Boolean(m!.requestStream), Boolean(m!.responseStream)], `streaming of rpc ${name}`).toStrictEqual([stream, stream]);
    }
  });

  it('InferParameter and ModelConfig keep their oneofs', () => {
    const param = root.lookupType('inference.InferParameter');
    expect(param.oneofs.parameter_choice?.oneof).toStrictEqual([
      'bool_param',
      'int64_param',
      'string_param',
      'double_param',
      'uint64_param',
    ]);
    const config = root.lookupType('inference.ModelConfig');
    expect(config.oneofs.scheduling_choice?.oneof).toStrictEqual(['dynamic_batching', 'sequence_batching', 'ensemble_scheduling']);
    expect(root.lookupEnum('inference.DataType').values.TYPE_BF16).toBe(14);
  });

  it('grpc.health.v1.Health has Check (unary) and Watch (server streaming)', () => {
    const health = root.lookupService('grpc.health.v1.Health');
    expect(Object.keys(health.methods).sort()).toStrictEqual(['Check', 'Watch']);
    expect(health.methods.Check!.responseStream).toBeFalsy();
    expect(health.methods.Watch!.responseStream).toBe(true);
    const status = root.lookupEnum('grpc.health.v1.HealthCheckResponse.ServingStatus');
    expect({ ...status.values }).toStrictEqual({ UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 });
  });
});
