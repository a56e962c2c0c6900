import { InvalidArgumentError } from '../core/errors';
import type { FileRef, ProcessingStats } from './claim-store';

// The column sizes of file_checkpoints (the URL is not itself a key: rows are keyed by its hash).
const MAX_URL_LENGTH = 4096;
const MAX_NAME_LENGTH = 255;
const MAX_INTEGER_COLUMN = 2_147_483_647;

function codePoints(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

/** A non-NUL string of at most `max` characters (PostgreSQL text cannot hold U+0000). */
function checkText(value: unknown, what: string, max: number, allowEmpty: boolean): asserts value is string {
  if (typeof value !== 'string' || (!allowEmpty && value.length === 0) || value.includes('\0') || codePoints(value) > max) {
    throw new InvalidArgumentError(
      `${what} must be a ${allowEmpty ? '' : 'non-empty '}string of at most ${max} characters without U+0000, got ${describe(value)}.`,
    );
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value);
  if (value instanceof Date) return 'an invalid Date';
  return value === null ? 'null' : typeof value;
}

export function checkFileUrl(value: unknown): asserts value is string {
  checkText(value, 'fileUrl', MAX_URL_LENGTH, false);
}

export function checkFileType(value: unknown): asserts value is string {
  checkText(value, 'fileType', MAX_NAME_LENGTH, true);
}

export function checkWorkerId(value: unknown): asserts value is string {
  checkText(value, 'workerId', MAX_NAME_LENGTH, false);
}

export function checkFileTimestamp(value: unknown): asserts value is Date {
  if (!(value instanceof Date) || !Number.isFinite(value.getTime())) {
    throw new InvalidArgumentError(`fileTimestamp must be a valid Date, got ${describe(value)}.`);
  }
}

export function checkFile(value: unknown, where: string): FileRef {
  if (typeof value !== 'object' || value === null) {
    throw new InvalidArgumentError(`${where} must be { fileUrl, fileType, fileTimestamp }, got ${describe(value)}.`);
  }
  const file = value as Partial<FileRef>;
  checkFileUrl(file.fileUrl);
  checkFileType(file.fileType);
  checkFileTimestamp(file.fileTimestamp);
  return { fileUrl: file.fileUrl, fileType: file.fileType, fileTimestamp: file.fileTimestamp };
}

export function checkCount(value: unknown, what: string, options: { min: number; max?: number }): asserts value is number {
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < options.min || value > max) {
    throw new InvalidArgumentError(`${what} must be an integer from ${options.min} to ${max}, got ${String(value)}.`);
  }
}

export function checkMaxRetries(value: unknown): asserts value is number {
  checkCount(value, 'maxRetries', { min: 0, max: MAX_INTEGER_COLUMN });
}

/**
 * Stats as given to `completeFile` or returned by a `processFile` handler; a handler may leave
 * `durationMs` out, and then the measured duration is stored.
 */
export function checkStats(value: unknown, measuredMs?: number): ProcessingStats {
  if (typeof value !== 'object' || value === null) {
    throw new InvalidArgumentError(
      `stats must be { totalRows, filteredRows, persistedRows, durationMs } (non-negative integers), got ${describe(value)}.`,
    );
  }
  const stats = value as Partial<ProcessingStats>;
  const durationMs = stats.durationMs === undefined && measuredMs !== undefined ? measuredMs : stats.durationMs;
  checkCount(stats.totalRows, 'stats.totalRows', { min: 0 });
  checkCount(stats.filteredRows, 'stats.filteredRows', { min: 0 });
  checkCount(stats.persistedRows, 'stats.persistedRows', { min: 0 });
  checkCount(durationMs, 'stats.durationMs', { min: 0 });
  return { totalRows: stats.totalRows, filteredRows: stats.filteredRows, persistedRows: stats.persistedRows, durationMs };
}
