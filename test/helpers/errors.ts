// "Expect a ServalError": run the code under test, fail the test unless it throws (or rejects
// with) a ServalError, optionally of a given code, and hand the error back for more checks. And
// error texts of Triton's that several tests compare against.
import { expect } from 'vitest';
import { type ErrorCode, ServalError } from '../../src/kernel/errors.js';

/**
 * The NOTE Triton appends to a wrong-shape error when the model batches (core
 * src/infer_request.cc): the expected shape does not count the batch dimension.
 */
export const MAX_BATCH_NOTE =
  'NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. ' +
  'If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero. ' +
  'See the model configuration docs for more info on max_batch_size.';

function checked(e: unknown, code: ErrorCode | undefined): ServalError {
  expect(e).toBeInstanceOf(ServalError);
  if (code !== undefined) expect((e as ServalError).code).toBe(code);
  return e as ServalError;
}

/** The ServalError `fn` throws (of `code`, when given); fails the test if it throws nothing or something else. */
export function expectServalError(fn: () => unknown, code?: ErrorCode): ServalError {
  try {
    fn();
  } catch (e) {
    return checked(e, code);
  }
  throw new Error('expected a ServalError, but nothing was thrown');
}

/**
 * The ServalError a promise rejects with, or that an (async) function throws or rejects with (of
 * `code`, when given); fails the test if it settles without one. A promise gets its handler at
 * once, so one that rejects before the caller awaits is not reported as unhandled.
 */
export async function expectServalErrorAsync(work: Promise<unknown> | (() => unknown), code?: ErrorCode): Promise<ServalError> {
  try {
    await (typeof work === 'function' ? work() : work);
  } catch (e) {
    return checked(e, code);
  }
  throw new Error('expected a ServalError, but the call succeeded');
}
