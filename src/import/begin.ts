import type { EntityManager } from 'typeorm';
import { FingerprintMismatchError } from '../core/errors';
import { type Db, transact } from '../core/transaction';
import { type ImportRow, insertImport, lockImport, readImport, updateImport, validateBatch, validateDigest } from './import-store';
import { stopFor, type StopReason } from '../control/job-state';
import type { LoopControl } from '../control/loop-control';

export function fingerprintMismatch(batch: string, stored: string, given: string): FingerprintMismatchError {
  return new FingerprintMismatchError(
    `Import "${batch}" was started from a source with digest ${stored}, not ${given}: it is another file. ` +
      'Resume it with the original file, use another batch id, or replace the import explicitly (CLI: --replace).',
  );
}

/**
 * In `tx`: creates the import bound to `digest` or, if it exists, checks the digest and locks the
 * row. Returns the stored row. `totalRows` is recorded when known; `validated`, when given, is the
 * options hash of the pass 1 that validated the file (null: a resume must validate again), with
 * `repeated`, the rows it found repeating a key (`encodeRows`).
 */
export async function beginIn(
  tx: EntityManager,
  batch: string,
  digest: string,
  totalRows: number | null,
  validated?: string | null,
  repeated: string | null = null,
): Promise<ImportRow> {
  // The insert is a write, so on SQLite it also takes the write lock before anything is read.
  await insertImport(tx, batch, digest, totalRows);
  const row = (await lockImport(tx, batch)) as ImportRow;
  if (row.digest !== digest) throw fingerprintMismatch(batch, row.digest, digest);
  const changes: Record<string, unknown> = {};
  if (totalRows !== null && row.total_rows === null) changes.total_rows = totalRows;
  if (validated !== undefined && row.validated_options !== validated) changes.validated_options = validated;
  if (validated !== undefined && (row.repeated_rows ?? null) !== repeated) changes.repeated_rows = repeated;
  if (Object.keys(changes).length === 0) return row;
  await updateImport(tx, batch, changes);
  return { ...row, ...changes } as ImportRow;
}

/**
 * Before a call reads its file: why it returns at once, when its batch is paused or cancelled (with
 * `whilePaused: 'wait'`, only once a wait for the resume ended otherwise); undefined to go on.
 */
export async function heldBefore(db: Db, batch: string, control: LoopControl): Promise<StopReason | undefined> {
  const stop = stopFor(await transact(db, (tx) => readImport(tx, batch)));
  return stop && control.stopped(stop);
}

/**
 * Starts or resumes import `batch` of the source with this digest: a new batch stores
 * next_index 0 and returns 0; the same digest returns the committed next_index; another digest
 * throws FINGERPRINT_MISMATCH and changes nothing.
 */
export async function begin(db: Db, batch: string, digest: string): Promise<number> {
  validateBatch(batch);
  validateDigest(digest);
  const row = await transact(db, (tx) => beginIn(tx, batch, digest, null));
  return Number(row.next_index);
}
