// One sampled request's trace. Records are kept as Triton's TraceManager writes them, in the
// order they were captured: the model record, then one object per timestamp
// ({"id":N,"timestamps":[{"name":...,"ns":...}]}), and with the TENSORS level one object per tensor.
// The requests an ensemble makes to its steps get child traces (Triton's SpawnChildTrace): the
// next id, the parent's id as "parent_id" in their model record, the same level. A sampled trace
// and its children are one group, as in Triton's tracer: written together, once all have ended,
// each trace's records in one run (the sampled trace first, then the children as they started;
// Triton keeps them in an unordered map, so readers group by id), and counted as one trace
// against the setting's count and log frequency.
import { type DataType, isDataType, rawToJson } from '../kernel/datatypes.js';
import type { RequestTrace, TensorActivity, TraceActivity } from '../kernel/trace.js';
import { LEVEL_TENSORS, LEVEL_TIMESTAMPS } from './settings.js';

/** Where a finished trace's records go (its trace setting). */
export interface TraceSink {
  collect(records: string[]): void;
}

/** A sampled trace and its children: their records, written to the sink when the last one ends. */
class TraceGroup {
  private readonly streams: string[][] = [];
  private open = 0;
  private written = false;

  constructor(
    private readonly sink: TraceSink,
    readonly newId: () => number,
  ) {}

  /** A new trace's record list, or undefined once the group is written (a child started too late). */
  join(): string[] | undefined {
    if (this.written) return undefined;
    const records: string[] = [];
    this.streams.push(records);
    this.open += 1;
    return records;
  }

  leave(): void {
    this.open -= 1;
    if (this.open !== 0) return;
    this.written = true;
    this.sink.collect(this.streams.flat());
  }
}

export class Trace implements RequestTrace {
  readonly tensors: boolean;
  private readonly timestamps: boolean;
  private records: string[] | undefined;
  private readonly group: TraceGroup;
  /** Holds on the request's release (hold()); REQUEST_END and end() wait for the last. */
  private holds = 0;
  private endHeld = false;
  private requestEndHeld = false;

  /**
   * A sampled trace (`parent` a sink and the id allocator its children draw from), or a child of
   * `parent` (a trace of its group).
   */
  constructor(
    readonly id: number,
    private readonly level: number,
    parent: { sink: TraceSink; newId: () => number } | Trace,
    /** The id of the trace this one is a child of; 0 for a sampled trace (Triton's "no parent"). */
    readonly parentId = 0,
  ) {
    this.timestamps = (level & LEVEL_TIMESTAMPS) !== 0;
    this.tensors = (level & LEVEL_TENSORS) !== 0;
    this.group = parent instanceof Trace ? parent.group : new TraceGroup(parent.sink, parent.newId);
    this.records = this.group.join();
  }

  child(): Trace {
    return new Trace(this.group.newId(), this.level, this, this.id);
  }

  model(name: string, version: number, requestId: string): void {
    // Triton writes the model record with the REQUEST_START activity, a TIMESTAMPS record.
    if (!this.timestamps || !this.records) return;
    let rec = `{"id":${this.id},"model_name":${JSON.stringify(name)},"model_version":${version}`;
    if (requestId !== '') rec += `,"request_id":${JSON.stringify(requestId)}`;
    if (this.parentId !== 0) rec += `,"parent_id":${this.parentId}`;
    this.records.push(`${rec}}`);
  }

  stamp(activity: TraceActivity, ns: bigint): void {
    if (!this.timestamps || !this.records) return;
    if (activity === 'REQUEST_END' && this.holds > 0) {
      this.requestEndHeld = true;
      return;
    }
    this.records.push(`{"id":${this.id},"timestamps":[{"name":"${activity}","ns":${ns}}]}`);
  }

  tensor(activity: TensorActivity, name: string, datatype: string, shape: readonly number[], data: Uint8Array): void {
    if (!this.tensors || !this.records) return;
    const tensor = `{"name":${JSON.stringify(name)},"data":${JSON.stringify(tensorText(datatype, data))},"shape":"${shape.join(',')}","dtype":"${datatype}"}`;
    this.records.push(`{"id":${this.id},"activity":"${activity}","tensor":${tensor}}`);
  }

  end(): void {
    if (!this.records) return;
    if (this.holds > 0) {
      this.endHeld = true;
      return;
    }
    this.records = undefined;
    this.group.leave();
  }

  hold(): () => void {
    if (!this.records) return () => undefined;
    this.holds += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holds -= 1;
      if (this.holds > 0) return;
      if (this.requestEndHeld) {
        this.requestEndHeld = false;
        this.stamp('REQUEST_END', process.hrtime.bigint());
      }
      if (this.endHeld) {
        this.endHeld = false;
        this.end();
      }
    };
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
