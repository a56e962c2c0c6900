import type { EntityManager } from 'typeorm';
import { dialectOf } from '../dialect';
import { run } from '../core/run-statement';
import { compareCodePoints } from '../jobs/status';
import { type Db, dataSourceOf, transact } from '../core/transaction';
import type { ImportRow as StoredImportRow } from '../import/import-store';
import { controlStateOf } from '../control/job-state';

/** What the CLI shows of a digest-guarded import batch (a `checkpoint_imports` row). */
export interface ImportBatchStatus {
  batch: string;
  /** SHA-256 hex of the source bytes the batch is bound to. */
  digest: string;
  /** Rows committed so far (the next row index to import). */
  nextIndex: number;
  /** Rows in the source once validated; null when unknown (e.g. a batch made by `begin`). */
  totalRows: number | null;
  done: boolean;
  updatedAt: number | null;
  /** Invalid rows recorded in `checkpoint_import_rejects` (records mode with invalid rows skipped). */
  invalid: number;
  // Counted by every committed chunk; null for a batch made before they were kept.
  /** Rows written (built-in rows, records written or handed to a handler). */
  rows: number | null;
  /** Source rows `map` skipped. */
  skipped: number | null;
  chunks: number | null;
  startedAt: number | null;
  /** `'done'` once every row is committed, else `'active'`, `'paused'` or `'cancelled'`. */
  state: 'active' | 'paused' | 'cancelled' | 'done';
  /** Milliseconds the import spent waiting on a `throttle`. */
  throttledMs: number;
}

/** A `checkpoint_imports` row with its count of rejects. */
interface ImportRow extends StoredImportRow {
  rejects: number | string;
}

const nullableNumber = (value: number | string | null): number | null => (value === null ? null : Number(value));

const IMPORTS = 'checkpoint_imports';
const ITEMS = 'checkpoint_import_items';
const REJECTS = 'checkpoint_import_rejects';
const IMPORT_COLUMNS = [
  'id',
  'digest',
  'next_index',
  'total_rows',
  'updated_at',
  'written_rows',
  'skipped_rows',
  'chunks',
  'started_at',
  'state',
  'throttled_ms',
];

function toStatus(row: ImportRow): ImportBatchStatus {
  const nextIndex = Number(row.next_index);
  const totalRows = row.total_rows === null ? null : Number(row.total_rows);
  const done = totalRows !== null && nextIndex >= totalRows;
  return {
    batch: row.id,
    digest: row.digest,
    nextIndex,
    totalRows,
    done: totalRows !== null && nextIndex >= totalRows,
    updatedAt: nullableNumber(row.updated_at),
    invalid: Number(row.rejects),
    rows: nullableNumber(row.written_rows),
    skipped: nullableNumber(row.skipped_rows),
    chunks: nullableNumber(row.chunks),
    startedAt: nullableNumber(row.started_at),
    state: done ? 'done' : controlStateOf(row.state),
    throttledMs: Number(row.throttled_ms ?? 0),
  };
}

async function selectImports(tx: EntityManager, batch?: string): Promise<ImportRow[]> {
  const dialect = dialectOf(dataSourceOf(tx));
  const q = dialect.quote;
  const where = batch === undefined ? '' : ` WHERE i.${q('id')} = ?`;
  const rejects = `(SELECT COUNT(*) FROM ${q(REJECTS)} r WHERE r.${q('batch')} = i.${q('id')}) AS ${q('rejects')}`;
  return run<ImportRow[]>(
    tx,
    dialect.sql(`SELECT ${IMPORT_COLUMNS.map((column) => `i.${q(column)}`).join(', ')}, ${rejects} FROM ${q(IMPORTS)} i${where}`),
    batch === undefined ? [] : [batch],
    batch === undefined ? 'listing imports' : `reading import "${batch}"`,
  );
}

/** The import batch, or null when there is none by that id. */
export async function importBatchStatus(db: Db, batch: string): Promise<ImportBatchStatus | null> {
  const rows = await transact(db, (tx) => selectImports(tx, batch));
  return rows.length > 0 ? toStatus(rows[0]) : null;
}

/** Every import batch, ordered by id in code point order. */
export async function listImportBatches(db: Db): Promise<ImportBatchStatus[]> {
  const rows = await transact(db, (tx) => selectImports(tx));
  return rows.map(toStatus).sort((a, b) => compareCodePoints(a.batch, b.batch));
}

/**
 * Forgets an import batch in one transaction: its checkpoint row and its rows in the built-in
 * table (rows a `handler` wrote to application tables are the application's). Returns how many
 * built-in rows were deleted, or null when there was no such batch.
 */
export async function deleteImportBatch(db: Db, batch: string): Promise<number | null> {
  return transact(db, async (tx) => {
    const dialect = dialectOf(dataSourceOf(tx));
    const q = dialect.quote;
    // Lock the batch row first (on SQLite: take the write lock) so a concurrent import cannot commit
    // a chunk between the count and the deletes.
    const lock = dialect.lockRow(IMPORTS, 'id');
    if (lock.before) await run(tx, lock.before, [batch], `locking import "${batch}"`);
    const existed = (await run<ImportRow[]>(tx, lock.select, [batch], `locking import "${batch}"`)).length > 0;
    await run(tx, dialect.sql(`DELETE FROM ${q(IMPORTS)} WHERE ${q('id')} = ?`), [batch], `resetting import "${batch}"`);
    const counted = await run<{ n: number | string }[]>(
      tx,
      dialect.sql(`SELECT COUNT(*) AS ${q('n')} FROM ${q(ITEMS)} WHERE ${q('batch')} = ?`),
      [batch],
      `counting the rows of import "${batch}"`,
    );
    await run(tx, dialect.sql(`DELETE FROM ${q(ITEMS)} WHERE ${q('batch')} = ?`), [batch], `deleting the rows of import "${batch}"`);
    await run(tx, dialect.sql(`DELETE FROM ${q(REJECTS)} WHERE ${q('batch')} = ?`), [batch], `deleting the rejects of import "${batch}"`);
    const deleted = Number(counted[0].n);
    return existed || deleted > 0 ? deleted : null;
  });
}

/** "12000/200000 rows (6.0%)", or "12000 rows" when the total is not known. */
export function importPosition(batch: ImportBatchStatus): string {
  if (batch.totalRows === null) return `${batch.nextIndex} rows`;
  const percent = batch.totalRows === 0 ? 100 : (100 * batch.nextIndex) / batch.totalRows;
  return `${batch.nextIndex}/${batch.totalRows} rows (${percent.toFixed(1)}%)`;
}

/** "1200 written, 30 skipped, 4 invalid": a count not kept for the batch shows as "—". */
export function importCounts(batch: ImportBatchStatus): string {
  return `${batch.rows ?? '—'} written, ${batch.skipped ?? '—'} skipped, ${batch.invalid} invalid`;
}
