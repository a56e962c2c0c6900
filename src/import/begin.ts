import type { EntityManager } from 'typeorm';
import { FingerprintMismatchError } from '../core/errors';
import { type Db, transact } from '../core/transaction';
import { type ImportRow, insertImport, lockImport, updateImport, validateBatch, validateDigest } from './import-store';

export function fingerprintMismatch(batch: string, stored: string, given: string): FingerprintMismatchError {
  return new FingerprintMismatchError(
    `Import "${batch}" was started from a source with digest ${stored}, not ${given}: it is another file. ` +
      'Resume it with the original file, use another batch id, or replace the import explicitly (CLI: --replace).',
  );
}

/**
 * In `tx`: creates the import bound to `digest` or, if it exists, checks the digest and locks the
 * row. Returns the stored row. `totalRows` is recorded when known.
 */
export async function beginIn(tx: EntityManager, batch: string, digest: string, totalRows: number | null): Promise<ImportRow> {
  // The insert is a write, so on SQLite it also takes the write lock before anything is read.
  await insertImport(tx, batch, digest, totalRows);
  const row = (await lockImport(tx, batch)) as ImportRow;
  if (row.digest !== digest) throw fingerprintMismatch(batch, row.digest, digest);
  if (totalRows !== null && row.total_rows === null) {
    await updateImport(tx, batch, { total_rows: totalRows });
    return { ...row, total_rows: totalRows };
  }
  return row;
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
