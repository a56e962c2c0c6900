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
  | 'DATABASE_ERROR';

/** Base class of every error thrown by typeorm-checkpoint; branch on `code`, never on the message. */
export class CheckpointError extends Error {
  readonly code: CheckpointErrorCode;

  constructor(code: CheckpointErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Thrown when an argument has the wrong type or range (a bad `limit`, an unknown column, …). */
export class InvalidArgumentError extends CheckpointError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_ARGUMENT', message, options);
  }
}

/** Thrown when input data (a file, a row) breaks the import contract; `index` is the offending item, `field` its field (records mode). */
export class InvalidInputError extends CheckpointError {
  readonly index?: number;
  readonly field?: string;

  constructor(message: string, index?: number, options?: { cause?: unknown; field?: string }) {
    super('INVALID_INPUT', message, options);
    if (index !== undefined) this.index = index;
    if (options?.field !== undefined) this.field = options.field;
  }
}

/** Thrown when a job or import is resumed with a different fingerprint / source digest. */
export class FingerprintMismatchError extends CheckpointError {
  constructor(message: string) {
    super('FINGERPRINT_MISMATCH', message);
  }
}

/** Thrown when a chunk is applied at a position other than the committed checkpoint. */
export class CursorMismatchError extends CheckpointError {
  constructor(message: string) {
    super('CURSOR_MISMATCH', message);
  }
}

/** Thrown when a value that must be stored as JSON would not survive a JSON round trip unchanged. */
export class NonSerializableError extends CheckpointError {
  constructor(message: string) {
    super('NON_SERIALIZABLE', message);
  }
}

/** Thrown when `sqlSource` is given a key column that is not unique on its own. */
export class NonUniqueKeyError extends CheckpointError {
  constructor(message: string) {
    super('NON_UNIQUE_KEY', message);
  }
}

/** Thrown when a worker acts on a file claim that another worker has since taken over. */
export class ClaimLostError extends CheckpointError {
  constructor(message: string) {
    super('CLAIM_LOST', message);
  }
}

/** Thrown when no DataSource can be found for a call (no transaction, option, property or default). */
export class NoDataSourceError extends CheckpointError {
  constructor(message: string) {
    super('NO_DATA_SOURCE', message);
  }
}

/** Thrown when the claim store's database fails; never silently replaced by an in-memory claim. */
export class StoreUnavailableError extends CheckpointError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('STORE_UNAVAILABLE', message, options);
  }
}

/** Thrown when one of the library's own statements fails for a reason it cannot interpret. */
export class DatabaseError extends CheckpointError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('DATABASE_ERROR', message, options);
  }
}
