/**
 * A failure of the caller's own code (a job's handler, a file's `work`), carried through the
 * transaction helpers untouched: never retried as a database error, never wrapped as one. Whoever
 * ran the transaction unwraps `failure` and raises it as it was.
 */
export class HandlerFailure extends Error {
  constructor(readonly failure: unknown) {
    super('handler failed');
  }
}

/** `fn` with every failure it raises carried as a {@link HandlerFailure}. */
export function carryingFailures<A extends unknown[], T>(fn: (...args: A) => Promise<T>): (...args: A) => Promise<T> {
  return async (...args) => {
    try {
      return await fn(...args);
    } catch (error) {
      throw new HandlerFailure(error);
    }
  };
}
