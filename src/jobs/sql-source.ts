import type { EntityManager, EntityTarget } from 'typeorm';
import { isInvalidStatement, ownStatementError } from '../core/database-errors';
import { dialectOf, entityTable, firstExisting, type KeyType, type TableRef, tablesNamed } from '../dialect';
import type { Page, Source } from './each-batch';
import { InvalidArgumentError, NonUniqueKeyError } from '../core/errors';
import type { Json } from '../core/json';
import { bindNamedParameters } from '../core/named-parameters';
import { run } from '../core/run-statement';
import { type Db, dataSourceOf, transact } from '../core/transaction';

/** Options of {@link sqlSource}. */
export interface SqlSourceOptions {
  /** A SQL condition rows must meet, with named parameters (`:name`) bound from `parameters`. Default: every row. */
  where?: string;
  /** Values for the `:name` parameters of `where`, bound (never spliced into the SQL). Default: none. */
  parameters?: Record<string, unknown>;
  /** Columns to select; the key is always included. Default: all columns. */
  columns?: string[];
}

/** The tables `table` may mean, the first existing one being it (see `tablesNamed`). */
function resolveTables(db: Db, table: unknown): TableRef[] {
  const dataSource = dataSourceOf(db);
  if (typeof table === 'string') {
    if (table.length === 0) throw new InvalidArgumentError('sqlSource: table must be a non-empty name.');
    return tablesNamed(table);
  }
  if (table === null || table === undefined || !dataSource.hasMetadata(table as EntityTarget<unknown>)) {
    throw new InvalidArgumentError('sqlSource: table must be a table name or an entity registered in this DataSource.');
  }
  const metadata = dataSource.getMetadata(table as EntityTarget<unknown>);
  return [entityTable(metadata)];
}

/** Maps an entity property name to its column name; plain column names pass through. */
function columnName(db: Db, table: unknown, name: string): string {
  const dataSource = dataSourceOf(db);
  if (typeof table === 'string' || !dataSource.hasMetadata(table as EntityTarget<unknown>)) return name;
  const column = dataSource.getMetadata(table as EntityTarget<unknown>).findColumnWithPropertyName(name);
  return column ? column.databaseName : name;
}

/**
 * What `eachPartition` needs of a source beyond `eachBatch`'s: boundaries that split its rows into
 * ranges of similar row counts, and pages bounded above. Every `sqlSource` is one.
 */
export interface Partitioning<T> {
  /** At most `count - 1` ascending key values (cursor form) taken from the data itself. */
  boundaries(count: number, tx: EntityManager): Promise<Json[]>;
  /** The next page after `after` (null: from the first row) with keys up to `upTo` inclusive (null: no bound); `next: null` on the range's last page. */
  page(after: Json, upTo: Json, limit: number, tx: EntityManager): Promise<Page<T>>;
}

/** A source `eachPartition` can split into ranges. */
export type PartitionableSource<T> = Source<T> & {
  /** How `eachPartition` splits the source into ranges and pages within one. */
  readonly partitioning: Partitioning<T>;
};

export function isPartitionable<T>(source: Source<T>): source is PartitionableSource<T> {
  const partitioning = (source as Partial<PartitionableSource<T>>).partitioning;
  return typeof partitioning === 'object' && partitioning !== null && typeof partitioning.page === 'function';
}

function keyColumns(db: Db, table: unknown, key: unknown): string[] {
  const names = typeof key === 'string' ? [key] : key;
  if (!Array.isArray(names) || names.length === 0 || names.some((name) => typeof name !== 'string' || name.length === 0)) {
    throw new InvalidArgumentError('sqlSource: key must be a column name or a non-empty array of column names.');
  }
  const columns = names.map((name: string) => columnName(db, table, name));
  if (new Set(columns).size !== columns.length) throw new InvalidArgumentError('sqlSource: key names a column twice.');
  return columns;
}

/**
 * A keyset-paginated source over `table` for `eachBatch` and `eachPartition`: each batch is the
 * next `limit` rows after the cursor in key order, never OFFSET, so every batch costs the same.
 * The key (one column or several) must be unique (checked against the catalogue: `NON_UNIQUE_KEY`);
 * an unknown table or column, or an unsupported key type, is `INVALID_ARGUMENT`. Rows with a NULL key are never visited.
 */
export async function sqlSource(
  db: Db,
  table: string | EntityTarget<unknown>,
  key: string | string[],
  options: SqlSourceOptions = {},
): Promise<PartitionableSource<Record<string, unknown>>> {
  const keys = keyColumns(db, table, key);
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
  const candidates = resolveTables(db, table);
  const found = await transact(db, (tx) =>
    firstExisting(candidates, async (candidate) => {
      try {
        return await dialect.tableInfo(tx, candidate);
      } catch (error) {
        throw ownStatementError(error, `reading the catalogue entry of table "${candidate.name}"`);
      }
    }),
  );
  if (!found) throw new InvalidArgumentError(`sqlSource: table "${candidates[0].name}" does not exist.`);
  const { table: ref, found: info } = found;
  const known = new Map(info.columns.map((c) => [c.name, c]));
  for (const column of keys) {
    if (!known.has(column)) throw new InvalidArgumentError(`sqlSource: table "${ref.name}" has no column "${column}".`);
  }
  if (!info.uniqueKeys.some((unique) => unique.every((column) => keys.includes(column)))) {
    throw new NonUniqueKeyError(
      `sqlSource: (${keys.join(', ')}) is not unique in "${ref.name}": the key columns must include every column of the ` +
        'primary key or of one non-partial unique index; keyset pagination over it would skip rows.',
    );
  }
  const keyTypes = keys.map((column) => {
    const found = known.get(column)!;
    if (!found.keyType) {
      throw new InvalidArgumentError(
        `sqlSource: key "${column}" has type ${found.declaredType || '(none)'}; supported key types are integers, text, uuid, ` +
          'timestamps and dates.',
      );
    }
    return found.keyType;
  });
  const selected =
    columns === undefined ? info.columns.map((c) => c.name) : [...new Set([...keys, ...columns.map((c) => columnName(db, table, c))])];
  for (const column of selected) {
    if (!known.has(column)) throw new InvalidArgumentError(`sqlSource: table "${ref.name}" has no column "${column}".`);
  }

  // The SQL text is built here, not by TypeORM's parameter expansion: that would rewrite a `:x`
  // inside a quoted table or column name and write numbers into SQLite's SQL text. Values (where
  // parameters, cursor, limit) are always bound; the text is the same for every batch.
  const condition = where === undefined ? { text: '', values: [] } : bindNamedParameters(where, parameters, dialect);
  // Qualified: a key read as text is selected under its own name, and ORDER BY must use the column (its index).
  const qualified = keys.map((column) => `${info.quotedTable}.${dialect.quote(column)}`);
  const keyRead = (column: string, i: number) => `${dialect.keyRead(qualified[i], keyTypes[i])} AS ${dialect.quote(column)}`;
  const rowList = selected
    .map((column) => (keys.includes(column) ? keyRead(column, keys.indexOf(column)) : dialect.quote(column)))
    .join(', ');
  const keyList = keys.map(keyRead).join(', ');
  const notNull = qualified.map((column) => `${column} IS NOT NULL`).join(' AND ');
  const filter = where === undefined ? '' : ` AND (${condition.text})`;
  const orderBy = qualified.join(', ');

  /** SELECT text and the order of key values it binds (`after`'s then `upTo`'s column indexes). */
  const statement = (list: string, after: boolean, upTo: boolean, tail: (placeholders: number) => string) => {
    let placeholders = condition.values.length;
    const bindings: { bound: 'after' | 'upTo'; column: number }[] = [];
    const bound = (which: 'after' | 'upTo') => (column: number) => {
      bindings.push({ bound: which, column });
      return dialect.keyBound(dialect.placeholder(++placeholders), keyTypes[column]);
    };
    const lower = after ? ` AND ${dialect.keysetCondition(qualified, '>', bound('after'))}` : '';
    const upper = upTo ? ` AND ${dialect.keysetCondition(qualified, '<=', bound('upTo'))}` : '';
    const text = `SELECT ${list} FROM ${info.quotedTable} WHERE ${notNull}${filter}${lower}${upper} ORDER BY ${orderBy} ${tail(placeholders)}`;
    return { text, bindings };
  };
  const limitTail = (n: number) => `LIMIT ${dialect.placeholder(n + 1)}`;
  const pageStatements = new Map<string, ReturnType<typeof statement>>();
  const pageStatement = (after: boolean, upTo: boolean) => {
    const id = `${after}:${upTo}`;
    let found = pageStatements.get(id);
    if (!found) pageStatements.set(id, (found = statement(rowList, after, upTo, limitTail)));
    return found;
  };
  const bindKeys = (bindings: { bound: 'after' | 'upTo'; column: number }[], after: unknown[], upTo: unknown[]) =>
    bindings.map(({ bound, column }) => (bound === 'after' ? after : upTo)[column]);
  const keyValues = (value: Json, what: string): unknown[] => {
    if (keys.length === 1) return [value];
    if (!Array.isArray(value) || value.length !== keys.length) {
      throw new InvalidArgumentError(`sqlSource: the ${what} must be an array of ${keys.length} key values, got ${JSON.stringify(value)}.`);
    }
    return value;
  };
  const cursorOfRow = (row: Record<string, unknown>): Json => {
    const values = keys.map((column, i) => cursorOf(row[column], keyTypes[i]));
    return keys.length === 1 ? values[0] : values;
  };

  const page = async (after: Json, upTo: Json, limit: number, tx: EntityManager): Promise<Page<Record<string, unknown>>> => {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new InvalidArgumentError('sqlSource: limit must be a positive safe integer.');
    const { text, bindings } = pageStatement(after !== null, upTo !== null);
    const afterValues = after === null ? [] : keyValues(after, 'cursor');
    const upToValues = upTo === null ? [] : keyValues(upTo, 'range bound');
    let rows: Record<string, unknown>[];
    try {
      const parameters = [...condition.values, ...bindKeys(bindings, afterValues, upToValues), limit];
      // better-sqlite3 has one connection, the transaction's: its rows are read as arrays and made
      // into objects here, cheaper than its C++ API builds them (dialect readRows); elsewhere TypeORM's query.
      rows = dialect.readRows?.(dataSourceOf(tx), text, parameters) ?? ((await tx.query(text, parameters)) as Record<string, unknown>[]);
    } catch (error) {
      throw ownStatementError(error, `reading the next rows of table "${ref.name}"`);
    }
    if (rows.length === 0) return { items: [], next: null };
    return { items: rows, next: cursorOfRow(rows[rows.length - 1]) };
  };

  // A condition naming an unknown column, or not SQL at all, is refused now, not in the first batch.
  if (where !== undefined)
    await transact(db, async (tx) => {
      try {
        await tx.query(pageStatement(false, false).text, [...condition.values, 0]);
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

  // Quantiles of a random sample, where the database samples and the table is big enough for a
  // sample to be cheaper than a walk. The database numbers the sampled rows in key order and
  // returns only the rows at the quantiles (row rn ends a range when rn * count / total steps to
  // the next integer). A sample of pages reads only those pages, but its rows come in page-sized
  // clusters, so a range's share is only as exact as the number of pages sampled within it: it is
  // used where each range can get about PAGE_SAMPLE_ROWS_PER_RANGE rows (some hundred pages) from a
  // tenth of the table or less. Otherwise a sample of rows (one sequential read, rows kept
  // independently) is cheaper than a walk and exact enough (1M rows in 64 ranges: within ±6 %,
  // where a sample of pages gave ranges up to 5× apart).
  const sampled = async (count: number, tx: EntityManager, what: string): Promise<Json[] | undefined> => {
    const estimated = info.estimatedRows ?? 0;
    if (!dialect.sampleClause || estimated < SAMPLE_FROM_ROWS) return undefined;
    const fromPages = count * PAGE_SAMPLE_ROWS_PER_RANGE;
    const unit = estimated >= fromPages * 10 ? 'pages' : 'rows';
    const percent = Math.min(100, (100 * (unit === 'pages' ? fromPages : Math.max(SAMPLE_ROWS, count * 500))) / estimated);
    const at = (n: number) => dialect.placeholder(condition.values.length + n);
    const q = (name: string) => dialect.quote(name);
    const text =
      `SELECT ${keys.map((column) => q(column)).join(', ')} FROM (SELECT ${keyList}, ` +
      `row_number() OVER (ORDER BY ${orderBy}) AS ${q('__rn')}, count(*) OVER () AS ${q('__total')} ` +
      `FROM ${info.quotedTable} ${dialect.sampleClause(at(1), unit)} WHERE ${notNull}${filter}) ${q('__sample')} ` +
      `WHERE ${q('__rn')} < ${q('__total')} AND ${q('__total')} >= ${at(2)} * 10 ` +
      `AND (${q('__rn')} * ${at(2)}) / ${q('__total')} <> ((${q('__rn')} - 1) * ${at(2)}) / ${q('__total')} ORDER BY ${q('__rn')}`;
    const rows = await run<Record<string, unknown>[]>(tx, text, [...condition.values, percent, count], what);
    return rows.length === count - 1 ? rows.map(cursorOfRow) : undefined;
  };

  // An index walk: count the rows, then step from boundary to boundary, each step reading the
  // next `size` index entries once — the whole walk costs about one index scan.
  const boundaries = async (count: number, tx: EntityManager): Promise<Json[]> => {
    const what = `planning ranges of table "${ref.name}"`;
    const fromSample = await sampled(count, tx, what);
    if (fromSample) return fromSample;
    const counted = await run<{ total: number | string }[]>(
      tx,
      `SELECT COUNT(*) AS ${dialect.quote('total')} FROM ${info.quotedTable} WHERE ${notNull}${filter}`,
      condition.values,
      what,
    );
    const total = Number(counted[0].total);
    const size = Math.ceil(total / count);
    const offsetTail = (n: number) => `LIMIT 1 OFFSET ${dialect.placeholder(n + 1)}`;
    const first = statement(keyList, false, false, offsetTail);
    const next = statement(keyList, true, false, offsetTail);
    const found: Json[] = [];
    let previous: Json = null;
    for (let i = 1; i < count && size > 0 && i * size < total; i++) {
      const { text, bindings } = previous === null ? first : next;
      const afterValues = previous === null ? [] : keyValues(previous, 'cursor');
      const rows = await run<Record<string, unknown>[]>(
        tx,
        text,
        [...condition.values, ...bindKeys(bindings, afterValues, []), size - 1],
        what,
      );
      if (rows.length === 0) break;
      previous = cursorOfRow(rows[0]);
      found.push(previous);
    }
    return found;
  };

  const source: Source<Record<string, unknown>> = (cursor, limit, tx) => page(cursor, null, limit, tx);
  // Within a range a short page is its last: that saves each range a transaction that reads nothing.
  const rangePage = async (after: Json, upTo: Json, limit: number, tx: EntityManager) => {
    const found = await page(after, upTo, limit, tx);
    return found.items.length < limit ? { items: found.items, next: null } : found;
  };
  // The rows the whole job visits (where included), asked once when a job starts: see Dialect.estimateRows.
  const total = (tx: EntityManager) =>
    dialect.estimateRows(tx, {
      table: ref,
      quotedTable: info.quotedTable,
      condition: `${notNull}${filter}`,
      parameters: condition.values,
      what: `estimating the rows of table "${ref.name}"`,
    });
  return Object.assign(source, { partitioning: { boundaries, page: rangePage }, total });
}

/**
 * Tables estimated at fewer rows are planned by an exact index walk; bigger ones from a sample of
 * about SAMPLE_ROWS rows (500 per range for more ranges: ±5 % per range; numbering 100,000 rows
 * instead cost 1M rows' planning twice the time).
 */
const SAMPLE_FROM_ROWS = 200_000;
const SAMPLE_ROWS = 30_000;
/** Rows a sample of pages takes per range: about a hundred pages of narrow rows. */
const PAGE_SAMPLE_ROWS_PER_RANGE = 20_000;

/** An int8 key within 2^53 becomes a number; beyond, it stays a decimal string (cast back by the database). */
function cursorOf(value: unknown, keyType: KeyType): Json {
  if (keyType === 'bigint' || keyType === 'integer') {
    if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
    if (typeof value === 'string' && Number.isSafeInteger(Number(value))) return Number(value);
  }
  if (typeof value === 'string' || typeof value === 'number') return value;
  return String(value);
}
