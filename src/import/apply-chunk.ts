import type { EntityManager } from 'typeorm';
import { CursorMismatchError, InvalidArgumentError, InvalidInputError } from '../core/errors';
import { type Db, transact } from '../core/transaction';
import { traced } from '../core/telemetry';
import { stopFor, type StopReason } from '../control/job-state';
import { duplicateId } from './parse-rows';
import {
  checkStorableId,
  countedAdvance,
  type ImportRow,
  insertItemRange,
  insertItems,
  lockImport,
  storedIds,
  validateBatch,
} from './import-store';
import { type Row, rowFromObject } from './row';

/** Checks rows handed over as JavaScript values the way parseRows checks a source; `start` numbers them. */
export function checkRows(rows: unknown, start: number): Row[] {
  if (!Array.isArray(rows)) throw new InvalidArgumentError('rows must be an array of { id, value } objects.');
  const seen = new Set<string>();
  return rows.map((item, i) => {
    const row = rowFromObject(item, start + i);
    if (seen.has(row.id)) throw duplicateId(row.id, start + i);
    seen.add(row.id);
    checkStorableId(row.id, start + i);
    return row;
  });
}

export function cursorMismatch(batch: string, stored: ImportRow | undefined, start: number): CursorMismatchError {
  return new CursorMismatchError(
    stored === undefined
      ? `Import "${batch}" does not exist: call begin() first.`
      : `Import "${batch}" is at row ${Number(stored.next_index)}, not ${start}: apply the chunk that starts at the committed checkpoint.`,
  );
}

/** Locks the import and checks that it is at `start`. */
export async function lockAt(tx: EntityManager, batch: string, start: number): Promise<ImportRow> {
  const row = await lockImport(tx, batch);
  if (row === undefined || Number(row.next_index) !== start) throw cursorMismatch(batch, row, start);
  return row;
}

/** INVALID_INPUT for the first of `rows` (numbered from `start`) whose id the batch already holds, or null. */
export async function storedIdClash(tx: EntityManager, batch: string, start: number, rows: Row[]): Promise<InvalidInputError | null> {
  const stored = await storedIds(
    tx,
    batch,
    rows.map((row) => row.id),
  );
  const clash = rows.findIndex((row) => stored.has(row.id));
  if (clash < 0) return null;
  return new InvalidInputError(
    `Row ${start + clash}: id ${JSON.stringify(rows[clash].id)} is already stored in import "${batch}".`,
    start + clash,
  );
}

/** In `tx`, with the import locked at `start`: stores the rows in the built-in table and advances the checkpoint. */
export async function storeChunk(
  tx: EntityManager,
  batch: string,
  start: number,
  rows: Row[],
  fault?: (index: number) => void,
): Promise<number> {
  // Checked rather than left to the primary key: the sqlite3 driver reports every constraint the same way.
  const clash = await storedIdClash(tx, batch, start, rows);
  if (clash) throw clash;
  if (fault === undefined) {
    await insertItems(tx, batch, rows, start);
  } else {
    for (let i = 0; i < rows.length; i++) {
      await insertItemRange(tx, batch, [rows[i]], start + i);
      fault(start + i);
    }
  }
  const next = start + rows.length;
  await countedAdvance(tx, batch, next, { rows: rows.length, skipped: 0 });
  return next;
}

/**
 * Applies rows `start…` of import `batch` in one transaction, only when the committed checkpoint
 * is `start` (else CURSOR_MISMATCH): inserts them in order, calling `fault(start + i)` after each
 * insert, then stores next_index = start + rows.length and returns it. If anything throws, no row
 * of the chunk stays, the checkpoint is unchanged and the error re-raises unchanged.
 */
export async function applyChunk(db: Db, batch: string, start: number, rows: Row[], fault?: (index: number) => void): Promise<number> {
  validateBatch(batch);
  if (typeof start !== 'number' || !Number.isSafeInteger(start) || start < 0) {
    throw new InvalidArgumentError(`applyChunk: start must be a non-negative integer, got ${String(start)}.`);
  }
  if (fault !== undefined && typeof fault !== 'function') throw new InvalidArgumentError('applyChunk: fault must be a function.');
  return (await applyChecked(db, batch, start, checkRows(rows, start), fault, false)).next;
}

/**
 * `applyChunk` of rows already checked. With `unlessStopped` (a loop's chunk: `importAll`), a batch
 * found paused or cancelled by the lock is left as it is: nothing applied, the reason returned.
 */
export async function applyChecked(
  db: Db,
  batch: string,
  start: number,
  rows: Row[],
  fault: ((index: number) => void) | undefined,
  unlessStopped: boolean,
): Promise<{ next: number; stopped?: StopReason }> {
  return traced('import.chunk', { job: batch, index: start }, async (span) => {
    const applied = await transact(db, async (tx) => {
      const stopped = stopFor(await lockAt(tx, batch, start));
      if (unlessStopped && stopped) return { next: start, stopped };
      return { next: await storeChunk(tx, batch, start, rows, fault) };
    });
    span.committed(applied.stopped ? 0 : rows.length, !applied.stopped);
    return applied;
  });
}
