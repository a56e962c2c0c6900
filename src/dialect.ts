import type { EventEmitter } from 'node:events';
import { type DataSource, type EntityManager, QueryFailedError, type QueryResult, type QueryRunner } from 'typeorm';
import { InvalidArgumentError } from './errors';

/** The column facts `sqlSource` needs, read from the real database catalogue. */
export interface ColumnInfo {
  name: string;
  /** Normalised key family; `null` when the type cannot be a keyset key. */
  keyType: 'integer' | 'bigint' | 'text' | 'uuid' | null;
  declaredType: string;
}

export interface TableInfo {
  columns: ColumnInfo[];
  /** Columns unique on their own: a single-column primary key or a non-partial, non-expression unique index. */
  uniqueColumns: Set<string>;
  /** The table reference to put in SQL, already quoted. */
  quotedTable: string;
}

/** Quoting rules of a SQL dialect that matter when scanning a condition for parameters. */
export interface SqlLexicon {
  /** Whether a backslash escapes a quote inside '…': MySQL always, PostgreSQL in E'…' only. */
  backslashEscapes: 'always' | 'e-prefix' | 'never';
  /** PostgreSQL's $tag$…$tag$ strings. */
  dollarQuotes: boolean;
}

/** What one of the library's own statements returned: its rows (if any) and the rows it changed. */
export interface Executed<T = Record<string, unknown>> {
  rows: T[];
  affected: number;
}

export interface TableRef {
  name: string;
  schema?: string;
}

/**
 * Everything that differs between the supported databases lives behind this interface:
 * placeholders, quoting, locking, "insert unless present", `SKIP LOCKED`, catalogue lookups.
 */
export interface Dialect {
  readonly name: 'postgres' | 'sqlite' | 'mysql';
  readonly supportsSkipLocked: boolean;
  /** True when one DataSource has one connection, so the library serialises its own transactions. */
  readonly singleConnection: boolean;
  /** Isolation level of the transactions the library opens itself; undefined keeps the DataSource's. */
  readonly ownTransactionIsolation?: 'READ COMMITTED';
  /** Quotes an identifier (doubling the quote character inside it). */
  quote(identifier: string): string;
  /**
   * Runs one of the library's own statements (fixed text in the driver's placeholders, bound
   * values) on `runner`. PostgreSQL prepares each text once per connection (a named statement):
   * the hot claim statements then skip parsing and planning. Driver errors are raised unchanged.
   */
  execute<T = Record<string, unknown>>(runner: QueryRunner, sql: string, parameters: unknown[]): Promise<Executed<T>>;
  /** Rewrites `?` placeholders to the driver's own. Only for the library's own SQL text. */
  sql(text: string): string;
  /** The placeholder of the n-th bound value (from 1), for SQL around user identifiers, which `sql` must not rewrite. */
  placeholder(n: number): string;
  /**
   * A parameter value as this driver binds it (SQLite stores a Date as TypeORM does: UTC text, and
   * a boolean as 1/0). The library's own booleans go through it too.
   */
  bindable(value: unknown): unknown;
  /** How a user's SQL condition quotes, so its `:name` parameters are found outside literals. */
  readonly lexicon: SqlLexicon;
  /** `INSERT` that does nothing when the key exists (concurrent-safe). */
  insertIgnore(table: string, columns: string[], conflictColumns: string[]): string;
  /**
   * Locks one row for the rest of the transaction and makes a concurrent runner wait; on SQLite
   * the lock is the database write lock, taken by a no-op write as the transaction's first statement.
   */
  lockRow(table: string, keyColumn: string): { before?: string; select: string };
  /** Suffix that makes a SELECT lock the rows it returns and skip rows locked by others. */
  readonly skipLockedSuffix: string;
  /**
   * True when `INSERT/UPDATE … RETURNING` rows come back through every TypeORM driver of the
   * dialect, so a claim is one statement (not on SQLite: TypeORM 0.3's sqlite3 runner drops them).
   */
  readonly supportsReturning: boolean;
  /**
   * Bulk-loads the rows of a `CopyText` into `table` on `runner`, inside its transaction: COPY …
   * FROM STDIN on PostgreSQL, several times faster than INSERTs. `around.before` and
   * `around.after` (statements with bound parameters) run just before and after, all in one round
   * trip; the first failure stops the rest. Undefined where the dialect has no bulk path (callers
   * then use multi-row INSERTs). Driver errors are raised unchanged.
   */
  readonly copyRows?: (runner: QueryRunner, table: string, columns: string[], rows: CopyRows, around?: CopyAround) => Promise<void>;
  /** `insertIgnore` of `rows` rows in one statement (rows whose key exists are skipped). */
  insertIgnoreRows(table: string, columns: string[], conflictColumns: string[], rows: number): string;
  /**
   * Runs `insertIgnoreRows` on `runner` (a transaction's) and resolves to how many rows it
   * inserted, not how many the driver calls affected. Driver errors are raised unchanged.
   */
  insertMissingRows(runner: QueryRunner, table: string, columns: string[], conflictColumns: string[], parameters: unknown[], rows: number): Promise<number>;
  /** How an upsert's assignments refer to the value proposed for `column`. */
  proposed(column: string): string;
  /**
   * One atomic statement: insert the row, or, when its key exists, apply `assignments` only where
   * `condition` holds. Assignments and condition read the existing row as `table.column` and take
   * no placeholders. They apply in order (on MySQL later ones see earlier new values), so list
   * the columns that others read last.
   */
  conditionalUpsert(table: string, columns: string[], conflictColumn: string, assignments: [string, string][], condition: string): string;
  /**
   * Runs `conditionalUpsert` on `runner` (a transaction's); resolves to true when it inserted the
   * row or applied the assignments, false when the existing row failed `condition`.
   */
  applyConditionalUpsert(
    runner: QueryRunner,
    table: string,
    columns: string[],
    conflictColumn: string,
    assignments: [string, string][],
    condition: string,
    parameters: unknown[],
  ): Promise<boolean>;
  tableInfo(manager: EntityManager, table: TableRef): Promise<TableInfo | null>;
  /**
   * The collation the checkpoint tables' text columns need so that keys differing only in case,
   * accents or trailing spaces stay different keys; undefined where the default already does.
   */
  exactTextCollation(runner: QueryRunner): Promise<string | undefined>;
  /**
   * Makes an initialized DataSource safe for the library to use; called once per DataSource before
   * its first transaction. Returns false when it could not (not initialized yet), to be asked again.
   */
  prepare(dataSource: DataSource): boolean;
}

const questionMarks = /\?/g;

function doubleQuote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

function valueRows(columnCount: number, rows: number): string {
  const row = `(${new Array<string>(columnCount).fill('?').join(', ')})`;
  return new Array<string>(rows).fill(row).join(', ');
}

/** PostgreSQL and SQLite (3.24+) share the upsert syntax; `?` placeholders. */
function onConflictDoNothing(table: string, columns: string[], conflictColumns: string[], rows: number): string {
  return `INSERT INTO ${doubleQuote(table)} (${columns.map(doubleQuote).join(', ')}) VALUES ${valueRows(columns.length, rows)} ON CONFLICT (${conflictColumns.map(doubleQuote).join(', ')}) DO NOTHING`;
}

function onConflictUpdateWhere(
  table: string,
  columns: string[],
  conflictColumn: string,
  assignments: [string, string][],
  condition: string,
): string {
  const updates = assignments.map(([column, value]) => `${doubleQuote(column)} = ${value}`).join(', ');
  return `INSERT INTO ${doubleQuote(table)} (${columns.map(doubleQuote).join(', ')}) VALUES ${valueRows(columns.length, 1)} ON CONFLICT (${doubleQuote(conflictColumn)}) DO UPDATE SET ${updates} WHERE ${condition}`;
}

/** Rows changed by one statement: the structured result is where every driver reports them (TypeORM 0.3 and 1.x). */
async function affectedRows(runner: QueryRunner, sql: string, parameters: unknown[]): Promise<number> {
  const result = (await runner.query(sql, parameters, true)) as QueryResult;
  return Number(result.affected ?? 0);
}

const SQLITE_INTEGER = /INT/i;
const SQLITE_TEXT = /CHAR|CLOB|TEXT/i;

/** Through TypeORM's runner: its structured result is where every driver reports rows and changes. */
async function executeThroughRunner<T>(runner: QueryRunner, sql: string, parameters: unknown[]): Promise<Executed<T>> {
  const result = (await runner.query(sql, parameters, true)) as QueryResult<T>;
  return { rows: Array.isArray(result.records) ? result.records : [], affected: Number(result.affected ?? 0) };
}

/** The pg client under a runner; a released runner still holds its old one, which the pool may have handed to someone else. */
async function pgClientOf<T>(runner: QueryRunner): Promise<T> {
  if (runner.isReleased) throw new Error('The query runner was already released.');
  return (await runner.connect()) as T;
}

/** The name each statement text is prepared under: one text, one name, for the life of the process. */
const preparedNames = new Map<string, string>();

function preparedName(sql: string): string {
  let name = preparedNames.get(sql);
  if (name === undefined) {
    name = `typeorm_checkpoint_${preparedNames.size + 1}`;
    preparedNames.set(sql, name);
  }
  return name;
}

interface PgClient {
  query<T>(query: { name: string; text: string; values: unknown[] }): Promise<{ rows: T[]; rowCount: number | null }>;
  connection?: { parsedStatements?: Record<string, string> };
}

/** PostgreSQL's invalid_sql_statement_name: the connection lost its prepared statements (DEALLOCATE, DISCARD ALL). */
const UNKNOWN_PREPARED_STATEMENT = '26000';

/**
 * A named statement on the runner's own connection (inside its transaction), logged and failing
 * as TypeORM's `query()` would (its query events are not broadcast to subscribers).
 */
async function executePrepared<T>(runner: QueryRunner, sql: string, parameters: unknown[], again = true): Promise<Executed<T>> {
  const logger = runner.connection.logger;
  const client = await pgClientOf<PgClient>(runner);
  const name = preparedName(sql);
  logger.logQuery(sql, parameters, runner);
  try {
    const result = await client.query<T>({ name, text: sql, values: parameters });
    return { rows: result.rows, affected: result.rowCount ?? 0 };
  } catch (error) {
    if ((error as { code?: unknown }).code === UNKNOWN_PREPARED_STATEMENT && client.connection?.parsedStatements) {
      // pg believes the statement is prepared on this connection, but the server dropped it: forget
      // it, so it is prepared again — now if nothing else is in this transaction, else next time.
      delete client.connection.parsedStatements[name];
      if (again && !runner.isTransactionActive) return executePrepared(runner, sql, parameters, false);
    }
    logger.logQueryError(error instanceof Error ? error : String(error), sql, parameters, runner);
    // The same error TypeORM's own query() raises, so callers see one shape on every path.
    throw new QueryFailedError(sql, parameters, error instanceof Error ? error : new Error(String(error)));
  }
}

/** A pooled connection's 'error' event, already handled by the pool or TypeORM when they listen. */
function ignoreClientError(): void {
  // Nothing to do: the client is unusable from now on, and its next query fails with a typed error.
}

/**
 * A statement of the library's own with its bound parameters (strings, numbers or null); with
 * `prepare`, parsed and planned once per connection (a named statement).
 */
export interface BoundStatement {
  sql: string;
  parameters: (string | number | null)[];
  prepare?: boolean;
}

/** Statements that `copyRows` runs before and after the COPY, in the same round trip. */
export interface CopyAround {
  before?: BoundStatement[];
  after?: BoundStatement[];
}

/** Rows in PostgreSQL's COPY text format; `ends[i]` is the byte offset after row `i`. */
export interface CopyRows {
  bytes: Buffer;
  rows: number;
  ends: Int32Array;
}

/** The rows after the first `skip`. */
export function skipCopyRows(rows: CopyRows, skip: number): CopyRows {
  if (skip <= 0) return rows;
  const offset = rows.ends[skip - 1];
  return { bytes: rows.bytes.subarray(offset), rows: rows.rows - skip, ends: rows.ends.subarray(skip, rows.rows).map((end) => end - offset) };
}

// PostgreSQL ≤ 16 remembers each tuple slot of a COPY's insert buffer (up to 1,000) in a resource
// owner whose lookup is linear for equal entries: a COPY of n rows costs O(n²) (~0.9 ms for 1,000).
// Statements of 125 rows measured cheapest against the fixed cost of each (~25 µs); all of them
// go in one round trip.
const COPY_ROWS_PER_STATEMENT = 125;
const BACKSLASH = 0x5c;
const TAB = 0x09;
const NEWLINE = 0x0a;
const RETURN = 0x0d;
const COPY_ESCAPED = { [BACKSLASH]: BACKSLASH, [TAB]: 0x74, [NEWLINE]: 0x6e, [RETURN]: 0x72 } as Record<number, number>;

/**
 * Writes rows in COPY's text format, in place: fields separated by tabs, rows ended by a line
 * break, and backslash, tab and line breaks in text escaped. Values go in column order.
 */
export class CopyText {
  private buffer: Buffer = Buffer.allocUnsafe(1 << 16);
  private length = 0;
  private rows = 0;
  private ends: Int32Array = new Int32Array(1024);
  // What the take before last handed over: reused by the next take (see `take`).
  private spare: { buffer: Buffer; ends: Int32Array } | null = null;

  get rowCount(): number {
    return this.rows;
  }

  /** Bytes already in COPY text form (digits, or text written by another CopyText). */
  raw(bytes: Uint8Array, start = 0, end = bytes.length): void {
    this.reserve(end - start);
    const buffer = this.buffer;
    let at = this.length;
    for (let i = start; i < end; i++) buffer[at++] = bytes[i];
    this.length = at;
  }

  /** A text value given as its well-formed UTF-8 bytes (without U+0000, which text cannot hold). */
  utf8(bytes: Uint8Array, start = 0, end = bytes.length): void {
    this.reserve(2 * (end - start));
    const buffer = this.buffer;
    let at = this.length;
    for (let i = start; i < end; i++) {
      const byte = bytes[i];
      if (byte === BACKSLASH || (byte <= RETURN && (byte === TAB || byte === NEWLINE || byte === RETURN))) {
        buffer[at++] = BACKSLASH;
        buffer[at++] = COPY_ESCAPED[byte];
      } else {
        buffer[at++] = byte;
      }
    }
    this.length = at;
  }

  text(value: string): void {
    this.utf8(Buffer.from(value));
  }

  integer(value: number): void {
    this.raw(Buffer.from(String(value), 'latin1'));
  }

  /** Ends a field. */
  tab(): void {
    this.reserve(1);
    this.buffer[this.length++] = TAB;
  }

  endRow(): void {
    this.reserve(1);
    this.buffer[this.length++] = NEWLINE;
    if (this.rows === this.ends.length) {
      const grown = new Int32Array(2 * this.ends.length);
      grown.set(this.ends);
      this.ends = grown;
    }
    this.ends[this.rows++] = this.length;
  }

  /**
   * The rows written so far; the writer starts again empty. What is taken stays valid until the
   * take after next, whose memory it reuses (one chunk is sent while the next one is written).
   */
  take(): CopyRows {
    const taken = { bytes: this.buffer.subarray(0, this.length), rows: this.rows, ends: this.ends };
    const spare = this.spare;
    this.spare = { buffer: this.buffer, ends: this.ends };
    this.buffer = spare?.buffer ?? Buffer.allocUnsafe(this.buffer.length);
    this.ends = spare?.ends ?? new Int32Array(this.ends.length);
    this.length = 0;
    this.rows = 0;
    return taken;
  }

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(2 * this.buffer.length, this.length + bytes));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }
}

/** A message of PostgreSQL's frontend protocol: type, length (itself included), body. */
function frontendMessage(type: string, ...body: Buffer[]): Buffer {
  const length = body.reduce((sum, part) => sum + part.length, 4);
  const head = Buffer.allocUnsafe(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(length, 1);
  return Buffer.concat([head, ...body]);
}

const cString = (text: string) => Buffer.from(`${text}\0`);
const int16 = (value: number) => Buffer.from([(value >> 8) & 0xff, value & 0xff]);

function int32(value: number): Buffer {
  const out = Buffer.allocUnsafe(4);
  out.writeInt32BE(value);
  return out;
}

/** Bind (text parameters) of `statement` (named, or the unnamed one) to the unnamed portal. */
function bindMessage(statement: string, parameters: BoundStatement['parameters']): Buffer {
  const values = parameters.map((value) => {
    if (value === null) return int32(-1);
    const text = Buffer.from(String(value));
    return Buffer.concat([int32(text.length), text]);
  });
  return frontendMessage('B', cString(''), cString(statement), int16(0), int16(values.length), ...values, int16(0));
}

const EXECUTE = frontendMessage('E', cString(''), int32(0));

/** Parse, Bind and Execute of an unnamed statement, for the extended query protocol. */
function executeMessages(sql: string, parameters: BoundStatement['parameters']): Buffer[] {
  return [frontendMessage('P', cString(''), cString(sql), int16(0)), bindMessage('', parameters), EXECUTE];
}

// Names of their own: pg's parsedStatements does not see what a pipeline prepares, so a text
// shared with `executePrepared` under one name could be parsed twice on a connection.
const copyPreparedNames = new Map<string, string>();
/** The named statements each pg client is known to hold (added once a pipeline using them succeeded). */
const preparedOnClient = new WeakMap<object, Set<string>>();

/**
 * The messages of `statement`: a known named statement is only bound; an unknown one is first
 * closed (no error when it does not exist: a failed pipeline may or may not have parsed it) and
 * parsed under its name.
 */
function statementMessages(statement: BoundStatement, known: Set<string>, used: string[]): Buffer[] {
  if (!statement.prepare) return executeMessages(statement.sql, statement.parameters);
  let name = copyPreparedNames.get(statement.sql);
  if (name === undefined) {
    name = `typeorm_checkpoint_copy_${copyPreparedNames.size + 1}`;
    copyPreparedNames.set(statement.sql, name);
  }
  used.push(name);
  const bind = bindMessage(name, statement.parameters);
  if (known.has(name)) return [bind, EXECUTE];
  return [frontendMessage('C', Buffer.from('S'), cString(name)), frontendMessage('P', cString(name), cString(statement.sql), int16(0)), bind, EXECUTE];
}

const COPY_DONE = frontendMessage('c');
const SYNC = frontendMessage('S');
const copyStatements = new Map<string, Buffer>();

/** Parse, Bind and Execute of a COPY … FROM STDIN, made once per table and columns. */
function copyStatement(table: string, columns: string[]): Buffer {
  const sql = `COPY ${doubleQuote(table)} (${columns.map(doubleQuote).join(', ')}) FROM STDIN`;
  let messages = copyStatements.get(sql);
  if (!messages) {
    messages = Buffer.concat(executeMessages(sql, []));
    copyStatements.set(sql, messages);
  }
  return messages;
}

/** The pg connection's socket, as a query object passed to `client.query` sees it. */
interface PgConnection {
  stream: { cork(): void; uncork(): void; write(chunk: Buffer): boolean };
}

/**
 * A pipeline of extended-protocol messages ending in Sync, sent as one write through pg's query
 * queue (pg hands a query object with `submit` the connection, as pg-copy-streams does): the
 * command tags arrive in order, then ReadyForQuery — or an ErrorResponse, after which the server
 * skips the rest up to the Sync.
 */
class MessagePipeline {
  readonly tags: string[] = [];
  readonly done: Promise<void>;
  private settle!: (error?: unknown) => void;

  constructor(private readonly messages: Buffer[]) {
    this.done = new Promise<void>((resolve, reject) => (this.settle = (error) => (error === undefined ? resolve() : reject(error))));
  }

  submit(connection: PgConnection): void {
    connection.stream.cork();
    for (const message of this.messages) connection.stream.write(message);
    connection.stream.uncork();
  }

  /** pg wraps it with its query timeout, when one is configured. */
  callback(): void {
    // Settled through handleReadyForQuery / handleError.
  }

  handleCommandComplete(message: { text: string }): void {
    this.tags.push(message.text);
  }

  handleError(error: unknown): void {
    this.settle(error ?? new Error('query failed'));
  }

  handleReadyForQuery(): void {
    this.settle();
  }

  // Messages a COPY pipeline does not produce, or needs nothing from.
  handleCopyInResponse(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/**
 * PostgreSQL's bulk path on the runner's own connection (its transaction): `around.before`, the
 * rows in COPY FROM STDIN statements of `COPY_ROWS_PER_STATEMENT` rows, `around.after`, all in
 * one round trip.
 */
async function copyFromStdin(runner: QueryRunner, table: string, columns: string[], rows: CopyRows, around: CopyAround = {}): Promise<void> {
  const client = await pgClientOf<{ query(query: MessagePipeline): unknown }>(runner);
  let known = preparedOnClient.get(client);
  if (!known) {
    known = new Set();
    preparedOnClient.set(client, known);
  }
  const used: string[] = [];
  const messages = (around.before ?? []).flatMap((statement) => statementMessages(statement, known, used));
  const copy = copyStatement(table, columns);
  for (let row = 0; row < rows.rows; row += COPY_ROWS_PER_STATEMENT) {
    const from = row === 0 ? 0 : rows.ends[row - 1];
    const data = rows.bytes.subarray(from, rows.ends[Math.min(rows.rows, row + COPY_ROWS_PER_STATEMENT) - 1]);
    messages.push(copy, Buffer.concat([Buffer.from('d'), int32(data.length + 4)]), data, COPY_DONE);
  }
  messages.push(...(around.after ?? []).flatMap((statement) => statementMessages(statement, known, used)), SYNC);
  const pipeline = new MessagePipeline(messages);
  client.query(pipeline);
  try {
    await pipeline.done;
  } catch (error) {
    for (const name of used) known.delete(name);
    throw error;
  }
  for (const name of used) known.add(name);
}

/** Nothing to prepare. */
const ready = () => true;

/** PostgreSQL's deterministic and SQLite's BINARY default collations compare text exactly. */
const defaultCollationIsExact = () => Promise.resolve(undefined);

const postgres: Dialect = {
  name: 'postgres',
  exactTextCollation: defaultCollationIsExact,
  prepare(dataSource) {
    // pg-pool hands out a new client from inside the socket read that completed its connection; an
    // error message in that same read (the connection killed right then) is emitted before TypeORM
    // attaches its listener, and an 'error' event nobody listens to crashes the whole process. A
    // listener on every new client leaves such a client merely unusable: its first query fails
    // (DATABASE_ERROR) and the pool drops it.
    const driver = dataSource.driver as unknown as { master?: EventEmitter; slaves?: EventEmitter[] };
    if (!driver.master) return false;
    for (const pool of [driver.master, ...(driver.slaves ?? [])]) {
      pool.on('connect', (client: EventEmitter) => client.on('error', ignoreClientError));
    }
    return true;
  },
  supportsSkipLocked: true,
  singleConnection: false,
  quote: doubleQuote,
  execute: executePrepared,
  sql(text) {
    let n = 0;
    return text.replace(questionMarks, () => `$${++n}`);
  },
  placeholder: (n) => `$${n}`,
  bindable: (value) => value,
  lexicon: { backslashEscapes: 'e-prefix', dollarQuotes: true },
  insertIgnore(table, columns, conflictColumns) {
    const cols = columns.map(doubleQuote).join(', ');
    const marks = columns.map(() => '?').join(', ');
    return this.sql(
      `INSERT INTO ${doubleQuote(table)} (${cols}) VALUES (${marks}) ON CONFLICT (${conflictColumns.map(doubleQuote).join(', ')}) DO NOTHING`,
    );
  },
  lockRow(table, keyColumn) {
    return { select: this.sql(`SELECT * FROM ${doubleQuote(table)} WHERE ${doubleQuote(keyColumn)} = ? FOR UPDATE`) };
  },
  skipLockedSuffix: ' FOR UPDATE SKIP LOCKED',
  supportsReturning: true,
  copyRows: copyFromStdin,
  insertIgnoreRows(table, columns, conflictColumns, rows) {
    return this.sql(onConflictDoNothing(table, columns, conflictColumns, rows));
  },
  insertMissingRows(runner, table, columns, conflictColumns, parameters, rows) {
    return affectedRows(runner, this.insertIgnoreRows(table, columns, conflictColumns, rows), parameters);
  },
  proposed: (column) => `EXCLUDED.${doubleQuote(column)}`,
  conditionalUpsert(table, columns, conflictColumn, assignments, condition) {
    return this.sql(onConflictUpdateWhere(table, columns, conflictColumn, assignments, condition));
  },
  async applyConditionalUpsert(runner, table, columns, conflictColumn, assignments, condition, parameters) {
    return (await affectedRows(runner, this.conditionalUpsert(table, columns, conflictColumn, assignments, condition), parameters)) > 0;
  },
  async tableInfo(manager, table) {
    const regclass = table.schema
      ? "to_regclass(quote_ident($1) || '.' || quote_ident($2))"
      : 'to_regclass(quote_ident($1))';
    const args = table.schema ? [table.schema, table.name] : [table.name];
    const found: { oid: string | null; ref: string | null }[] = await manager.query(
      `SELECT ${regclass}::oid AS oid, ${regclass}::text AS ref`,
      args,
    );
    const oid = found[0]?.oid;
    if (!oid) return null;
    const columns: { attname: string; attnum: number; typname: string; format: string }[] = await manager.query(
      `SELECT a.attname, a.attnum, t.typname, format_type(a.atttypid, a.atttypmod) AS format
         FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
        WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
      [oid],
    );
    const unique: { attname: string }[] = await manager.query(
      `SELECT a.attname FROM pg_index i
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
        WHERE i.indrelid = $1 AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
          AND i.indexprs IS NULL AND i.indnkeyatts = 1`,
      [oid],
    );
    const keyTypes: Record<string, ColumnInfo['keyType']> = {
      int2: 'integer', int4: 'integer', int8: 'bigint', text: 'text', varchar: 'text', bpchar: 'text', uuid: 'uuid',
    };
    return {
      columns: columns.map((c) => ({ name: c.attname, keyType: keyTypes[c.typname] ?? null, declaredType: c.format })),
      uniqueColumns: new Set(unique.map((u) => u.attname)),
      quotedTable: table.schema ? `${doubleQuote(table.schema)}.${doubleQuote(table.name)}` : doubleQuote(table.name),
    };
  },
};

/**
 * As TypeORM's SQLite drivers store a Date ('YYYY-MM-DD HH:MM:SS.SSS' in UTC) and a boolean (1/0):
 * better-sqlite3 refuses JS booleans, and TypeORM 0.3 passes them through unconverted.
 */
function sqliteBindable(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString().replace('T', ' ').replace('Z', '');
  return typeof value === 'boolean' ? Number(value) : value;
}

const sqlite: Dialect = {
  name: 'sqlite',
  exactTextCollation: defaultCollationIsExact,
  prepare: ready,
  supportsSkipLocked: false,
  singleConnection: true,
  quote: doubleQuote,
  execute: executeThroughRunner,
  sql: (text) => text,
  placeholder: () => '?',
  bindable: sqliteBindable,
  lexicon: { backslashEscapes: 'never', dollarQuotes: false },
  insertIgnore(table, columns) {
    const cols = columns.map(doubleQuote).join(', ');
    return `INSERT OR IGNORE INTO ${doubleQuote(table)} (${cols}) VALUES (${columns.map(() => '?').join(', ')})`;
  },
  lockRow(table, keyColumn) {
    const t = doubleQuote(table);
    const k = doubleQuote(keyColumn);
    // A deferred BEGIN takes no lock; this no-op write takes the database write lock first, so two
    // processes can never both read the same cursor.
    return { before: `UPDATE ${t} SET ${k} = ${k} WHERE ${k} = ?`, select: `SELECT * FROM ${t} WHERE ${k} = ?` };
  },
  skipLockedSuffix: '',
  supportsReturning: false,
  insertIgnoreRows: onConflictDoNothing,
  insertMissingRows(runner, table, columns, conflictColumns, parameters, rows) {
    return affectedRows(runner, onConflictDoNothing(table, columns, conflictColumns, rows), parameters);
  },
  proposed: (column) => `excluded.${doubleQuote(column)}`,
  conditionalUpsert: onConflictUpdateWhere,
  async applyConditionalUpsert(runner, table, columns, conflictColumn, assignments, condition, parameters) {
    return (await affectedRows(runner, onConflictUpdateWhere(table, columns, conflictColumn, assignments, condition), parameters)) > 0;
  },
  async tableInfo(manager, table) {
    const columns: { cid: number; name: string; type: string; pk: number }[] = await manager.query(
      'SELECT cid, name, type, pk FROM pragma_table_info(?)',
      [table.name],
    );
    if (columns.length === 0) return null;
    const unique = new Set<string>();
    const pk = columns.filter((c) => c.pk > 0);
    if (pk.length === 1) unique.add(pk[0].name);
    const indexes: { name: string; unique: number; partial: number }[] = await manager.query(
      'SELECT name, "unique", partial FROM pragma_index_list(?)',
      [table.name],
    );
    for (const index of indexes) {
      if (!index.unique || index.partial) continue;
      const parts: { cid: number; name: string | null }[] = await manager.query(
        'SELECT cid, name FROM pragma_index_info(?)',
        [index.name],
      );
      // cid -2 is an expression, -1 the rowid: neither is a plain column.
      if (parts.length === 1 && parts[0].cid >= 0 && parts[0].name) unique.add(parts[0].name);
    }
    return {
      columns: columns.map((c) => ({
        name: c.name,
        declaredType: c.type,
        keyType: SQLITE_INTEGER.test(c.type) ? 'integer' : SQLITE_TEXT.test(c.type) ? 'text' : null,
      })),
      uniqueColumns: unique,
      quotedTable: doubleQuote(table.name),
    };
  },
};

function backtick(identifier: string): string {
  return `\`${identifier.replace(/`/g, '``')}\``;
}

const mysql: Dialect = {
  name: 'mysql',
  async exactTextCollation(runner) {
    // The usual defaults (utf8mb4_general_ci, …_0900_ai_ci) ignore case and accents, and PAD SPACE
    // collations (utf8mb4_bin too) trailing spaces. Binary and NO PAD: MySQL 8 utf8mb4_0900_bin,
    // MariaDB utf8mb4_nopad_bin; older servers have only utf8mb4_bin.
    const found = (await runner.query(
      "SELECT COLLATION_NAME AS name FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN ('utf8mb4_0900_bin', 'utf8mb4_nopad_bin') ORDER BY COLLATION_NAME",
    )) as { name: string }[];
    return found[0]?.name ?? 'utf8mb4_bin';
  },
  prepare: ready,
  supportsSkipLocked: true,
  singleConnection: false,
  // InnoDB's default REPEATABLE READ locks every row an UPDATE scans, and the gaps between them, so
  // concurrent claims and completions deadlock; READ COMMITTED locks only matching rows, as PostgreSQL.
  ownTransactionIsolation: 'READ COMMITTED',
  quote: backtick,
  execute: executeThroughRunner,
  sql: (text) => text,
  placeholder: () => '?',
  bindable: (value) => value,
  lexicon: { backslashEscapes: 'always', dollarQuotes: false },
  insertIgnore(table, columns, conflictColumns) {
    const cols = columns.map(backtick).join(', ');
    // ON DUPLICATE KEY UPDATE of the key to itself: unlike INSERT IGNORE it hides no other error.
    const k = backtick(conflictColumns[0]);
    return `INSERT INTO ${backtick(table)} (${cols}) VALUES (${columns.map(() => '?').join(', ')}) ON DUPLICATE KEY UPDATE ${k} = ${k}`;
  },
  lockRow(table, keyColumn) {
    return { select: `SELECT * FROM ${backtick(table)} WHERE ${backtick(keyColumn)} = ? FOR UPDATE` };
  },
  skipLockedSuffix: ' FOR UPDATE SKIP LOCKED',
  supportsReturning: false,
  insertIgnoreRows(table, columns, conflictColumns, rows) {
    const k = backtick(conflictColumns[0]);
    return `INSERT INTO ${backtick(table)} (${columns.map(backtick).join(', ')}) VALUES ${valueRows(columns.length, rows)} ON DUPLICATE KEY UPDATE ${k} = ${k}`;
  },
  async insertMissingRows(runner, table, columns, conflictColumns, parameters, rows) {
    // With the found-rows flag (mysql2's default) a skipped row counts as affected, so the
    // statement counts its skips itself, in a session variable of this transaction's connection.
    const k = backtick(conflictColumns[0]);
    await runner.query('SET @checkpoint_skipped = 0');
    await runner.query(
      `INSERT INTO ${backtick(table)} (${columns.map(backtick).join(', ')}) VALUES ${valueRows(columns.length, rows)} ` +
        `ON DUPLICATE KEY UPDATE ${k} = IF((@checkpoint_skipped := @checkpoint_skipped + 1) > 0, ${k}, ${k})`,
      parameters,
    );
    const counted = (await runner.query('SELECT @checkpoint_skipped AS skipped')) as { skipped: number | string }[];
    return rows - Number(counted[0].skipped);
  },
  proposed: (column) => `VALUES(${backtick(column)})`,
  conditionalUpsert(table, columns, _conflictColumn, assignments, condition) {
    // MySQL applies assignments left to right, so the condition is evaluated once, up front (never
    // NULL, so that NULL afterwards means "not evaluated": the row was inserted).
    const updates = assignments.map(([column, value], i) => {
      const test = i === 0 ? `@checkpoint_upsert := COALESCE((${condition}), 0)` : '@checkpoint_upsert';
      return `${backtick(column)} = IF(${test}, ${value}, ${backtick(table)}.${backtick(column)})`;
    });
    return `INSERT INTO ${backtick(table)} (${columns.map(backtick).join(', ')}) VALUES ${valueRows(columns.length, 1)} ON DUPLICATE KEY UPDATE ${updates.join(', ')}`;
  },
  async applyConditionalUpsert(runner, table, columns, conflictColumn, assignments, condition, parameters) {
    // With the found-rows flag (mysql2's default) an existing row that failed the condition still
    // counts as affected; the condition's value, kept in a session variable, tells instead.
    await runner.query('SET @checkpoint_upsert = NULL');
    const affected = await affectedRows(runner, this.conditionalUpsert(table, columns, conflictColumn, assignments, condition), parameters);
    const outcome = (await runner.query('SELECT @checkpoint_upsert AS applied')) as { applied: number | string | null }[];
    const applied = outcome[0].applied;
    return applied === null ? affected > 0 : Number(applied) === 1;
  },
  async tableInfo(manager, table) {
    const schemaExpr = table.schema ? '?' : 'DATABASE()';
    const args = table.schema ? [table.schema, table.name] : [table.name];
    const columns: { name: string; dataType: string; columnType: string }[] = await manager.query(
      `SELECT COLUMN_NAME AS name, DATA_TYPE AS dataType, COLUMN_TYPE AS columnType FROM information_schema.COLUMNS
        WHERE TABLE_SCHEMA = ${schemaExpr} AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
      args,
    );
    if (columns.length === 0) return null;
    const indexes: { indexName: string; columnName: string | null; subPart: number | null; parts: number | string }[] =
      await manager.query(
        `SELECT INDEX_NAME AS indexName, MAX(COLUMN_NAME) AS columnName, MAX(SUB_PART) AS subPart, COUNT(*) AS parts
           FROM information_schema.STATISTICS
          WHERE TABLE_SCHEMA = ${schemaExpr} AND TABLE_NAME = ? AND NON_UNIQUE = 0
          GROUP BY INDEX_NAME`,
        args,
      );
    const keyTypes: Record<string, ColumnInfo['keyType']> = {
      tinyint: 'integer', smallint: 'integer', mediumint: 'integer', int: 'integer', bigint: 'bigint',
      varchar: 'text', char: 'text', text: 'text', uuid: 'uuid',
    };
    return {
      columns: columns.map((c) => ({ name: c.name, declaredType: c.columnType, keyType: keyTypes[c.dataType] ?? null })),
      // A prefix index (SUB_PART) or a functional index (no COLUMN_NAME) is not unique on the column.
      uniqueColumns: new Set(
        indexes.filter((i) => Number(i.parts) === 1 && i.columnName && i.subPart === null).map((i) => i.columnName as string),
      ),
      quotedTable: table.schema ? `${backtick(table.schema)}.${backtick(table.name)}` : backtick(table.name),
    };
  },
};

export function dialectOf(dataSource: DataSource): Dialect {
  const type: string = dataSource.options.type;
  switch (type) {
    case 'postgres':
      return postgres;
    case 'sqlite':
    case 'better-sqlite3':
      return sqlite;
    case 'mysql':
    case 'mariadb':
      return mysql;
    default:
      throw new InvalidArgumentError(
        `typeorm-checkpoint supports postgres, mysql/mariadb, sqlite and better-sqlite3 DataSources, not "${String(type)}".`,
      );
  }
}
