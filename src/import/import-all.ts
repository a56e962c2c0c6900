import { InvalidArgumentError } from '../core/errors';
import { type Db, transact } from '../core/transaction';
import { applyChecked, checkRows } from './apply-chunk';
import { stopFor } from '../control/job-state';
import { beginIn } from './begin';
import { validateBatch } from './import-store';
import { parseRows } from './parse-rows';
import { sourceDigest } from './source-digest';
import { describeValue } from './row';

/** Options of {@link importAll}. */
export interface ImportAllOptions {
  /** Rows per chunk (one transaction each); a positive integer, default 2. */
  size?: number;
  /** A test hook: called with the global index after each row's insert; throwing rolls that chunk back. */
  fault?: (index: number) => void;
}

/** Checks that `size` is a positive safe integer (a boolean, bigint or numeric string is not). */
export function validateSize(size: unknown, what: string): asserts size is number {
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size <= 0) {
    throw new InvalidArgumentError(`${what}: size must be a positive integer, got ${describeValue(size)}.`);
  }
}

/**
 * Imports a whole in-memory source: parses and digests it, begins (or resumes) the batch, and
 * applies the remaining rows `size` at a time; returns the final checkpoint. A failed chunk keeps
 * the chunks before it; rerunning with the same source resumes at the failed chunk. A batch paused
 * or cancelled (see `pause`) gets no further chunk: the call returns its checkpoint as it stands,
 * learnt from the row lock each chunk takes anyway.
 */
export async function importAll(db: Db, batch: string, raw: Uint8Array | string, options: ImportAllOptions = {}): Promise<number> {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('importAll: options must be an object.');
  const { size = 2, fault } = options;
  validateSize(size, 'importAll');
  validateBatch(batch);
  if (fault !== undefined && typeof fault !== 'function') throw new InvalidArgumentError('importAll: fault must be a function.');
  // What the built-in table cannot store (an id too long, U+0000) is refused before the first write too.
  const rows = checkRows(parseRows(raw), 0);
  const digest = sourceDigest(raw);
  const started = await transact(db, (tx) => beginIn(tx, batch, digest, rows.length));
  let next = Number(started.next_index);
  if (stopFor(started)) return next;
  while (next < rows.length) {
    const applied = await applyChecked(db, batch, next, rows.slice(next, next + size), fault, true);
    next = applied.next;
    if (applied.stopped) break;
  }
  return next;
}
