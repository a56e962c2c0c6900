import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { CopyAround } from './copy-pipeline';
import type { CopyRows } from './copy-text';
import type { CreateTableOptions, InferredColumn } from './create-table';
import type { RecordColumn } from './record-columns';
import type { RowCountQuery } from './row-estimate';

/** The column types a keyset key may have; timestamps and dates travel as canonical text. */
export type KeyType = 'integer' | 'bigint' | 'text' | 'uuid' | 'timestamp' | 'timestamptz' | 'date';

/** The column facts `sqlSource` needs, read from the real database catalogue. */
export interface ColumnInfo {
  name: string;
  /** Normalised key family; `null` when the type cannot be a keyset key. */
  keyType: KeyType | null;
  declaredType: string;
}

export interface TableInfo {
  columns: ColumnInfo[];
  /** The column sets that are unique: the primary key and each non-partial, non-expression unique index. */
  uniqueKeys: string[][];
  /** The table reference to put in SQL, already quoted. */
  quotedTable: string;
  /** The planner's row estimate where the catalogue keeps one (PostgreSQL's reltuples), else undefined. */
  estimatedRows?: number;
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

export interface RecordConflict {
  mode: 'skip' | 'update';
  /** The key the conflict is on (PostgreSQL and SQLite name it; MySQL uses any unique key). */
  keyColumns: string[];
  /** Columns a conflicting row overwrites ('update'). */
  update: string[];
}

/** The isolation levels a transaction of the library's may be opened with (fixed spellings, safe in SQL text). */
export type IsolationLevel = 'READ UNCOMMITTED' | 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE';

/** A transaction's last statement (an UPDATE, the dialect's placeholders): it must change exactly `expected` rows. */
export interface FinalStatement {
  sql: string;
  parameters: (string | number)[];
  expected: number;
  /**
   * The final also answers a yes/no question of the caller's, in the same statement (reported as
   * `PipelinedOutcome.flagged`), e.g. "is the job paused?". PostgreSQL: `returning`, an SQL boolean
   * over the changed rows (the final's own table named in full), true for any of them. MySQL/MariaDB
   * (no RETURNING): the statement is written to change `expected + 1` rows when the answer is yes
   * (e.g. a LEFT JOIN that matches a second row then), which holds too; `returning` is not used.
   */
  flag?: { returning: string };
}

/**
 * The first statement of the transaction a pipelined commit begins next: a `SELECT … FOR UPDATE`
 * (the dialect's placeholders) that must lock exactly `expected` rows, else nothing of it holds.
 */
export interface OpeningStatement {
  sql: string;
  parameters: (string | number)[];
  expected: number;
}

/**
 * A statement of the library's own sent right after a pipelined COMMIT, in a transaction of its own
 * (its own BEGIN and COMMIT, in the same round trip), whose rows come back: e.g. the next claim.
 * It is planned once per connection (a generic plan): its text must plan well without its values.
 */
export interface AfterCommitStatement {
  sql: string;
  parameters: (string | number)[];
}

/** What an after-commit statement did: its rows (text values by column) once it committed, or its failure. */
export type AfterCommitOutcome = { rows: Record<string, string | null>[] } | { error: unknown };

/** What a pipelined commit did: `held` false when a final changed other rows than it must (nothing committed); `opened` when the next transaction is open (begun, its opening statements held). */
export interface PipelinedOutcome {
  held: boolean;
  opened: boolean;
  /** The `after` statement's outcome, when one was sent (and the commit before it held). */
  after?: AfterCommitOutcome;
  /** The answer of the finals that carry a `flag` (true when any of them said yes), when the commit held. */
  flagged?: boolean;
}

/**
 * Transactions on a runner the library keeps, ended in the round trip of their last statements
 * (PostgreSQL), or each begun by the last one's COMMIT (MySQL/MariaDB's COMMIT AND CHAIN).
 * The runner's TypeORM transaction state is the caller's to keep: these only talk to the server.
 */
export interface PipelinedCommit {
  /**
   * True when `opening` statements travel in the COMMIT's round trip (PostgreSQL's pipeline); false
   * when each costs a round trip of its own (MySQL), where a caller that can check the same at
   * commit instead (a final guarded by the state it expects) saves that round trip.
   */
  readonly openingInCommit: boolean;
  /** Opens a transaction on the runner's connection. */
  begin(runner: QueryRunner, isolation?: IsolationLevel): Promise<void>;
  /**
   * In one round trip (PostgreSQL; on MySQL one a statement): `finals`, (with `asynchronous`)
   * `asynchronousCommit` — done by the last final itself where there is one —, COMMIT, and with
   * `beginNext` the next transaction's BEGIN and `opening`. `held` once committed; not when a final changed other than its `expected` rows — then
   * nothing was committed and the transaction is left failed, to be rolled back. Other errors before
   * the COMMIT completed are raised unchanged (roll back too). When an opening statement fails (its
   * rows changed, or any error) after the COMMIT, the next transaction is rolled back here: `opened`
   * false and no transaction open. `after` (only where `openingInCommit`; ignored elsewhere) runs
   * between the COMMIT and the next BEGIN in a transaction of its own; its failure is reported in
   * the outcome, never raised, and leaves no transaction open.
   */
  commit(
    runner: QueryRunner,
    finals: FinalStatement[],
    options: {
      asynchronous?: boolean;
      beginNext?: boolean;
      isolation?: IsolationLevel;
      opening?: OpeningStatement[];
      after?: AfterCommitStatement;
    },
  ): Promise<PipelinedOutcome>;
  /** Ends the runner's transaction (a no-op with a warning when there is none). */
  rollback(runner: QueryRunner): Promise<void>;
  /** True when someone waits for a connection of `dataSource`'s pool: a runner kept between transactions then stands in their way. */
  connectionWanted(dataSource: DataSource): boolean;
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
  /**
   * With `singleConnection`: the database file the DataSource shares with every other DataSource on
   * it (null: its own, in memory). The library serialises its transactions per file, not per DataSource.
   */
  readonly sharedFile?: (dataSource: DataSource) => string | null;
  /** Isolation level of the transactions the library opens itself; undefined keeps the DataSource's. */
  readonly ownTransactionIsolation?: 'READ COMMITTED';
  /**
   * Where the library may keep a runner between its own transactions and end each in the round
   * trip of its last statements (PostgreSQL), or begin each with the last one's COMMIT (MySQL/MariaDB);
   * undefined elsewhere (TypeORM's transactions then).
   */
  readonly pipelinedCommit?: PipelinedCommit;
  /**
   * Where the database has one writer at a time and its lock is not fair (SQLite), how long a loop
   * of the library's own transactions leaves the lock free between two batches, so that another
   * process's waiting writer (an operator's `pause`) gets it; undefined where locks are per row.
   */
  readonly writerHandoverMs?: number;
  /**
   * Where the lock is so (SQLite): the knocks an operator's write (pause, resume, cancel) leaves for
   * the running loops, which then leave the lock free for it between two batches (see sqlite-knock.ts).
   */
  readonly writerKnock?: WriterKnock;
  /**
   * Where the server can tell when the current transaction began (PostgreSQL): `now`, the server's
   * clock in epoch ms, which a pause, resume or cancel stores as the row's `updated_at`; and
   * `before(column)`, true in SQL when such a stored time is before the current transaction began.
   * A range's fenced commit then refuses a batch begun after its job was paused or cancelled.
   */
  readonly stateClock?: { now: string; before(column: string): string };
  /** Quotes an identifier (doubling the quote character inside it). */
  quote(identifier: string): string;
  /**
   * Runs one of the library's own statements (fixed text in the driver's placeholders, bound
   * values) on `runner`. PostgreSQL prepares each text once per connection (a named statement):
   * the hot claim statements then skip parsing and planning. Driver errors are raised unchanged.
   */
  execute<T = Record<string, unknown>>(runner: QueryRunner, sql: string, parameters: unknown[]): Promise<Executed<T>>;
  /**
   * Runs one of the library's own SELECTs (the driver's placeholders) as TypeORM's `query` would —
   * logged, its failure a QueryFailedError — and returns its rows, by a cheaper path where the
   * driver has one (better-sqlite3: rows read as arrays); undefined when it ran nothing, and the
   * caller then runs it through TypeORM.
   */
  readonly readRows?: (dataSource: DataSource, sql: string, parameters: unknown[]) => Record<string, unknown>[] | undefined;
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
  readonly copyRows?: (
    runner: QueryRunner,
    table: string | TableRef,
    columns: string[],
    rows: CopyRows,
    around?: CopyAround,
  ) => Promise<void>;
  /**
   * A statement that lets the current transaction's COMMIT return before its WAL is flushed
   * (PostgreSQL's `SET LOCAL synchronous_commit = off`): a database crash may lose that commit,
   * never half of it. Undefined where the dialect has no such setting.
   */
  readonly asynchronousCommit?: string;
  /**
   * The same as an expression, for a single statement's own (implicit) transaction:
   * `set_config('synchronous_commit', 'off', true)` on PostgreSQL. Undefined where there is none.
   */
  readonly asynchronousCommitExpression?: string;
  /** `insertIgnore` of `rows` rows in one statement (rows whose key exists are skipped). */
  insertIgnoreRows(table: string, columns: string[], conflictColumns: string[], rows: number): string;
  /**
   * Runs `insertIgnoreRows` on `runner` (a transaction's) and resolves to how many rows it
   * inserted, not how many the driver calls affected. Driver errors are raised unchanged.
   */
  insertMissingRows(
    runner: QueryRunner,
    table: string,
    columns: string[],
    conflictColumns: string[],
    parameters: unknown[],
    rows: number,
  ): Promise<number>;
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
   * How many rows `query` returns, read once when a job starts: PostgreSQL's planner estimate
   * (`EXPLAIN`), MySQL/MariaDB's `EXPLAIN` row count, SQLite's exact count up to 1M rows and an
   * estimate from a sample beyond; null when the database cannot tell.
   */
  estimateRows(manager: EntityManager, query: RowCountQuery): Promise<number | null>;
  /** What records mode checks values against: floats with NaN/±Infinity, text with U+0000. */
  readonly storable: { floatSpecials: boolean; textHoldsNul: boolean };
  /** The columns of `table` as records mode converts values for them, from the catalogue; null when there is no such table. */
  recordColumns(manager: EntityManager, table: TableRef): Promise<RecordColumn[] | null>;
  /** True when `table` names a view (records mode's `create` then tries the CREATE TABLE, and the database refuses it). */
  isView(manager: EntityManager, table: TableRef): Promise<boolean>;
  /**
   * The CREATE TABLE (IF NOT EXISTS) for columns inferred from a file, in this database's own types,
   * identifiers quoted: `recordColumns` reads each back as a kind whose conversion accepts every
   * value the inference saw. `primaryKey` (column names, in key order; may be empty) becomes the
   * PRIMARY KEY, its columns NOT NULL. INVALID_INPUT for fields
   * the database cannot hold as such (a too long name or key); INVALID_ARGUMENT for a bad key name.
   */
  createTable(table: TableRef, columns: InferredColumn[], primaryKey: string[], options?: CreateTableOptions): string;
  /**
   * A multi-row INSERT of `rows` rows (`?` placeholders, the driver's after `sql`); with `conflict`,
   * a row whose key exists keeps the old row ('skip') or overwrites `update` columns ('update').
   * MySQL: ON DUPLICATE KEY UPDATE (a no-op one for skip), never INSERT IGNORE.
   */
  insertRecords(table: TableRef, columns: string[], rows: number, conflict?: RecordConflict): string;
  /**
   * How a key column is read so the cursor holds it exactly: timestamps and dates as canonical
   * text with all six fraction digits (never through a JS Date); other types as they are.
   */
  keyRead(quotedColumn: string, keyType: KeyType): string;
  /** A bound key value cast back to the column's type (`placeholder` is the driver's mark). */
  keyBound(placeholder: string, keyType: KeyType): string;
  /**
   * The keyset condition `(columns) op (bounds)` in the form the database turns into an index
   * range scan: row values on PostgreSQL and SQLite; on MySQL/MariaDB the expanded form with a
   * redundant bound on the leading column. `bound(i)` returns a new placeholder for column i's value
   * (called once per use, so a form that repeats a value binds it again).
   */
  keysetCondition(quotedColumns: string[], op: '>' | '<=', bound: (column: number) => string): string;
  /**
   * A clause after the table name that reads a random sample of about `percent` % of the table's
   * pages (PostgreSQL's TABLESAMPLE SYSTEM: reads only those) or of its rows (BERNOULLI: reads every
   * page, keeps rows independently); undefined where the database has none (then an index walk).
   */
  readonly sampleClause?: (percentPlaceholder: string, unit: 'pages' | 'rows') => string;
  /**
   * The collation the checkpoint tables' text columns need so that keys differing only in case,
   * accents or trailing spaces stay different keys; undefined where the default already does.
   */
  exactTextCollation(runner: QueryRunner): Promise<string | undefined>;
  /**
   * Wake-ups between processes (PostgreSQL LISTEN/NOTIFY); undefined where workers only poll.
   * `notify` is a statement taking the channel as its one parameter, run inside the transaction
   * whose commit should wake listeners; `listen` keeps one dedicated connection listening on
   * `channel` until closed, re-establishing it when lost (reported to `onError`, then `wake` is
   * called, since notifications may have been missed meanwhile).
   */
  readonly wakeups?: {
    readonly notify: string;
    /**
     * `insert` (an INSERT without RETURNING) as one statement that also notifies `channel` (a
     * placeholder) when it inserted a row; its one row's `inserted` counts them. No transaction needed.
     */
    insertNotifying(insert: string, channel: string): string;
    listen(dataSource: DataSource, channel: string, wake: () => void, onError: (error: unknown) => void): { close(): Promise<void> };
  };
  /**
   * How far behind replicas are, in ms, read with `manager` (the DataSource's own, outside any
   * transaction) in one status statement: on a PostgreSQL primary the largest
   * `pg_stat_replication.replay_lag` of its standbys (NULL, caught up, is 0); on a MySQL/MariaDB
   * replica its own `Seconds_Behind_Source`/`Seconds_Behind_Master` (0 on a server that is no
   * replica, Infinity while its replication is stopped). Undefined where there are no replicas (SQLite).
   */
  readonly replicaLagMs?: (manager: EntityManager) => Promise<number>;
  /**
   * Makes an initialized DataSource safe for the library to use; called once per DataSource before
   * its first transaction. Returns false when it could not (not initialized yet), to be asked again.
   */
  prepare(dataSource: DataSource): boolean;
}

/** An operator's write past a loop that holds the one write lock between its batches (SQLite). */
export interface WriterKnock {
  /** Runs `write` with a knock left for the database's running loops. */
  knocking<T>(ds: DataSource, write: () => Promise<T>): Promise<T>;
  /** True when someone knocks now. */
  isKnocked(ds: DataSource): boolean;
  /** Leaves the lock free (outside any transaction) while someone knocks, for a bounded time. */
  yieldTo(ds: DataSource): Promise<void>;
}
