// One error type for the whole server, and the one place that maps it to HTTP and gRPC status.
// The codes are Triton's TRITONSERVER_Error codes; front-ends translate them exactly as Triton does.

export type ErrorCode =
  | 'UNKNOWN'
  | 'INTERNAL'
  | 'NOT_FOUND'
  | 'INVALID_ARG'
  | 'UNAVAILABLE'
  | 'UNSUPPORTED'
  | 'ALREADY_EXISTS'
  | 'CANCELLED';

export class ServalError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** The request caused it, though its status is INTERNAL because Triton answers so (malformed). */
    readonly clientFault = false,
  ) {
    super(message);
    this.name = 'ServalError';
  }
  /**
   * A request that does not parse at all: Triton answers INTERNAL (its gRPC server's status for a
   * message that does not deserialize), but the server is not at fault, so it is not logged as one.
   */
  static malformed(msg: string): ServalError {
    return new ServalError('INTERNAL', msg, true);
  }
  static invalidArg(msg: string): ServalError {
    return new ServalError('INVALID_ARG', msg);
  }
  static notFound(msg: string): ServalError {
    return new ServalError('NOT_FOUND', msg);
  }
  static unavailable(msg: string): ServalError {
    return new ServalError('UNAVAILABLE', msg);
  }
  static internal(msg: string): ServalError {
    return new ServalError('INTERNAL', msg);
  }
  static unsupported(msg: string): ServalError {
    return new ServalError('UNSUPPORTED', msg);
  }
  static cancelled(msg: string): ServalError {
    return new ServalError('CANCELLED', msg);
  }
}

/**
 * Whether an error is the server's fault, to be logged as one: INTERNAL and unexpected errors,
 * except a request that does not parse. Refusals (a full queue, a bad request) are answers.
 */
export function isServerFault(e: unknown): boolean {
  return !(e instanceof ServalError) || (e.code === 'INTERNAL' && !e.clientFault);
}

/** Anything thrown becomes a ServalError; unexpected errors are INTERNAL. */
export function asServalError(e: unknown): ServalError {
  if (e instanceof ServalError) return e;
  const msg = e instanceof Error ? e.message : String(e);
  return new ServalError('INTERNAL', msg);
}

/** HTTP status for a code, as Triton's HTTP front-end maps TRITONSERVER_Error codes. */
export function httpStatus(code: ErrorCode): number {
  switch (code) {
    case 'INTERNAL':
      return 500;
    case 'NOT_FOUND':
      return 404;
    case 'UNAVAILABLE':
      return 503;
    case 'UNSUPPORTED':
      return 501;
    default:
      return 400; // UNKNOWN, INVALID_ARG, ALREADY_EXISTS, CANCELLED
  }
}

/** grpc status numbers (see @grpc/grpc-js `status`), as Triton's gRPC front-end maps them. */
export function grpcStatus(code: ErrorCode): number {
  switch (code) {
    case 'CANCELLED':
      return 1;
    case 'UNKNOWN':
      return 2;
    case 'INVALID_ARG':
      return 3;
    case 'NOT_FOUND':
      return 5;
    case 'ALREADY_EXISTS':
      return 6;
    case 'UNSUPPORTED':
      return 12;
    case 'INTERNAL':
      return 13;
    case 'UNAVAILABLE':
      return 14;
  }
}

/** Triton's name for a code, as its status texts print it ("Internal: ...", TRITONSERVER_ErrorCodeString). */
export function statusText(code: ErrorCode): string {
  const names: Record<ErrorCode, string> = {
    UNKNOWN: 'Unknown',
    INTERNAL: 'Internal',
    NOT_FOUND: 'Not found',
    INVALID_ARG: 'Invalid argument',
    UNAVAILABLE: 'Unavailable',
    UNSUPPORTED: 'Unsupported',
    ALREADY_EXISTS: 'Already exists',
    CANCELLED: 'Cancelled',
  };
  return names[code];
}
