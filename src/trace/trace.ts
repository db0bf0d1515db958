// One sampled request's trace. Records are kept as Triton's TraceManager writes them, in the
// order they were captured: the model record, then one object per timestamp
// ({"id":N,"timestamps":[{"name":...,"ns":...}]}), and with the TENSORS level one object per tensor.
// When the request is done the records go to the trace setting that sampled it.
import { type DataType, isDataType, rawToJson } from '../kernel/datatypes.js';
import type { RequestTrace, TensorActivity, TraceActivity } from '../kernel/trace.js';
import { LEVEL_TENSORS, LEVEL_TIMESTAMPS } from './settings.js';

/** Where a finished trace's records go (its trace setting). */
export interface TraceSink {
  collect(records: string[]): void;
}

export class Trace implements RequestTrace {
  readonly tensors: boolean;
  private readonly timestamps: boolean;
  private records: string[] | undefined = [];

  constructor(
    readonly id: number,
    level: number,
    private readonly sink: TraceSink,
  ) {
    this.timestamps = (level & LEVEL_TIMESTAMPS) !== 0;
    this.tensors = (level & LEVEL_TENSORS) !== 0;
  }

  model(name: string, version: number, requestId: string): void {
    // Triton writes the model record with the REQUEST_START activity, a TIMESTAMPS record.
    if (!this.timestamps || !this.records) return;
    let rec = `{"id":${this.id},"model_name":${JSON.stringify(name)},"model_version":${version}`;
    if (requestId !== '') rec += `,"request_id":${JSON.stringify(requestId)}`;
    this.records.push(`${rec}}`);
  }

  stamp(activity: TraceActivity, ns: bigint): void {
    if (!this.timestamps || !this.records) return;
    this.records.push(`{"id":${this.id},"timestamps":[{"name":"${activity}","ns":${ns}}]}`);
  }

  tensor(activity: TensorActivity, name: string, datatype: string, shape: readonly number[], data: Uint8Array): void {
    if (!this.tensors || !this.records) return;
    const tensor = `{"name":${JSON.stringify(name)},"data":${JSON.stringify(tensorText(datatype, data))},"shape":"${shape.join(',')}","dtype":"${datatype}"}`;
    this.records.push(`{"id":${this.id},"activity":"${activity}","tensor":${tensor}}`);
  }

  end(): void {
    const records = this.records;
    if (!records) return;
    this.records = undefined;
    this.sink.collect(records);
  }
}

/**
 * A tensor's elements as Triton's trace writes them: comma-separated, BOOL as 0/1, BYTES elements
 * in double quotes. Floats are written with 6 significant digits (C++ stream default). Unlike
 * Triton, INT8/UINT8 are numbers (not raw characters) and FP16 is decoded, not left empty.
 */
export function tensorText(datatype: string, data: Uint8Array): string {
  if (!isDataType(datatype)) return '';
  const dt: DataType = datatype;
  let values: unknown[];
  try {
    values = rawToJson(dt, data, 'trace');
  } catch {
    return '';
  }
  switch (dt) {
    case 'BYTES':
      return values.map((v) => JSON.stringify(v)).join(',');
    case 'BOOL':
      return values.map((v) => (v ? '1' : '0')).join(',');
    case 'FP16':
    case 'FP32':
    case 'FP64':
      return values.map((v) => String(Number((v as number).toPrecision(6)))).join(',');
    default:
      return values.map((v) => (typeof v === 'object' && v !== null && 'value' in v ? String(v.value) : String(v))).join(',');
  }
}
