import type { EntityManager, QueryResult, QueryRunner } from 'typeorm';
import { classifyDatabaseError, errorCodes, ownStatementError } from '../core/database-errors';
import { AbandonedPipeline, type BoundStatement, type CopyAround, CopyText, type CopyRows, dialectOf } from '../dialect';
import { InvalidArgumentError, InvalidInputError } from '../core/errors';
import { run } from '../core/run-statement';
import { dataSourceOf } from '../core/transaction';
import type { Row } from './row';
import { activeCondition } from '../control/control-store';

const IMPORTS = 'checkpoint_imports';
export const ITEMS = 'checkpoint_import_items';
export const ITEM_COLUMNS = ['batch', 'id', 'value'];
// Rows per multi-row INSERT: 3 parameters each stays far below every driver's parameter limit.
const INSERT_ROWS = 300;
// Ids per `IN (…)` lookup.
const LOOKUP_IDS = 500;
export const MAX_ID_LENGTH = 512;
const MAX_BATCH_LENGTH = 255;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A `checkpoint_imports` row as the drivers return it (pg: int8 as string). */
export interface ImportRow {
  id: string;
  digest: string;
  next_index: number | string;
  total_rows: number | string | null;
  updated_at: number | string | null;
  /** Null for a batch made before these counts were kept. */
  written_rows: number | string | null;
  skipped_rows: number | string | null;
  chunks: number | string | null;
  started_at: number | string | null;
  /** 'active', 'paused' or 'cancelled' (see `pause`). */
  state: string;
  throttled_ms: number | string;
  /** The options hash of the pass 1 that validated the file (see `ImportResume1765843200000`). */
  validated_options: string | null;
  /** The byte offset of the next source row in the file, where the reader knew it (see `ImportOffset1765929600000`). */
  next_offset: number | string | null;
  /** The rows pass 1 found repeating a key, as `encodeRows` writes them (see `ImportRepeats1766016000000`). */
  repeated_rows: string | null;
}

/** What one committed chunk adds to its batch's counts: rows written and rows `map` skipped. */
export interface ChunkCounts {
  rows: number;
  skipped: number;
  /** Chunks the advance commits (default 1): several when pass 2's first rows load during pass 1. */
  chunks?: number;
  /** The byte offset in the file of the row after the chunk; null (the default) where the reader does not know it. */
  nextOffset?: number | null;
}

/** The counts of a batch that starts (again) from row 0. */
export function freshCounts(now = Date.now()): Record<string, number> {
  return { written_rows: 0, skipped_rows: 0, chunks: 0, started_at: now };
}

export function validateBatch(batch: unknown): asserts batch is string {
  if (typeof batch !== 'string' || batch.length === 0 || Array.from(batch).length > MAX_BATCH_LENGTH) {
    throw new InvalidArgumentError(`batch must be a non-empty string of at most ${MAX_BATCH_LENGTH} characters.`);
  }
}

export function validateDigest(digest: unknown): asserts digest is string {
  if (typeof digest !== 'string' || digest.length === 0 || digest.length > 64) {
    throw new InvalidArgumentError('digest must be a non-empty string of at most 64 characters (sourceDigest gives 64 hex digits).');
  }
}

/**
 * The built-in table holds ids of at most 512 characters of well-formed text without U+0000
 * (PostgreSQL text cannot hold U+0000 or lone surrogates): refused the same way on every driver.
 */
export function checkStorableId(id: string, index: number): void {
  if (id.length > MAX_ID_LENGTH && Array.from(id).length > MAX_ID_LENGTH) {
    throw new InvalidInputError(
      `Row ${index}: id is longer than ${MAX_ID_LENGTH} characters, the limit of checkpoint_import_items.`,
      index,
    );
  }
  if (id.includes('\u0000') || LONE_SURROGATE.test(id)) {
    throw new InvalidInputError(`Row ${index}: id contains U+0000 or a lone surrogate, which the database cannot store.`, index);
  }
}

function sqlOf(tx: EntityManager) {
  return dialectOf(dataSourceOf(tx));
}

/** Creates the import row unless it exists (never overwriting a concurrent creator's row). */
export async function insertImport(tx: EntityManager, batch: string, digest: string, totalRows: number | null): Promise<void> {
  const dialect = sqlOf(tx);
  const now = Date.now();
  const counts = freshCounts(now);
  await run(
    tx,
    dialect.insertIgnore(IMPORTS, ['id', 'digest', 'next_index', 'total_rows', 'updated_at', ...Object.keys(counts)], ['id']),
    [batch, digest, 0, totalRows, now, ...Object.values(counts)],
    `creating import "${batch}"`,
  );
}

/** Reads the import row and locks it until the transaction ends (on SQLite: the write lock, taken first). */
export async function lockImport(tx: EntityManager, batch: string): Promise<ImportRow | undefined> {
  const lock = sqlOf(tx).lockRow(IMPORTS, 'id');
  if (lock.before) await run(tx, lock.before, [batch], `locking import "${batch}"`);
  const rows = await run<ImportRow[]>(tx, lock.select, [batch], `locking import "${batch}"`);
  return rows[0];
}

export async function readImport(tx: EntityManager, batch: string): Promise<ImportRow | undefined> {
  const dialect = sqlOf(tx);
  const rows = await run<ImportRow[]>(
    tx,
    dialect.sql(`SELECT * FROM ${dialect.quote(IMPORTS)} WHERE ${dialect.quote('id')} = ?`),
    [batch],
    `reading import "${batch}"`,
  );
  return rows[0];
}

/** Sets columns of one import row; `updated_at` is always refreshed. */
export async function updateImport(tx: EntityManager, batch: string, values: Record<string, unknown>): Promise<void> {
  const dialect = sqlOf(tx);
  const entries = Object.entries({ ...values, updated_at: Date.now() });
  await run(
    tx,
    dialect.sql(
      `UPDATE ${dialect.quote(IMPORTS)} SET ${entries.map(([column]) => `${dialect.quote(column)} = ?`).join(', ')} WHERE ${dialect.quote('id')} = ?`,
    ),
    [...entries.map(([, value]) => value), batch],
    `updating import "${batch}"`,
  );
}

/**
 * Advances the checkpoint from `start` to `next` only if it is at `start` under `digest` and the
 * batch is active: one statement that checks, writes and locks the row for the rest of the
 * transaction. False when the row is not in that state (the caller reads it to say why: another
 * runner went ahead, a pause or a cancel).
 */
export async function advanceImport(
  tx: EntityManager,
  batch: string,
  digest: string,
  start: number,
  next: number,
  counts: ChunkCounts = { rows: next - start, skipped: 0 },
): Promise<boolean> {
  const { sql, parameters } = advanceStatement(tx, batch, digest, start, next, counts);
  try {
    const result = (await tx.queryRunner!.query(sql, parameters, true)) as QueryResult;
    return Number(result.affected ?? 0) > 0;
  } catch (error) {
    throw ownStatementError(error, `updating import "${batch}"`);
  }
}

/**
 * The assignments that count a committed chunk, in the statement that moves its checkpoint (no
 * extra round trip). NULL counts (a batch from before they were kept) stay NULL.
 */
function chunkCountAssignments(q: (column: string) => string): string {
  const counts = ['written_rows', 'skipped_rows', 'chunks'].map((column) => `${q(column)} = ${q(column)} + ?`);
  return [...counts, `${q('next_offset')} = ?`].join(', ');
}

/** The parameters of `chunkCountAssignments`. */
function chunkCountParameters(counts: ChunkCounts): (number | null)[] {
  return [counts.rows, counts.skipped, counts.chunks ?? 1, counts.nextOffset ?? null];
}

/** The statement of `advanceImport`. */
function advanceStatement(
  tx: EntityManager,
  batch: string,
  digest: string,
  start: number,
  next: number,
  counts: ChunkCounts,
): BoundStatement {
  const dialect = sqlOf(tx);
  const q = (column: string) => dialect.quote(column);
  return {
    sql: dialect.sql(
      `UPDATE ${q(IMPORTS)} SET ${q('next_index')} = ?, ${q('updated_at')} = ?, ${chunkCountAssignments(q)} ` +
        `WHERE ${q('id')} = ? AND ${q('next_index')} = ? AND ${q('digest')} = ? AND ${activeCondition(dialect)}`,
    ),
    parameters: [next, Date.now(), ...chunkCountParameters(counts), batch, start, digest],
  };
}

/** In `tx`, with the import locked at its checkpoint: moves it to `next` and counts the chunk. */
export async function countedAdvance(tx: EntityManager, batch: string, next: number, counts: ChunkCounts): Promise<void> {
  const dialect = sqlOf(tx);
  const q = (column: string) => dialect.quote(column);
  await run(
    tx,
    dialect.sql(
      `UPDATE ${q(IMPORTS)} SET ${q('next_index')} = ?, ${q('updated_at')} = ?, ${chunkCountAssignments(q)} WHERE ${q('id')} = ?`,
    ),
    [next, Date.now(), ...chunkCountParameters(counts), batch],
    `updating import "${batch}"`,
  );
}

/** The first fields of every row of `batch` in the built-in table, in COPY text form. */
export function copyRowPrefix(batch: string): Buffer {
  const prefix = new CopyText();
  prefix.text(batch);
  prefix.tab();
  return prefix.take().bytes;
}

// What the asserting advance fails with when the import is not at the chunk's start.
export const NOT_AT_START = '22012';
// PostgreSQL's invalid_sql_statement_name: a named statement the connection no longer holds.
export const UNKNOWN_PREPARED_STATEMENT = '26000';

/**
 * `advanceImport` as a statement that fails (division by zero, SQLSTATE 22012) when it changes no
 * row: in a pipeline that stops everything after it, COMMIT included, so rows never commit without
 * their checkpoint. With `asynchronous`, the same statement makes the transaction's commit
 * asynchronous (`set_config`, where the dialect has it): one statement fewer per chunk. PostgreSQL's
 * SQL: the bulk path (`copyRows`) exists there only.
 */
export function assertingAdvance(
  tx: EntityManager,
  batch: string,
  digest: string,
  start: number,
  next: number,
  counts: ChunkCounts = { rows: next - start, skipped: 0 },
  asynchronous = false,
): BoundStatement {
  const { sql, parameters } = advanceStatement(tx, batch, digest, start, next, counts);
  const unflushed = asynchronous ? sqlOf(tx).asynchronousCommitExpression : undefined;
  return {
    sql: `WITH advanced AS (${sql} RETURNING 1) SELECT 1 / COUNT(*)${unflushed ? `, ${unflushed}` : ''} FROM advanced`,
    parameters,
    prepare: true,
  };
}

/**
 * `advanceImport` and the bulk insert of `rows` (written by a CopyText, or with `binary` a
 * CopyBinary, in the order batch, id, value) in one round trip; false, with the rows not to be
 * kept (roll back), when the import is not at `start`. A duplicate key is INVALID_INPUT for the
 * range (the caller may name the row). With `asynchronous`, the transaction (which the caller must
 * own) commits without waiting for its WAL flush where the dialect can (see `assertingAdvance`).
 */
export async function copyAdvancing(
  tx: EntityManager,
  batch: string,
  digest: string,
  start: number,
  rows: CopyRows,
  asynchronous = false,
  binary = false,
  nextOffset: number | null = null,
): Promise<boolean> {
  const dialect = sqlOf(tx);
  try {
    const counts = { rows: rows.rows, skipped: 0, nextOffset };
    const before = [assertingAdvance(tx, batch, digest, start, start + rows.rows, counts, asynchronous)];
    await dialect.copyRows!(tx.queryRunner!, ITEMS, ITEM_COLUMNS, rows, { before, binary });
    return true;
  } catch (error) {
    if (errorCodes(error).includes(NOT_AT_START)) return false;
    throw insertFailure(error, batch, rows.rows, start);
  }
}

export const BEGIN: BoundStatement = { sql: 'BEGIN', parameters: [], prepare: true };
export const COMMIT: BoundStatement = { sql: 'COMMIT', parameters: [], prepare: true };

/**
 * One chunk of the bulk path as a transaction of its own on `runner` (a connection the import
 * holds, outside any transaction): BEGIN, the checkpoint advance, the COPY of `rows` and COMMIT in
 * one round trip (with `asynchronous`, a COMMIT that does not wait for the WAL flush). False,
 * nothing kept, when the import is not at `start`. On any error the transaction is rolled back
 * and the error raised as `copyAdvancing` raises it. `pipelined`: see `CopyAround.proceed` (an
 * abandoned chunk raises `AbandonedPipeline`, rolled back) and `CopyAround.binary`.
 */
export async function copyTransaction(
  runner: QueryRunner,
  batch: string,
  digest: string,
  start: number,
  rows: CopyRows,
  asynchronous = false,
  pipelined: Pick<CopyAround, 'proceed' | 'onSent' | 'binary'> = {},
  nextOffset: number | null = null,
): Promise<boolean> {
  const tx = runner.manager;
  const dialect = sqlOf(tx);
  const counts = { rows: rows.rows, skipped: 0, nextOffset };
  for (let attempt = 1; ; attempt++) {
    try {
      const before = [BEGIN, assertingAdvance(tx, batch, digest, start, start + rows.rows, counts, asynchronous)];
      await dialect.copyRows!(runner, ITEMS, ITEM_COLUMNS, rows, { before, after: [COMMIT], ...pipelined, prepare: true });
      return true;
    } catch (error) {
      // The server skipped what followed the failure, COMMIT included: the transaction is still open.
      await rollbackQuietly(runner);
      if (error instanceof AbandonedPipeline) throw error;
      const codes = errorCodes(error);
      if (codes.includes(NOT_AT_START)) return false;
      // The connection dropped its prepared statements (DEALLOCATE ALL, DISCARD ALL): the failed
      // pipeline forgot them, so the next one prepares them again.
      if (codes.includes(UNKNOWN_PREPARED_STATEMENT) && attempt === 1) continue;
      throw insertFailure(error, batch, rows.rows, start);
    }
  }
}

export async function rollbackQuietly(runner: QueryRunner): Promise<void> {
  try {
    await runner.query('ROLLBACK');
  } catch {
    // The connection is gone: the server discards the transaction itself.
  }
}

/** The ids among `ids` already stored for the batch. */
export async function storedIds(tx: EntityManager, batch: string, ids: string[]): Promise<Set<string>> {
  const dialect = sqlOf(tx);
  const found = new Set<string>();
  for (let i = 0; i < ids.length; i += LOOKUP_IDS) {
    const part = ids.slice(i, i + LOOKUP_IDS);
    const rows = await run<{ id: string }[]>(
      tx,
      dialect.sql(
        `SELECT ${dialect.quote('id')} FROM ${dialect.quote(ITEMS)} WHERE ${dialect.quote('batch')} = ? AND ${dialect.quote('id')} IN (${part.map(() => '?').join(', ')})`,
      ),
      [batch, ...part],
      `checking ids of import "${batch}"`,
    );
    for (const row of rows) found.add(row.id);
  }
  return found;
}

/** Inserts rows, `INSERT_ROWS` per statement. */
export async function insertItems(tx: EntityManager, batch: string, rows: Row[], start: number): Promise<void> {
  for (let i = 0; i < rows.length; i += INSERT_ROWS) {
    await insertItemRange(tx, batch, rows.slice(i, i + INSERT_ROWS), start + i);
  }
}

/**
 * Inserts a chunk the fastest way the dialect has (COPY on PostgreSQL, else multi-row INSERTs),
 * without looking for stored ids first: a duplicate key fails the statement (and the transaction).
 */
export async function bulkInsertItems(tx: EntityManager, batch: string, rows: Row[], start: number): Promise<void> {
  const dialect = sqlOf(tx);
  if (!dialect.copyRows) return insertItems(tx, batch, rows, start);
  const text = new CopyText();
  const prefix = copyRowPrefix(batch);
  for (const row of rows) {
    text.raw(prefix);
    text.text(row.id);
    text.tab();
    text.integer(row.value);
    text.endRow();
  }
  try {
    await dialect.copyRows(tx.queryRunner!, ITEMS, ITEM_COLUMNS, text.take());
  } catch (error) {
    throw insertFailure(error, batch, rows.length, start);
  }
}

/** A duplicate key is the caller's input error, not a database failure. */
function insertFailure(error: unknown, batch: string, rows: number, start: number): Error {
  if (classifyDatabaseError(error) === 'unique') {
    return new InvalidInputError(
      `Rows ${start}–${start + rows - 1}: an id is already stored in import "${batch}".`,
      rows === 1 ? start : undefined,
      { cause: error },
    );
  }
  return ownStatementError(error, `inserting rows of import "${batch}"`);
}

/** Inserts rows in one statement; a duplicate key is the caller's input error, not a database failure. */
export async function insertItemRange(tx: EntityManager, batch: string, rows: Row[], start: number): Promise<void> {
  const dialect = sqlOf(tx);
  const columns = ['batch', 'id', 'value'].map((column) => dialect.quote(column)).join(', ');
  const parameters: unknown[] = [];
  for (const row of rows) parameters.push(batch, row.id, row.value);
  try {
    await tx.query(
      dialect.sql(`INSERT INTO ${dialect.quote(ITEMS)} (${columns}) VALUES ${rows.map(() => '(?, ?, ?)').join(', ')}`),
      parameters,
    );
  } catch (error) {
    throw insertFailure(error, batch, rows.length, start);
  }
}

export async function selectItems(tx: EntityManager, batch: string): Promise<{ id: string; value: number | string }[]> {
  const dialect = sqlOf(tx);
  return run(
    tx,
    dialect.sql(
      `SELECT ${dialect.quote('id')}, ${dialect.quote('value')} FROM ${dialect.quote(ITEMS)} WHERE ${dialect.quote('batch')} = ?`,
    ),
    [batch],
    `reading rows of import "${batch}"`,
  );
}

export async function deleteItems(tx: EntityManager, batch: string): Promise<void> {
  const dialect = sqlOf(tx);
  await run(
    tx,
    dialect.sql(`DELETE FROM ${dialect.quote(ITEMS)} WHERE ${dialect.quote('batch')} = ?`),
    [batch],
    `deleting rows of import "${batch}"`,
  );
}
