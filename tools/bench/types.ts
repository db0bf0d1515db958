// Shapes of one benchmark run's results (written to results.json and rendered by report.ts).
import type { ProfileSummary } from './cpuprofile.js';
import type { PaResult } from './harness.js';
import type { CpuUse } from './procstat.js';

export type Protocol = 'grpc' | 'http';

export interface CeilingRun {
  threads: number;
  batch: number;
  itemsPerS: number;
  p50Ms: number;
}

export interface Ceiling {
  model: string;
  onnx: string;
  maxBatch: number;
  runs: CeilingRun[];
  /** Best items/s over batch sizes ≤ max_batch_size and 1 or 2 intra-op threads (the sweep). */
  best: CeilingRun;
  /** Best items/s at batch 1 over 1 or 2 intra-op threads (the sweep). */
  batch1: CeilingRun;
  /** The same two configurations measured again after the model's server runs (full mode). */
  afterBest?: number;
  afterBatch1?: number;
  /** Values the targets use: the higher of the sweep and the re-check where both exist. */
  bestValue: number;
  batch1Value: number;
  /** Cores used by other processes during the sweep (noise indicator). */
  otherCores: number;
  stealCores: number;
}

export interface Point {
  phase: 'model' | 'simple' | 'profile';
  /** Model family (ranker_mlp, image_classifier, resnet50, simple). */
  model: string;
  /**
   * b = no dynamic batching, c = dynamic batching, d = dynamic batching + 2 instances,
   * c1 = dynamic batching with intra_op_thread_count 1 (full runs, top concurrency only),
   * e = bare protocol server, s = Serval's simple.
   */
  variant: 'b' | 'c' | 'd' | 'c1' | 'cs' | 'e' | 's';
  /** Name given to perf_analyzer -m. */
  modelName: string;
  server: 'serval' | 'bare-http' | 'bare-grpc';
  proto: Protocol;
  conc: number;
  repeat: number;
  ok: boolean;
  error?: string;
  stability: number;
  res?: PaResult;
  use?: CpuUse;
  /** CLOCK_MONOTONIC µs around the perf_analyzer run (from the start of its first attempt). */
  monoUs?: [number, number];
  command: string;
  log: string;
  seconds: number;
}

export interface ProfileRun {
  scenario: string;
  server: Point['server'];
  proto: Protocol;
  /** Requests the server answered while it was profiled (its statistics), to turn time into µs per request. */
  requests?: number;
  point?: Point;
  main?: ProfileSummary;
  workers: { file: string; busyFraction: number; totalMs: number }[];
  error?: string;
}

export interface Target {
  id: string;
  what: string;
  protocol: Protocol | '-';
  measured: string;
  required: string;
  value: number;
  threshold: number;
  /** undefined when a number it needs was not measured in this run. */
  met: boolean | undefined;
}

export interface Results {
  mode: 'quick' | 'full';
  startedAt: string;
  finishedAt: string;
  durationS: number;
  commandLine: string;
  setup: [string, string][];
  settings: [string, string][];
  ceilings: Ceiling[];
  points: Point[];
  profiles: ProfileRun[];
  targets: Target[];
  commands: string[];
  workDir: string;
  errors: string[];
}
