import { type Db, transact } from '../core/transaction';
import { deleteItems, freshCounts, insertImport, lockImport, updateImport, validateBatch, validateDigest } from './import-store';
import { deleteRejects } from './records/write-records';

/**
 * The explicit override of the digest guard (CLI `--replace`): in one transaction, deletes the
 * batch's rows from `checkpoint_import_items` and its rejects, binds the batch to `digest` and restarts it at 0
 * (active again, when it was paused or cancelled).
 * Rows a `handler` wrote to the application's own tables are the application's to undo.
 */
export async function replaceImport(db: Db, batch: string, digest: string): Promise<void> {
  validateBatch(batch);
  validateDigest(digest);
  await transact(db, async (tx) => {
    await insertImport(tx, batch, digest, null);
    await lockImport(tx, batch);
    await deleteItems(tx, batch);
    await deleteRejects(tx, batch);
    // A fresh start: a cancelled or paused batch runs again.
    await updateImport(tx, batch, {
      digest,
      next_index: 0,
      next_offset: null,
      total_rows: null,
      ...freshCounts(),
      state: 'active',
      throttled_ms: 0,
    });
  });
}
