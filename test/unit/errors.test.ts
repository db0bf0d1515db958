// kernel/errors.ts: which errors are the server's fault (logged as such by every front-end).
import { describe, expect, it } from 'vitest';
import { isServerFault, ServalError } from '../../src/kernel/errors.js';

describe('isServerFault', () => {
  it('counts INTERNAL and unexpected errors as the server’s, but not a request that does not parse or a refusal', () => {
    expect(isServerFault(ServalError.internal('worker died'))).toBe(true);
    expect(isServerFault(new Error('bug'))).toBe(true);
    const malformed = ServalError.malformed('malformed ModelInferRequest: truncated varint (at byte 3)');
    expect(malformed.code).toBe('INTERNAL');
    expect(isServerFault(malformed)).toBe(false);
    expect(isServerFault(ServalError.unavailable('Exceeds maximum queue size'))).toBe(false);
    expect(isServerFault(ServalError.invalidArg('bad'))).toBe(false);
  });
});
