// The timestamps the core and a model's scheduler stamp on a traced request, in Triton's order
// (a front-end adds its receive and send stamps around them; an ensemble step's child has just these).
export const CORE_STAMPS = [
  'REQUEST_START',
  'QUEUE_START',
  'COMPUTE_START',
  'COMPUTE_INPUT_END',
  'COMPUTE_OUTPUT_START',
  'COMPUTE_END',
  'REQUEST_END',
] as const;
