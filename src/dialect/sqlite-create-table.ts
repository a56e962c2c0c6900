import {
  type CreateTableOptions,
  createTableSql,
  type InferredColumn,
  type InferredKind,
  keyColumnsOf,
  precisionAndScale,
} from './create-table';
import type { TableRef } from './dialect';
import { doubleQuote } from './shared-sql';

// The declared names SQLite's recordColumns reads back as the same kinds: DATETIME is a timestamp
// (text as given, a zone shifted to UTC), BOOLEAN 1/0, JSON text; INTEGER holds int8 either way.
const SQLITE_TYPES: Record<Exclude<InferredKind, 'numeric'>, string> = {
  integer: 'INTEGER',
  bigint: 'INTEGER',
  double: 'DOUBLE',
  boolean: 'BOOLEAN',
  date: 'DATE',
  timestamp: 'DATETIME',
  timestamptz: 'DATETIME',
  json: 'JSON',
  text: 'TEXT',
};

/** SQLite's CREATE TABLE for inferred columns (`Dialect.createTable`). */
export function sqliteCreateTable(table: TableRef, columns: InferredColumn[], primaryKey: string[], options?: CreateTableOptions): string {
  const key = keyColumnsOf(columns, primaryKey);
  const definitions = columns.map((column) => {
    if (column.kind !== 'numeric') return { column, type: SQLITE_TYPES[column.kind] };
    // SQLite's NUMERIC affinity ignores the digits, but recordColumns reads them: values are checked against them as elsewhere.
    const [precision, scale] = precisionAndScale(column, 1000, 1000);
    return { column, type: `DECIMAL(${precision}, ${scale})` };
  });
  return createTableSql(table, definitions, key, doubleQuote, options);
}
