import { expect } from 'chai';
import { CheckpointError } from '../../src';

/** Resolves with what `promise` rejected with; fails the test when it resolves. */
export async function rejection(promise: Promise<unknown>, message = 'expected the call to reject'): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return expect.fail(message);
}

/** Asserts that `promise` rejects with a `CheckpointError` whose `code` is `code`; resolves with it. */
export async function expectCode(promise: Promise<unknown>, code: string): Promise<CheckpointError> {
  const error = await rejection(promise, `expected ${code}, but the call succeeded`);
  expect(error, String(error)).to.be.instanceOf(CheckpointError);
  expect((error as CheckpointError).code, String(error)).to.equal(code);
  return error as CheckpointError;
}
