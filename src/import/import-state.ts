import { compareCodePoints } from '../jobs/status';
import { type Db, transact } from '../core/transaction';
import { readImport, selectItems, validateBatch } from './import-store';

/** The committed next_index of import `batch`, or null if there is no such import. */
export async function checkpoint(db: Db, batch: string): Promise<number | null> {
  validateBatch(batch);
  const row = await transact(db, (tx) => readImport(tx, batch));
  return row ? Number(row.next_index) : null;
}

/** The `[id, value]` pairs stored for `batch` (only that batch), by id in Unicode code-point order on every driver. */
export async function values(db: Db, batch: string): Promise<[string, number][]> {
  validateBatch(batch);
  const rows = await transact(db, (tx) => selectItems(tx, batch));
  // Sorted here, not by ORDER BY: database collations differ from code-point order.
  return rows.map((row): [string, number] => [row.id, Number(row.value)]).sort((a, b) => compareCodePoints(a[0], b[0]));
}
