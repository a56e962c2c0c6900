import { type DataSource, QueryFailedError } from 'typeorm';

/** The parts of better-sqlite3 this uses (its Database is TypeORM's `driver.databaseConnection`). */
interface BetterSqliteStatement {
  readonly reader: boolean;
  raw(toggle: boolean): BetterSqliteStatement;
  columns(): { name: string }[];
  all(...parameters: unknown[]): unknown[][];
}
interface BetterSqliteDatabase {
  prepare(sql: string): BetterSqliteStatement;
}

interface PreparedRead {
  statement: BetterSqliteStatement;
  /** Makes one row's values (in result column order) into a plain object keyed by the columns' names. */
  toRow: (values: unknown[]) => Record<string, unknown>;
}

/**
 * A function making a row's values into an object literal of the columns' names: V8 creates each
 * such object from one boilerplate instead of adding its properties one at a time (for the jobs
 * page's 51 rows of 9 columns, about as cheap as the raw arrays alone; the loop added ~15%).
 * The names are data, written as JSON string literals; `__proto__` as a
 * computed key (a plain key would set the prototype). Where code cannot be generated from strings
 * (--disallow-code-generation-from-strings, a CSP), the properties are defined one by one.
 */
export function rowMaker(names: readonly string[]): (values: unknown[]) => Record<string, unknown> {
  const properties = names.map((name, index) => {
    const key = JSON.stringify(name);
    return `${name === '__proto__' ? `[${key}]` : key}: values[${index}]`;
  });
  try {
    return new Function('values', `'use strict'; return { ${properties.join(', ')} };`) as (values: unknown[]) => Record<string, unknown>;
  } catch {
    return (values) => {
      const row: Record<string, unknown> = {};
      for (let c = 0; c < names.length; c++) {
        if (names[c] === '__proto__')
          Object.defineProperty(row, '__proto__', { value: values[c], enumerable: true, writable: true, configurable: true });
        else row[names[c]] = values[c];
      }
      return row;
    };
  }
}

/** Statements kept per connection, oldest dropped first (as TypeORM's own cache of 100). */
const MAX_STATEMENTS = 100;
const statements = new WeakMap<BetterSqliteDatabase, Map<string, PreparedRead | null>>();

function prepared(connection: BetterSqliteDatabase, sql: string): PreparedRead | null {
  let cache = statements.get(connection);
  if (cache === undefined) {
    cache = new Map();
    statements.set(connection, cache);
  }
  let read = cache.get(sql);
  if (read === undefined) {
    const statement = connection.prepare(sql);
    read = statement.reader ? { statement: statement.raw(true), toRow: rowMaker(statement.columns().map((column) => column.name)) } : null;
    cache.set(sql, read);
    if (cache.size > MAX_STATEMENTS) cache.delete(cache.keys().next().value!);
  }
  return read;
}

/**
 * Reads the rows of a SELECT on a better-sqlite3 DataSource as TypeORM's `query` would return
 * them — logged to the DataSource's logger first, a failure logged and raised as QueryFailedError —
 * but each row read as an array and made into a plain object here (see rowMaker): better-sqlite3 builds row
 * objects through its C++ API, which for a page of 50 short rows costs more than the statement.
 * Undefined (nothing run) where TypeORM's own path must stay: another driver, query subscribers
 * (their before/after query events), slow-query logging, or a statement that returns no rows.
 */
export function readRowsDirectly(dataSource: DataSource, sql: string, parameters: unknown[]): Record<string, unknown>[] | undefined {
  if (dataSource.options.type !== 'better-sqlite3' || dataSource.subscribers.length > 0 || dataSource.options.maxQueryExecutionTime)
    return undefined;
  const connection = (dataSource.driver as unknown as { databaseConnection?: BetterSqliteDatabase }).databaseConnection;
  if (connection === undefined) return undefined;
  // As TypeORM's better-sqlite3 runner binds them: booleans as 1/0.
  const bound = parameters.map((value) => (typeof value === 'boolean' ? Number(value) : value));
  let read: PreparedRead | null;
  try {
    read = prepared(connection, sql);
  } catch (error) {
    dataSource.logger.logQuery(sql, bound);
    throw failed(dataSource, sql, bound, error);
  }
  if (read === null) return undefined;
  dataSource.logger.logQuery(sql, bound);
  let values: unknown[][];
  try {
    values = read.statement.all(...bound);
  } catch (error) {
    throw failed(dataSource, sql, bound, error);
  }
  const { toRow } = read;
  const rows = new Array<Record<string, unknown>>(values.length);
  for (let r = 0; r < values.length; r++) rows[r] = toRow(values[r]);
  return rows;
}

function failed(dataSource: DataSource, sql: string, parameters: unknown[], error: unknown): QueryFailedError {
  dataSource.logger.logQueryError(error instanceof Error ? error : String(error), sql, parameters);
  return new QueryFailedError(sql, parameters, error instanceof Error ? error : new Error(String(error)));
}
