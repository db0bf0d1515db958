// The one error type the client throws: the server's message, with the status it came with.

export interface ErrorStatus {
  /** Which protocol answered, or 'client' for a check the client made before sending. */
  protocol: 'http' | 'grpc' | 'client';
  /** HTTP status code, or gRPC status code (grpc.status); undefined for client-side checks. */
  code?: number;
}

export class ServalClientError extends Error {
  readonly protocol: ErrorStatus['protocol'];
  readonly code: number | undefined;

  constructor(message: string, status: ErrorStatus = { protocol: 'client' }, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ServalClientError';
    this.protocol = status.protocol;
    this.code = status.code;
  }
}
