import type { EntityManager, QueryRunner } from 'typeorm';
import { classifyDatabaseError, errorCodes, ownStatementError } from '../../core/database-errors';
import { InvalidInputError } from '../../core/errors';
import { run } from '../../core/run-statement';
import { dataSourceOf } from '../../core/transaction';
import {
  AbandonedPipeline,
  type BoundStatement,
  CopyBinary,
  type CopyAround,
  type CopyRows,
  CopyText,
  dialectOf,
  qualifiedTable,
  type RecordConflict,
  type WireType,
} from '../../dialect';
import { assertingAdvance, BEGIN, COMMIT, NOT_AT_START, rollbackQuietly, UNKNOWN_PREPARED_STATEMENT } from '../import-store';
import type { ColumnValue } from './column-values';
import type { Evaluated } from './record-rows';
import type { TargetTable } from './target-table';

export type RecordRow = Extract<Evaluated, { kind: 'row' }>;

/** An invalid row as `checkpoint_import_rejects` keeps it. */
export interface Reject {
  index: number;
  reason: string;
  raw: string;
}

const REJECTS = 'checkpoint_import_rejects';
const REJECT_COLUMNS = ['batch', 'row_index', 'reason', 'raw'];
const MAX_RAW_BYTES = 4096;
// Bound values per statement: far below every driver's limit (SQLite's 32,766 the lowest).
const PARAMETERS_PER_STATEMENT = 30000;
const ROWS_PER_STATEMENT = 500;

/** The row's source text as stored: at most 4,096 UTF-8 bytes, cut at a character boundary. */
export function rawText(raw: string, textHoldsNul: boolean): string {
  const text = textHoldsNul ? raw : raw.replace(/\u0000/g, '\uFFFD');
  if (text.length * 3 <= MAX_RAW_BYTES) return text;
  const bytes = Buffer.from(text);
  if (bytes.length <= MAX_RAW_BYTES) return text;
  let end = MAX_RAW_BYTES;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return bytes.toString('utf8', 0, end);
}

function statementsOf<T>(items: T[], perItem: number): T[][] {
  const size = Math.max(1, Math.min(ROWS_PER_STATEMENT, Math.floor(PARAMETERS_PER_STATEMENT / Math.max(1, perItem))));
  const parts: T[][] = [];
  for (let i = 0; i < items.length; i += size) parts.push(items.slice(i, i + size));
  return parts;
}

/** Stores a chunk's invalid rows in the chunk's transaction. */
export async function writeRejects(tx: EntityManager, batch: string, rejects: Reject[]): Promise<void> {
  const dialect = dialectOf(dataSourceOf(tx));
  for (const part of statementsOf(rejects, REJECT_COLUMNS.length)) {
    const parameters: unknown[] = [];
    for (const reject of part) parameters.push(batch, reject.index, reject.reason, rawText(reject.raw, dialect.storable.textHoldsNul));
    await run(
      tx,
      dialect.insertRecords({ name: REJECTS }, REJECT_COLUMNS, part.length),
      parameters,
      `recording rejects of import "${batch}"`,
    );
  }
}

/** The stored rejects of a batch in row order, `limit` at most. */
export async function readRejects(tx: EntityManager, batch: string, limit: number): Promise<Reject[]> {
  const dialect = dialectOf(dataSourceOf(tx));
  const q = (name: string) => dialect.quote(name);
  const rows = await run<{ row_index: number | string; reason: string; raw: string }[]>(
    tx,
    dialect.sql(
      `SELECT ${q('row_index')}, ${q('reason')}, ${q('raw')} FROM ${q(REJECTS)} WHERE ${q('batch')} = ? ORDER BY ${q('row_index')} LIMIT ${limit}`,
    ),
    [batch],
    `reading rejects of import "${batch}"`,
  );
  return rows.map((row) => ({ index: Number(row.row_index), reason: row.reason, raw: row.raw }));
}

/** How many rejects a batch has stored. */
export async function countRejects(tx: EntityManager, batch: string): Promise<number> {
  const dialect = dialectOf(dataSourceOf(tx));
  const q = (name: string) => dialect.quote(name);
  const rows = await run<{ count: number | string }[]>(
    tx,
    dialect.sql(`SELECT COUNT(*) AS ${q('count')} FROM ${q(REJECTS)} WHERE ${q('batch')} = ?`),
    [batch],
    `counting rejects of import "${batch}"`,
  );
  return Number(rows[0]?.count ?? 0);
}

export async function deleteRejects(tx: EntityManager, batch: string): Promise<void> {
  const dialect = dialectOf(dataSourceOf(tx));
  await run(
    tx,
    dialect.sql(`DELETE FROM ${dialect.quote(REJECTS)} WHERE ${dialect.quote('batch')} = ?`),
    [batch],
    `deleting rejects of import "${batch}"`,
  );
}

/** How a chunk's rows go into the target table. */
export interface RowWrite {
  target: TargetTable;
  /** Absent: a row whose key exists fails the chunk. */
  conflict?: RecordConflict;
  /** For naming the row whose key exists already: the key's columns (the given key, else the primary key). */
  keyColumns: string[];
  /** Statements to run first in the COPY's round trip (`SET LOCAL synchronous_commit = off`). */
  before: BoundStatement[];
}

/** A chunk's rows written as COPY text already, the fields of each in `columns` order. */
export interface CopiedRows {
  rows: CopyRows;
  columns: number[];
  /** Written by a `CopyBinary`. */
  binary?: boolean;
}

/** What one chunk writes: source rows `start` … `start + count − 1`, as rows and rejects. */
export interface ChunkRows {
  start: number;
  count: number;
  rows: RecordRow[];
  rejects: Reject[];
  /** The rows as COPY text, written as they were read (`csvCopyGroups`). */
  copied: CopiedRows | null;
  /** The byte offset of the source row after the chunk, kept with its checkpoint; null where not known. */
  nextOffset: number | null;
}

/** Where a chunk's rows are written as they are read: COPY text, or the binary format where every column has one. */
export type RowCopy = CopyText | CopyBinary;

/** The rows fill the same columns, so one COPY takes them all. */
function sameColumns(rows: RecordRow[]): boolean {
  const first = rows[0]?.columns.join(',');
  return rows.every((row) => row.columns.join(',') === first);
}

/** True when a chunk can go as one COPY round trip (`copyChunkTransaction`). */
export function copiesInOneRoundTrip(tx: EntityManager, rows: RecordRow[], write: RowWrite): boolean {
  return dialectOf(dataSourceOf(tx)).copyRows !== undefined && !write.conflict && sameColumns(rows);
}

/**
 * One chunk as a transaction of its own on `runner` (a connection the import holds, outside any
 * transaction): BEGIN, the checkpoint advance, the rejects, the COPY of the rows and COMMIT in one
 * round trip. False, nothing kept, when the import is not at `start`; on any error the transaction
 * is rolled back (the server skipped what followed the failure, COMMIT included). `pipelined`: see
 * `CopyAround.proceed` (an abandoned chunk raises `AbandonedPipeline`, rolled back).
 */
export async function copyChunkTransaction(
  runner: QueryRunner,
  batch: string,
  digest: string,
  chunk: ChunkRows,
  write: RowWrite,
  pipelined: Pick<CopyAround, 'proceed' | 'onSent'> = {},
): Promise<boolean> {
  const { start, count, rows, rejects, copied: written, nextOffset } = chunk;
  const tx = runner.manager;
  const dialect = dialectOf(dataSourceOf(tx));
  const { target } = write;
  const columns = written?.columns ?? rows[0]?.columns ?? [];
  let copied = written?.rows;
  if (!copied) {
    const text = new CopyText();
    for (const row of rows) copyRow(text, row.values, columns);
    copied = text.take();
  }
  // Every source row of the chunk is written, rejected or skipped by `map`.
  const counts = { rows: copied.rows, skipped: count - copied.rows - rejects.length, nextOffset };
  const rejected: BoundStatement[] = statementsOf(rejects, REJECT_COLUMNS.length).map((part) => ({
    sql: dialect.insertRecords({ name: REJECTS }, REJECT_COLUMNS, part.length),
    parameters: part.flatMap((reject) => [batch, reject.index, reject.reason, rawText(reject.raw, dialect.storable.textHoldsNul)]),
  }));
  for (let attempt = 1; ; attempt++) {
    try {
      const before = [BEGIN, ...write.before, assertingAdvance(tx, batch, digest, start, start + count, counts), ...rejected];
      const around = { before, after: [COMMIT], ...pipelined, binary: written?.binary === true, prepare: true };
      await dialect.copyRows!(
        runner,
        target.table,
        columns.map((at) => target.columns[at].name),
        copied,
        around,
      );
      return true;
    } catch (error) {
      await rollbackQuietly(runner);
      if (error instanceof AbandonedPipeline) throw error;
      const codes = errorCodes(error);
      if (codes.includes(NOT_AT_START)) return false;
      // The connection dropped its prepared statements (DEALLOCATE ALL): the next pipeline prepares them again.
      if (codes.includes(UNKNOWN_PREPARED_STATEMENT) && attempt === 1) continue;
      if (classifyDatabaseError(error) === 'unique') throw existingKey(rows, write, error);
      throw ownStatementError(error, `writing rows into "${target.table.name}"`);
    }
  }
}

/** Writes a chunk's rows in `tx`: COPY on PostgreSQL without a conflict mode, else multi-row INSERTs. */
export async function writeRows(tx: EntityManager, rows: RecordRow[], write: RowWrite): Promise<void> {
  const dialect = dialectOf(dataSourceOf(tx));
  const { target } = write;
  // Rows that fill different columns (JSON objects missing a field) go in separate statements.
  const groups = new Map<string, RecordRow[]>();
  for (const row of rows) {
    const signature = row.columns.join(',');
    const group = groups.get(signature);
    if (group) group.push(row);
    else groups.set(signature, [row]);
  }
  try {
    if (copiesInOneRoundTrip(tx, rows, write)) {
      const columns = rows[0].columns;
      const text = new CopyText();
      for (const row of rows) copyRow(text, row.values, columns);
      await dialect.copyRows!(
        tx.queryRunner!,
        target.table,
        columns.map((at) => target.columns[at].name),
        text.take(),
        { before: write.before },
      );
      return;
    }
    for (const statement of write.before) await tx.query(statement.sql, statement.parameters);
    for (const group of groups.values()) {
      const columns = group[0].columns;
      const names = columns.map((at) => target.columns[at].name);
      const conflict = write.conflict && { ...write.conflict, update: names.filter((name) => !write.conflict!.keyColumns.includes(name)) };
      let parts = statementsOf(group, columns.length);
      if (conflict?.mode === 'update') {
        const keys = conflict.keyColumns.map((name) => columns[names.indexOf(name)]);
        parts = parts.flatMap((part) => keysOnce(part, keys));
      }
      for (const part of parts) {
        const parameters: unknown[] = [];
        for (const row of part) for (const at of columns) parameters.push(dialect.bindable(row.values[at]));
        await tx.query(dialect.insertRecords(target.table, names, part.length, conflict), parameters);
      }
    }
  } catch (error) {
    if (!write.conflict && classifyDatabaseError(error) === 'unique') throw existingKey(rows, write, error);
    throw ownStatementError(error, `writing rows into "${target.table.name}"`);
  }
}

/**
 * `rows` in statements that hold each key (the values at `keys`) once: a key repeated in the file (`key: false`) is
 * updated by the next statement, as row by row (PostgreSQL's `ON CONFLICT DO UPDATE` refuses to
 * touch a row twice in one statement).
 */
function keysOnce(rows: RecordRow[], keys: number[]): RecordRow[][] {
  const parts: RecordRow[][] = [];
  let part: RecordRow[] = [];
  let seen = new Set<string>();
  for (const row of rows) {
    const key = keys.map((at) => String(row.values[at])).join('\u0000');
    if (seen.has(key)) {
      parts.push(part);
      part = [];
      seen = new Set();
    }
    seen.add(key);
    part.push(row);
  }
  if (part.length > 0) parts.push(part);
  return parts;
}

const NULL_FIELD = Buffer.from('\\N');

/** A row's values as a row of COPY text (or binary: `wires`, by table column), fields in `columns` order. */
export function copyRow(copy: RowCopy, values: ColumnValue[], columns: number[], wires: (WireType | null)[] = []): void {
  if (copy instanceof CopyBinary) {
    copy.beginRow(columns.length);
    for (const at of columns) copyBinaryValue(copy, values[at], wires[at]!);
  } else {
    for (let c = 0; c < columns.length; c++) {
      if (c > 0) copy.tab();
      copyValue(copy, values[columns[c]]);
    }
  }
  copy.endRow();
}

/** One converted value (its canonical form: see `convertValue`) in the binary form of `wire`. */
export function copyBinaryValue(copy: CopyBinary, value: ColumnValue, wire: WireType): void {
  if (value === null) return copy.null();
  switch (wire) {
    case 'int2':
    case 'int4':
    case 'int8':
      return copy.integer(value as number | string, wire);
    case 'bool':
      return copy.boolean(value as boolean);
    case 'text':
      return copy.text(Buffer.from(String(value)));
    case 'uuid':
      return copy.uuid(Buffer.from(value as string, 'latin1'), 0);
    case 'date':
      return copy.date(Buffer.from(value as string, 'latin1'), 0);
    case 'numeric': {
      const bytes = Buffer.from(value as string, 'latin1');
      return copy.numeric(bytes, 0, bytes.length);
    }
    case 'timestamp':
    case 'timestamptz': {
      // The UTC wall time, `+00` after it for timestamptz.
      const text = value as string;
      const bytes = Buffer.from(text, 'latin1');
      return copy.timestamp(bytes, 0, text.endsWith('+00') ? bytes.length - 3 : bytes.length);
    }
  }
}

/** One converted value as a field of COPY text. */
export function copyValue(text: CopyText, value: ColumnValue): void {
  if (value === null) text.raw(NULL_FIELD);
  else if (typeof value === 'boolean') text.raw(value ? T : F);
  else text.text(typeof value === 'number' ? String(value) : value);
}

const T = Buffer.from('t');
const F = Buffer.from('f');

/** INVALID_INPUT for a chunk with a key the table holds already (`firstExistingKey` names the row once the chunk rolled back). */
function existingKey(rows: RecordRow[], write: RowWrite, cause: unknown): InvalidInputError {
  const first = rows[0]?.index ?? 0;
  const last = rows[rows.length - 1]?.index ?? first;
  return new InvalidInputError(
    `Rows ${first}–${last}: a row's key already exists in "${write.target.table.name}"; rerun with conflict 'skip' or 'update'.`,
    rows.length === 1 ? first : undefined,
    { cause, field: write.keyColumns[0] },
  );
}

/** The first of `rows` whose key `table` holds already (read after the failed chunk rolled back). */
export async function firstExistingKey(tx: EntityManager, rows: RecordRow[], write: RowWrite): Promise<InvalidInputError | null> {
  const dialect = dialectOf(dataSourceOf(tx));
  const { target, keyColumns } = write;
  if (keyColumns.length === 0) return null;
  const positions = keyColumns.map((name) => target.columns.findIndex((c) => c.name === name));
  const table = qualifiedTable(target.table, (name: string) => dialect.quote(name));
  const sql = dialect.sql(
    `SELECT 1 AS ${dialect.quote('found')} FROM ${table} WHERE ${keyColumns.map((name) => `${dialect.quote(name)} = ?`).join(' AND ')}`,
  );
  for (const row of rows) {
    const values = positions.map((at) => row.values[at]);
    if (values.some((value) => value === undefined || value === null)) continue;
    const found = (await tx.query(
      sql,
      values.map((value) => dialect.bindable(value)),
    )) as unknown[];
    if (found.length > 0) {
      const shown = Object.fromEntries(keyColumns.map((name, i) => [name, values[i]]));
      return new InvalidInputError(
        `Row ${row.index}: key ${JSON.stringify(shown)} already exists in "${target.table.name}"; rerun with conflict 'skip' or 'update'.`,
        row.index,
        { field: keyColumns[0] },
      );
    }
  }
  return null;
}
