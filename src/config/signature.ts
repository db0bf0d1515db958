// A model file's inputs and outputs as its backend reads them: what auto-complete fills a config
// from and what the resolved config is checked against.
import type { DataType } from '../kernel/datatypes.js';

export interface IoSignature {
  name: string;
  datatype: DataType | undefined;
  /** Raw element type as the runtime names it (for error messages about unsupported types). */
  rawType: string;
  /** -1 for symbolic/unknown dimensions; undefined when the rank is unknown. */
  dims: number[] | undefined;
}

export interface ModelSignature {
  inputs: IoSignature[];
  outputs: IoSignature[];
}
