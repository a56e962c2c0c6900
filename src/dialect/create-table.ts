/**
 * The table `importFile({ into, create: true })` creates: the column facts pass 1 infers from a
 * file's values (`ColumnInference`), and the statement text the dialects' `createTable` share.
 */
import { InvalidArgumentError } from '../core/errors';
import type { TableRef } from './dialect';
import { qualifiedTable } from './shared-sql';

/** A column type inferred from a file's values, before any database spells it. */
export type InferredKind = 'integer' | 'bigint' | 'numeric' | 'double' | 'boolean' | 'date' | 'timestamp' | 'timestamptz' | 'json' | 'text';

/** One field of a file as a column to create: its type, whether it saw NULL, its longest text. */
export interface InferredColumn {
  name: string;
  kind: InferredKind;
  /** numeric: digits in all and after the point. */
  precision?: number;
  scale?: number;
  /** false when no value was NULL (or absent) */
  nullable: boolean;
  /** longest text seen, in characters (for a key column that must be VARCHAR on MySQL) */
  maxLength: number;
}

/** How `createTable` spells what the inference cannot know. */
export interface CreateTableOptions {
  /**
   * MySQL/MariaDB: the collation of the key's VARCHAR columns, `Dialect.exactTextCollation`'s answer
   * (keys differing only in case, accents or trailing spaces stay different keys); default
   * `utf8mb4_bin`. A collation name (letters, digits, `_`), never a value. Ignored elsewhere.
   */
  textKeyCollation?: string;
  /** False: plain `CREATE TABLE`, which the database refuses when the name is taken (by a view, say). Default true. */
  ifNotExists?: boolean;
}

/** One column definition as a dialect spells it. */
export interface ColumnDefinition {
  column: InferredColumn;
  /** The database's type, SQL text built from fixed words and checked numbers only. */
  type: string;
}

/**
 * The key's columns in key order; INVALID_ARGUMENT for a key naming no column or one twice. The
 * columns themselves must be distinct and non-empty.
 */
export function keyColumnsOf(columns: InferredColumn[], primaryKey: string[]): InferredColumn[] {
  if (columns.length === 0) throw new InvalidArgumentError('createTable: a table needs at least one column (the file has no fields).');
  const byName = new Map<string, InferredColumn>();
  for (const column of columns) {
    if (byName.has(column.name)) throw new InvalidArgumentError(`createTable: column "${column.name}" is given twice.`);
    byName.set(column.name, column);
  }
  if (new Set(primaryKey).size !== primaryKey.length) throw new InvalidArgumentError('createTable: the key names a column twice.');
  return primaryKey.map((name) => {
    const column = byName.get(name);
    if (!column) throw new InvalidArgumentError(`createTable: the key names "${name}", which is no field of the file.`);
    return column;
  });
}

/** A precision and scale as SQL digits, checked against the database's limits (never text from elsewhere). */
export function precisionAndScale(column: InferredColumn, maxPrecision: number, maxScale: number): [number, number] {
  const { precision, scale } = column;
  const whole = (n: unknown): n is number => Number.isSafeInteger(n);
  if (
    !whole(precision) ||
    !whole(scale) ||
    precision < 1 ||
    precision > maxPrecision ||
    scale < 0 ||
    scale > Math.min(precision, maxScale)
  ) {
    throw new InvalidArgumentError(
      `createTable: numeric(${String(precision)}, ${String(scale)}) of "${column.name}" is beyond this database's (${maxPrecision}, ${maxScale}).`,
    );
  }
  return [precision, scale];
}

/**
 * `CREATE TABLE IF NOT EXISTS` (a concurrent creator of the same table is no error; see `ifNotExists`), one column a
 * line. The key is the PRIMARY KEY, its columns NOT NULL (the import refuses a row whose key field is NULL).
 */
export function createTableSql(
  table: TableRef,
  definitions: ColumnDefinition[],
  key: InferredColumn[],
  quote: (identifier: string) => string,
  options: CreateTableOptions = {},
  tableOptions = '',
): string {
  const keyed = new Set(key.map((column) => column.name));
  const notNull = (column: InferredColumn) => !column.nullable || keyed.has(column.name);
  const lines = definitions.map(({ column, type }) => `  ${quote(column.name)} ${type}${notNull(column) ? ' NOT NULL' : ''}`);
  if (key.length > 0) lines.push(`  PRIMARY KEY (${key.map((column) => quote(column.name)).join(', ')})`);
  const create = options.ifNotExists === false ? 'CREATE TABLE' : 'CREATE TABLE IF NOT EXISTS';
  return `${create} ${qualifiedTable(table, quote)} (\n${lines.join(',\n')}\n)${tableOptions}`;
}
