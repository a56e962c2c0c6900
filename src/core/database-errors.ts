import { CheckpointError, DatabaseError } from './errors';

/** What the library can tell about a database error from its SQLSTATE / driver code. */
export type DatabaseErrorKind = 'unique' | 'retryable' | 'connection' | 'other';

const UNIQUE_CODES = new Set(['23505', 'ER_DUP_ENTRY', 'SQLITE_CONSTRAINT_PRIMARYKEY', 'SQLITE_CONSTRAINT_UNIQUE']);
// Serialization failures, deadlocks and lock timeouts: the transaction can simply run again.
// (55P03: PostgreSQL's lock_timeout; SQLITE_BUSY and SQLITE_LOCKED come with extended variants.)
const RETRYABLE_CODES = new Set(['40001', '40P01', '55P03', 'ER_LOCK_DEADLOCK', 'ER_LOCK_WAIT_TIMEOUT']);
const RETRYABLE_PREFIXES = ['SQLITE_BUSY', 'SQLITE_LOCKED'];
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  '57P01',
  '57P02',
  '57P03',
  'PROTOCOL_CONNECTION_LOST',
  'ER_CON_COUNT_ERROR',
  'SQLITE_CANTOPEN',
]);

/**
 * Every `code` (and MySQL `sqlState`) found on the error, its `driverError` and its `cause` chain
 * (outermost first). A lost connection without a code (pg's "Connection terminated unexpectedly",
 * TypeORM's released runner) yields none, so it is classified `other`: never retried.
 */
export function errorCodes(error: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0) {
    const current = queue.shift();
    if (current === null || typeof current !== 'object' || seen.has(current)) continue;
    seen.add(current);
    const record = current as { code?: unknown; sqlState?: unknown; driverError?: unknown; cause?: unknown };
    if (typeof record.code === 'string') codes.push(record.code);
    if (typeof record.sqlState === 'string') codes.push(record.sqlState);
    queue.push(record.driverError, record.cause);
  }
  return codes;
}

export function classifyDatabaseError(error: unknown): DatabaseErrorKind {
  const codes = errorCodes(error);
  if (codes.some((c) => UNIQUE_CODES.has(c))) return 'unique';
  if (codes.some((c) => RETRYABLE_CODES.has(c) || RETRYABLE_PREFIXES.some((prefix) => c.startsWith(prefix)))) return 'retryable';
  if (codes.some((c) => CONNECTION_CODES.has(c) || c.startsWith('08'))) return 'connection';
  return 'other';
}

// SQL the database refused to compile or whose parameters did not fit: PostgreSQL/MySQL SQLSTATE
// classes 42 (syntax, unknown name) and 22 (data exception); SQLite's generic error (no such
// column, syntax) and binding errors.
const INVALID_STATEMENT = /^(42|22)[0-9A-Z]{3}$/;
const SQLITE_INVALID_STATEMENT = new Set(['SQLITE_ERROR', 'SQLITE_MISMATCH', 'SQLITE_RANGE']);

/** True when the statement itself (e.g. a user's SQL condition) is invalid, not the database unavailable. */
export function isInvalidStatement(error: unknown): boolean {
  return errorCodes(error).some((c) => INVALID_STATEMENT.test(c) || SQLITE_INVALID_STATEMENT.has(c));
}

/** The library's own statement failed: a DATABASE_ERROR that remembers whether a rerun may succeed. */
export class OwnStatementError extends DatabaseError {
  readonly kind: DatabaseErrorKind;

  constructor(error: unknown, what: string) {
    const kind = classifyDatabaseError(error);
    const detail = error instanceof Error ? error.message : String(error);
    super(`Database error while ${what}: ${detail}`, { cause: error });
    this.kind = kind;
  }
}

/** True for an error the library may answer by running the whole (own) transaction again. */
export function isRetryable(error: unknown): boolean {
  return error instanceof OwnStatementError && error.kind === 'retryable';
}

/** Wraps a failure of one of the library's own statements; errors already typed pass through. */
export function ownStatementError(error: unknown, what: string): CheckpointError {
  if (error instanceof CheckpointError) return error;
  return new OwnStatementError(error, what);
}
