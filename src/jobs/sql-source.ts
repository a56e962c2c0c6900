import type { EntityTarget } from 'typeorm';
import { isInvalidStatement, ownStatementError } from '../core/database-errors';
import { dialectOf, type TableRef } from '../dialect';
import type { Page, Source } from './each-batch';
import { InvalidArgumentError, NonUniqueKeyError } from '../core/errors';
import type { Json } from '../core/json';
import { bindNamedParameters } from '../core/named-parameters';
import { type Db, dataSourceOf, transact } from '../core/transaction';

export interface SqlSourceOptions {
  /** A SQL condition with named parameters (`:name`), bound from `parameters`. */
  where?: string;
  parameters?: Record<string, unknown>;
  /** Columns to select; the key is always included. Default: all columns. */
  columns?: string[];
}

function resolveTable(db: Db, table: unknown): TableRef {
  const dataSource = dataSourceOf(db);
  if (typeof table === 'string') {
    if (table.length === 0) throw new InvalidArgumentError('sqlSource: table must be a non-empty name.');
    return { name: table };
  }
  if (table === null || table === undefined || !dataSource.hasMetadata(table as EntityTarget<unknown>)) {
    throw new InvalidArgumentError('sqlSource: table must be a table name or an entity registered in this DataSource.');
  }
  const metadata = dataSource.getMetadata(table as EntityTarget<unknown>);
  return metadata.schema ? { name: metadata.tableName, schema: metadata.schema } : { name: metadata.tableName };
}

/** Maps an entity property name to its column name; plain column names pass through. */
function columnName(db: Db, table: unknown, name: string): string {
  const dataSource = dataSourceOf(db);
  if (typeof table === 'string' || !dataSource.hasMetadata(table as EntityTarget<unknown>)) return name;
  const column = dataSource.getMetadata(table as EntityTarget<unknown>).findColumnWithPropertyName(name);
  return column ? column.databaseName : name;
}

/**
 * A keyset-paginated source over `table` for `eachBatch`: each batch is the next `limit` rows
 * with `key > cursor` ordered by `key`, never OFFSET, so every batch costs the same. `key` must be
 * unique on its own (checked against the database catalogue: NON_UNIQUE_KEY otherwise).
 */
export async function sqlSource(
  db: Db,
  table: string | EntityTarget<unknown>,
  key: string,
  options: SqlSourceOptions = {},
): Promise<Source<Record<string, unknown>>> {
  if (typeof key !== 'string' || key.length === 0) throw new InvalidArgumentError('sqlSource: key must be a column name.');
  const { where, parameters = {}, columns } = options;
  if (where !== undefined && (typeof where !== 'string' || where.trim() === '')) {
    throw new InvalidArgumentError('sqlSource: where must be a non-empty SQL condition.');
  }
  if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
    throw new InvalidArgumentError('sqlSource: parameters must be an object of named values.');
  }
  if (columns !== undefined && (!Array.isArray(columns) || columns.some((c) => typeof c !== 'string' || c === ''))) {
    throw new InvalidArgumentError('sqlSource: columns must be an array of column names.');
  }

  const dataSource = dataSourceOf(db);
  const dialect = dialectOf(dataSource);
  const ref = resolveTable(db, table);
  const keyColumn = columnName(db, table, key);
  const info = await transact(db, async (tx) => {
    try {
      return await dialect.tableInfo(tx, ref);
    } catch (error) {
      throw ownStatementError(error, `reading the catalogue entry of table "${ref.name}"`);
    }
  });
  if (!info) throw new InvalidArgumentError(`sqlSource: table "${ref.name}" does not exist.`);
  const known = new Map(info.columns.map((c) => [c.name, c]));
  const keyInfo = known.get(keyColumn);
  if (!keyInfo) throw new InvalidArgumentError(`sqlSource: table "${ref.name}" has no column "${keyColumn}".`);
  if (!info.uniqueColumns.has(keyColumn)) {
    throw new NonUniqueKeyError(
      `sqlSource: "${keyColumn}" is not unique on its own in "${ref.name}" (it needs a single-column primary key or ` +
        'a non-partial unique index on exactly that column); keyset pagination over it would skip rows.',
    );
  }
  if (!keyInfo.keyType) {
    throw new InvalidArgumentError(
      `sqlSource: key "${keyColumn}" has type ${keyInfo.declaredType || '(none)'}; supported key types are integers, text and uuid.`,
    );
  }
  const selected = columns === undefined ? undefined : [...new Set([keyColumn, ...columns.map((c) => columnName(db, table, c))])];
  for (const column of selected ?? []) {
    if (!known.has(column)) throw new InvalidArgumentError(`sqlSource: table "${ref.name}" has no column "${column}".`);
  }

  // The SQL text is built here, not by TypeORM's parameter expansion: that would rewrite a `:x`
  // inside a quoted table or column name and write numbers into SQLite's SQL text. Values (where
  // parameters, cursor, limit) are always bound; the text is the same for every batch.
  const condition = where === undefined ? { text: '', values: [] } : bindNamedParameters(where, parameters, dialect);
  const quotedKey = dialect.quote(keyColumn);
  const list = selected ? selected.map((c) => dialect.quote(c)).join(', ') : '*';
  const filter = where === undefined ? '' : ` AND (${condition.text})`;
  const after = (first: boolean) => (first ? '' : ` AND ${quotedKey} > ${dialect.placeholder(condition.values.length + 1)}`);
  const limitAt = (first: boolean) => dialect.placeholder(condition.values.length + (first ? 1 : 2));
  const text = (first: boolean) =>
    `SELECT ${list} FROM ${info.quotedTable} WHERE ${quotedKey} IS NOT NULL${filter}${after(first)} ORDER BY ${quotedKey} LIMIT ${limitAt(first)}`;
  const keyType = keyInfo.keyType;

  // A condition naming an unknown column, or not SQL at all, is refused now, not in the first batch.
  if (where !== undefined) await transact(db, async (tx) => {
    try {
      await tx.query(text(true), [...condition.values, 0]);
    } catch (error) {
      if (isInvalidStatement(error)) {
        throw new InvalidArgumentError(
          `sqlSource: the where condition is not valid on table "${ref.name}" (${error instanceof Error ? error.message : String(error)}).`,
          { cause: error },
        );
      }
      throw ownStatementError(error, `checking the where condition on table "${ref.name}"`);
    }
  });

  return async (cursor: Json, limit: number, tx): Promise<Page<Record<string, unknown>>> => {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new InvalidArgumentError('sqlSource: limit must be a positive safe integer.');
    const first = cursor === null;
    let rows: Record<string, unknown>[];
    try {
      rows = (await tx.query(text(first), [...condition.values, ...(first ? [] : [cursor]), limit])) as Record<string, unknown>[];
    } catch (error) {
      throw ownStatementError(error, `reading the next rows of table "${ref.name}"`);
    }
    if (rows.length === 0) return { items: [], next: null };
    const last = rows[rows.length - 1][keyColumn];
    return { items: rows, next: cursorOf(last, keyType) };
  };
}

/** An int8 key within 2^53 becomes a number; beyond, it stays a decimal string (cast back by the database). */
function cursorOf(value: unknown, keyType: string): Json {
  if (keyType === 'bigint' || keyType === 'integer') {
    if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
    if (typeof value === 'string' && Number.isSafeInteger(Number(value))) return Number(value);
  }
  if (typeof value === 'string' || typeof value === 'number') return value;
  return String(value);
}
