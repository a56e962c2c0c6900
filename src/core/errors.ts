/** Stable codes carried by every error this package throws. */
export type CheckpointErrorCode =
  | 'INVALID_ARGUMENT'
  | 'INVALID_INPUT'
  | 'FINGERPRINT_MISMATCH'
  | 'CURSOR_MISMATCH'
  | 'NON_SERIALIZABLE'
  | 'NON_UNIQUE_KEY'
  | 'CLAIM_LOST'
  | 'NO_DATA_SOURCE'
  | 'STORE_UNAVAILABLE'
  | 'DATABASE_ERROR'
  | 'PAUSED'
  | 'CANCELLED';

/**
 * Base class of every error thrown by typeorm-checkpoint; branch on `code`, never on the message.
 * Errors thrown by your own callbacks (handlers, sources, `map`) pass through unchanged, not wrapped.
 */
export class CheckpointError extends Error {
  /** The stable code saying what went wrong; each subclass has its own. */
  readonly code: CheckpointErrorCode;

  constructor(code: CheckpointErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Thrown when an argument has the wrong type or range (a bad `limit`, an unknown column, …); code `INVALID_ARGUMENT`. */
export class InvalidArgumentError extends CheckpointError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_ARGUMENT', message, options);
  }
}

/** Thrown when input data (a file, a row) breaks the import contract, or a row's id is a duplicate; code `INVALID_INPUT`. */
export class InvalidInputError extends CheckpointError {
  /** The offending row's position in the source, from 0, when one row is to blame. */
  readonly index?: number;
  /** The offending field of that row (records mode), when one field is to blame. */
  readonly field?: string;

  constructor(message: string, index?: number, options?: { cause?: unknown; field?: string }) {
    super('INVALID_INPUT', message, options);
    if (index !== undefined) this.index = index;
    if (options?.field !== undefined) this.field = options.field;
  }
}

/** Thrown when a job or import is resumed with a different fingerprint / source digest; code `FINGERPRINT_MISMATCH`. */
export class FingerprintMismatchError extends CheckpointError {
  constructor(message: string) {
    super('FINGERPRINT_MISMATCH', message);
  }
}

/** Thrown when a chunk is applied at a position other than the committed checkpoint; code `CURSOR_MISMATCH`. */
export class CursorMismatchError extends CheckpointError {
  constructor(message: string) {
    super('CURSOR_MISMATCH', message);
  }
}

/** Thrown when a value that must be stored as JSON would not survive a JSON round trip unchanged; code `NON_SERIALIZABLE`. */
export class NonSerializableError extends CheckpointError {
  constructor(message: string) {
    super('NON_SERIALIZABLE', message);
  }
}

/** Thrown when `sqlSource` is given a key that is not unique; code `NON_UNIQUE_KEY`. */
export class NonUniqueKeyError extends CheckpointError {
  constructor(message: string) {
    super('NON_UNIQUE_KEY', message);
  }
}

/** Thrown when a worker acts on a file or range claim that another worker has since taken over; code `CLAIM_LOST`. */
export class ClaimLostError extends CheckpointError {
  constructor(message: string) {
    super('CLAIM_LOST', message);
  }
}

/** Thrown when no DataSource can be found for a call (no transaction, option, property or default); code `NO_DATA_SOURCE`. */
export class NoDataSourceError extends CheckpointError {
  constructor(message: string) {
    super('NO_DATA_SOURCE', message);
  }
}

/** Thrown when the claim store's database fails; never silently replaced by an in-memory claim. Code `STORE_UNAVAILABLE`. */
export class StoreUnavailableError extends CheckpointError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STORE_UNAVAILABLE', message, options);
  }
}

/** Thrown when one of the library's own statements fails for a reason it cannot interpret; code `DATABASE_ERROR`, the driver's error as `cause`. */
export class DatabaseError extends CheckpointError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('DATABASE_ERROR', message, options);
  }
}

/** Thrown when the CLI's `import` finds its batch paused (see `pause`), before or while it runs; code `PAUSED`. */
export class PausedError extends CheckpointError {
  constructor(message: string) {
    super('PAUSED', message);
  }
}

/** Thrown when the CLI's `import` finds its batch cancelled (see `cancel`), before or while it runs; code `CANCELLED`. */
export class CancelledError extends CheckpointError {
  constructor(message: string) {
    super('CANCELLED', message);
  }
}
