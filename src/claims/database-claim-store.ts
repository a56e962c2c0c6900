import { hash } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { claimableIndexPredicate, type FileCheckpoint, type FileStatus } from '../../entities/FileCheckpoint';
import { ownStatementError } from '../core/database-errors';
import { type AfterCommitOutcome, type AfterCommitStatement, type Dialect, dialectOf, type Executed, type FinalStatement } from '../dialect';
import { CheckpointError, DatabaseError, StoreUnavailableError } from '../core/errors';
import { run } from '../core/run-statement';
import { TransactionLane } from '../core/transaction-lane';
import { autocommit, type Db, dataSourceOf, joinsTransaction, transact } from '../core/transaction';
import {
  type Claimant,
  claimLost,
  type ClaimStore,
  type ClaimSummary,
  type FileRef,
  type HeldClaim,
  type NextClaim,
  type ProcessingStats,
  type Subscription,
} from './claim-store';
import {
  claimableCondition,
  claimAssignments,
  deadCondition,
  expiredOnLastAttempt,
  fencedCondition,
  LEASE_EXPIRED,
  stillProcessing,
} from './lease-rules';

const TABLE = 'file_checkpoints';
/** The channel `register` and `requeue` notify and idle workers listen on (where the dialect can). */
export const WAKE_CHANNEL = 'typeorm_checkpoint_files';
// Bounds the placeholders per statement well below every driver's limit (SQLite's is the lowest).
const ROWS_PER_STATEMENT = 50;
const URLS_PER_STATEMENT = 500;
const REGISTER_COLUMNS = [
  'url_hash', 'file_url', 'file_type', 'file_timestamp', 'status', 'records_total', 'records_filtered', 'records_persisted',
  'processing_time_ms', 'retry_count', 'max_retries', 'claim_token', 'created_at',
];
const CLAIM_COLUMNS = [...REGISTER_COLUMNS, 'processed_by', 'started_at', 'lease_expires_at'];

/** The row key: SHA-256 of the URL's UTF-8 bytes in lowercase hex (the migration's and SQL functions' too). */
export function urlHash(fileUrl: string): string {
  // The one-shot hash: a third of createHash's cost, paid on every completion and heartbeat.
  return hash('sha256', fileUrl, 'hex');
}

/** The store's statement texts, built once per dialect (they depend on nothing else). */
const statementsByDialect = new WeakMap<Dialect, Map<string, string>>();

/** A `file_checkpoints` row as the drivers return it (pg: int8 as strings). */
interface FileRow {
  url_hash: string;
  file_url: string;
  file_type: string;
  file_timestamp: number | string;
  status: string;
  records_total: number | string;
  records_filtered: number | string;
  records_persisted: number | string;
  processing_time_ms: number | string;
  error_message: string | null;
  retry_count: number | string;
  max_retries: number | string;
  processed_by: string | null;
  claim_token: number | string;
  lease_expires_at: number | string | null;
  started_at: number | string | null;
  completed_at: number | string | null;
  created_at: number | string;
}

function toFileCheckpoint(row: FileRow): FileCheckpoint {
  const date = (ms: number | string | null): Date | null => (ms === null ? null : new Date(Number(ms)));
  return {
    fileUrl: row.file_url,
    fileType: row.file_type,
    fileTimestamp: new Date(Number(row.file_timestamp)),
    status: row.status as FileStatus,
    recordsTotal: Number(row.records_total),
    recordsFiltered: Number(row.records_filtered),
    recordsPersisted: Number(row.records_persisted),
    processingTimeMs: Number(row.processing_time_ms),
    errorMessage: row.error_message,
    retryCount: Number(row.retry_count),
    maxRetries: Number(row.max_retries),
    processedBy: row.processed_by,
    claimToken: Number(row.claim_token),
    leaseExpiresAt: date(row.lease_expires_at),
    startedAt: date(row.started_at),
    completedAt: date(row.completed_at),
    createdAt: new Date(Number(row.created_at)),
  };
}

/** A failure of the caller's `work`, carried through the transaction helper untouched. */
class WorkFailure extends Error {
  constructor(readonly failure: unknown) {
    super('work failed');
  }
}

/** `work` with its failures carried through the transaction helpers untouched (never retried, never wrapped). */
function failureOf<T>(work: (tx: EntityManager | undefined) => Promise<T>): (tx: EntityManager) => Promise<T> {
  return async (tx) => {
    try {
      return await work(tx);
    } catch (error) {
      throw new WorkFailure(error);
    }
  };
}

/**
 * The claim rules in SQL over `file_checkpoints`, through the dialect adapter. Times are the
 * caller's clock (epoch ms bound as parameters), so every comparison is one plain number compare.
 * Every statement runs through `transact`, joining the caller's transaction when there is one.
 */
export class DatabaseClaimStore implements ClaimStore {
  private readonly dialect: Dialect;

  constructor(private readonly db: Db) {
    this.dialect = dialectOf(dataSourceOf(db));
  }

  private get table(): string {
    return this.dialect.quote(TABLE);
  }

  /** `column` of the existing row, qualified so it also reads right inside an upsert. */
  private existing(column: string): string {
    return `${this.table}.${this.dialect.quote(column)}`;
  }

  private claimable(now: string): string {
    return claimableCondition((column) => this.existing(column), now);
  }

  /** Oldest first, in IDX_file_checkpoints_claim_order's order, so a claim reads `limit` index entries, not the whole queue. */
  private claimOrder(): string {
    return `${this.dialect.quote('created_at')}, ${this.dialect.quote('url_hash')}`;
  }

  /**
   * claimNext's condition: the claim order index's predicate (implied by the claimable condition,
   * repeated so every planner sees the partial index applies), then the claimable condition.
   */
  private pickable(now: string): string {
    return `(${claimableIndexPredicate((column) => this.existing(column))}) AND ${this.claimable(now)}`;
  }

  private claimAssignments(worker: string, startedAt: string, leaseExpiresAt: string): [string, string][] {
    return claimAssignments((column) => this.existing(column), worker, startedAt, leaseExpiresAt);
  }

  private sql(text: string): string {
    return this.dialect.sql(text);
  }

  /**
   * Any failure of the store's own statements is STORE_UNAVAILABLE with the database error as
   * `cause` — never a silent switch to memory. The caller's errors and typed ones pass through.
   */
  private async guard<T>(what: string, operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      if (error instanceof WorkFailure) throw error.failure;
      if (error instanceof CheckpointError && !(error instanceof DatabaseError)) throw error;
      const cause = error instanceof DatabaseError && error.cause !== undefined ? error.cause : error;
      const detail = cause instanceof Error ? cause.message : String(cause);
      throw new StoreUnavailableError(
        `The claim store's database failed while ${what} (${detail}). Nothing was claimed in memory instead; ` +
          'check the DataSource (connection, migrations) and retry.',
        { cause },
      );
    }
  }

  /**
   * Runs one of the store's own statements through the dialect (prepared once per connection on
   * PostgreSQL). `sql` is built once per dialect and kept under `key`: the claim path is hot.
   */
  private async execute<T = FileRow>(tx: EntityManager, key: string, build: () => string, parameters: unknown[], what: string): Promise<Executed<T>> {
    try {
      return await this.dialect.execute<T>(tx.queryRunner!, this.statement(key, build), parameters);
    } catch (error) {
      throw ownStatementError(error, what);
    }
  }

  private statement(key: string, build: () => string): string {
    let statements = statementsByDialect.get(this.dialect);
    if (!statements) {
      statements = new Map();
      statementsByDialect.set(this.dialect, statements);
    }
    let sql = statements.get(key);
    if (sql === undefined) {
      sql = build();
      statements.set(key, sql);
    }
    return sql;
  }

  private async readRow(tx: EntityManager, fileUrl: string): Promise<FileRow | undefined> {
    const rows = await run<FileRow[]>(
      tx,
      this.sql(`SELECT * FROM ${this.table} WHERE ${this.byUrl()}`),
      [urlHash(fileUrl), fileUrl],
      `reading "${fileUrl}"`,
    );
    return rows[0];
  }

  /**
   * A lease that expired on the last allowed attempt turns its file into a dead letter; run first
   * in a transaction, it also takes SQLite's write lock (a write) before anything is read.
   */
  private async expireLastAttempts(tx: EntityManager, now: number, fileUrl?: string): Promise<void> {
    const q = (column: string) => this.dialect.quote(column);
    const expired = expiredOnLastAttempt(q, '?');
    const expire = (hashes: string[]) =>
      run(
        tx,
        this.sql(
          `UPDATE ${this.table} SET ${q('status')} = 'failed', ${q('error_message')} = ?, ${q('lease_expires_at')} = NULL ` +
            `WHERE ${q('url_hash')} IN (${hashes.map(() => '?').join(', ')}) AND ${expired}`,
        ),
        [LEASE_EXPIRED, ...hashes, now],
        'expiring leases',
      );
    if (fileUrl !== undefined) {
      await expire([urlHash(fileUrl)]);
      return;
    }
    // Find them with a plain read, then update by key (the condition checked again): an UPDATE
    // that scans by status locks rows in index order, against completions' key order (MySQL deadlocks).
    const lock = this.dialect.lockRow(TABLE, 'url_hash');
    if (lock.before) await run(tx, lock.before, [''], 'expiring leases');
    const rows = await run<{ url_hash: string }[]>(
      tx,
      this.sql(`SELECT ${q('url_hash')} FROM ${this.table} WHERE ${expired}`),
      [now],
      'expiring leases',
    );
    const hashes = rows.map((row) => row.url_hash);
    for (let i = 0; i < hashes.length; i += URLS_PER_STATEMENT) await expire(hashes.slice(i, i + URLS_PER_STATEMENT));
  }

  async claim(file: FileRef, claimant: Claimant, now: number): Promise<number | null> {
    const d = this.dialect;
    const parameters = [
      urlHash(file.fileUrl), file.fileUrl, file.fileType, file.fileTimestamp.getTime(), 'processing', 0, 0, 0, 0, 0, claimant.maxRetries, 1, now,
      claimant.workerId, now, now + claimant.leaseMs,
    ];
    if (d.supportsReturning) {
      // One statement, no transaction of its own (PostgreSQL's SQL, as everywhere under
      // supportsReturning): claim the existing row by key (a plain UPDATE, the common case: files are
      // registered or seen before), else insert it — or, when another worker inserted it meanwhile,
      // apply the claim where the condition holds. The condition already refuses a lease that
      // expired on the last attempt (readers turn that row into a dead letter before showing it).
      const build = () => {
        const at = (column: string) => d.placeholder(CLAIM_COLUMNS.indexOf(column) + 1);
        const set = (assignments: [string, string][]) => assignments.map(([column, value]) => `${d.quote(column)} = ${value}`).join(', ');
        const claimByKey = set(this.claimAssignments(at('processed_by'), at('started_at'), at('lease_expires_at')));
        const claimOnConflict = set(this.claimAssignments(d.proposed('processed_by'), d.proposed('started_at'), d.proposed('lease_expires_at')));
        const byKey = `${this.existing('url_hash')} = ${at('url_hash')} AND ${this.existing('file_url')} = ${at('file_url')}`;
        return (
          `WITH updated AS (UPDATE ${this.table} SET ${claimByKey} WHERE ${byKey} AND ${this.claimable(at('started_at'))} ` +
            `RETURNING ${this.existing('claim_token')}), ` +
            `inserted AS (INSERT INTO ${this.table} (${CLAIM_COLUMNS.map((column) => d.quote(column)).join(', ')}) ` +
            `SELECT ${CLAIM_COLUMNS.map((_, i) => d.placeholder(i + 1)).join(', ')} WHERE NOT EXISTS (SELECT 1 FROM ${this.table} WHERE ${byKey}) ` +
            `ON CONFLICT (${d.quote('url_hash')}) DO UPDATE SET ${claimOnConflict} ` +
            `WHERE ${this.existing('file_url')} = ${d.proposed('file_url')} AND ${this.claimable(d.proposed('started_at'))} ` +
            `RETURNING ${this.existing('claim_token')}) ` +
            `SELECT ${d.quote('claim_token')} FROM updated UNION ALL SELECT ${d.quote('claim_token')} FROM inserted`
        );
      };
      return this.guard(`claiming "${file.fileUrl}"`, () =>
        autocommit(this.db, async (tx) => {
          const { rows } = await this.execute<{ claim_token: number | string }>(tx, 'claim', build, parameters, `claiming "${file.fileUrl}"`);
          return rows.length > 0 ? Number(rows[0].claim_token) : null;
        }),
      );
    }
    return this.guard(`claiming "${file.fileUrl}"`, () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now, file.fileUrl);
        let claimed: boolean;
        try {
          claimed = await d.applyConditionalUpsert(
            tx.queryRunner!,
            TABLE,
            CLAIM_COLUMNS,
            'url_hash',
            this.claimAssignments(d.proposed('processed_by'), d.proposed('started_at'), d.proposed('lease_expires_at')),
            // The proposed row's started_at is `now`: the condition needs no placeholder of its own.
            `${this.existing('file_url')} = ${d.proposed('file_url')} AND ${this.claimable(d.proposed('started_at'))}`,
            parameters,
          );
        } catch (error) {
          throw ownStatementError(error, `claiming "${file.fileUrl}"`);
        }
        if (!claimed) return null;
        // The row stays locked by the upsert until commit: the token read here is this claim's.
        const row = await this.readRow(tx, file.fileUrl);
        return row ? Number(row.claim_token) : null;
      }),
    );
  }

  /**
   * claimNext's one statement where the dialect has RETURNING: pick (SKIP LOCKED), claim and return
   * the rows, oldest first. `unflushed`: its commit does not wait for the WAL flush.
   */
  private claimNextStatement(
    limit: number,
    fileType: string | undefined,
    claimant: Claimant,
    now: number,
    unflushed: boolean,
  ): { sql: string; parameters: (string | number)[] } {
    const q = (column: string) => this.dialect.quote(column);
    const byType = fileType === undefined ? '' : ` AND ${this.existing('file_type')} = ?`;
    const build = () => {
      const assignments = this.claimAssignments('?', '?', '?')
        .map(([column, value]) => `${q(column)} = ${value}`)
        .join(', ');
      return this.sql(
        `WITH picked AS (SELECT ${q('url_hash')} FROM ${this.table} WHERE ${this.pickable('?')}${byType} ` +
          `ORDER BY ${this.claimOrder()} LIMIT ?${this.dialect.skipLockedSuffix}), ` +
          // The picked keys as an array, so even a generic plan (the after-commit claim's) finds the
          // rows by the key rather than joining the picked ones with the whole table.
          `claimed AS (UPDATE ${this.table} SET ${assignments} WHERE ${this.existing('url_hash')} = ANY (ARRAY(SELECT ${q('url_hash')} FROM picked)) ` +
          `RETURNING ${this.table}.*) SELECT claimed.* FROM claimed` +
          (unflushed ? `, (SELECT ${this.dialect.asynchronousCommitExpression}) AS ${q('unflushed')}` : '') +
          ` ORDER BY ${this.claimOrder()}`,
      );
    };
    const parameters = [now, ...(fileType === undefined ? [] : [fileType]), limit, claimant.workerId, now, now + claimant.leaseMs];
    const key = `claimNext${fileType === undefined ? '' : ' of type'}${unflushed ? ', unflushed' : ''}`;
    return { sql: this.statement(key, build), parameters };
  }

  async claimNext(limit: number, fileType: string | undefined, claimant: Claimant, now: number): Promise<FileCheckpoint[]> {
    const q = (column: string) => this.dialect.quote(column);
    const byType = fileType === undefined ? '' : ` AND ${this.existing('file_type')} = ?`;
    if (this.dialect.supportsReturning) {
      // A claim's commit need not wait for its WAL flush: a crash can lose it only together with
      // everything after it (a completion's synchronous commit flushes the claim first), and a lost
      // claim leaves the file to run again, its attempt uncounted. Not in a caller's transaction,
      // whose own commit must stay as durable as the caller made it.
      const unflushed = this.dialect.asynchronousCommitExpression !== undefined && !joinsTransaction(this.db);
      // One statement, no transaction of its own: pick (SKIP LOCKED), claim and return the rows.
      const { sql, parameters } = this.claimNextStatement(limit, fileType, claimant, now, unflushed);
      return this.guard('claiming the next files', () =>
        autocommit(this.db, async (tx) =>
          (await this.execute(tx, sql, () => sql, parameters, 'claiming the next files')).rows.map(toFileCheckpoint),
        ),
      );
    }
    return this.guard('claiming the next files', () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now);
        // The picked rows stay locked until commit (SKIP LOCKED row locks; SQLite's write lock,
        // taken above), so the update below changes exactly them and no other worker can.
        const picked = await run<{ url_hash: string }[]>(
          tx,
          this.sql(
            `SELECT ${q('url_hash')} FROM ${this.table} WHERE ${this.pickable('?')}${byType} ` +
              `ORDER BY ${this.claimOrder()} LIMIT ?${this.dialect.skipLockedSuffix}`,
          ),
          fileType === undefined ? [now, limit] : [now, fileType, limit],
          'picking the next files',
        );
        const hashes = picked.map((row) => row.url_hash);
        const assignments = this.claimAssignments('?', '?', '?')
          .map(([column, value]) => `${q(column)} = ${value}`)
          .join(', ');
        const rows: FileRow[] = [];
        for (let i = 0; i < hashes.length; i += URLS_PER_STATEMENT) {
          const chunk = hashes.slice(i, i + URLS_PER_STATEMENT);
          const marks = chunk.map(() => '?').join(', ');
          await run(
            tx,
            this.sql(`UPDATE ${this.table} SET ${assignments} WHERE ${q('url_hash')} IN (${marks})`),
            [claimant.workerId, now, now + claimant.leaseMs, ...chunk],
            'claiming the next files',
          );
          rows.push(
            ...(await run<FileRow[]>(
              tx,
              this.sql(`SELECT * FROM ${this.table} WHERE ${q('url_hash')} IN (${marks})`),
              chunk,
              'reading the claimed files',
            )),
          );
        }
        const order = new Map(hashes.map((hash, i) => [hash, i]));
        return rows.sort((a, b) => order.get(a.url_hash)! - order.get(b.url_hash)!).map(toFileCheckpoint);
      }),
    );
  }

  /** The fenced completion of one claim: it changes its one row, or the claim is no longer held. */
  private completion(fileUrl: string, token: number, stats: ProcessingStats, now: number): FinalStatement {
    const q = (column: string) => this.dialect.quote(column);
    const build = () =>
      this.sql(
        `UPDATE ${this.table} SET ${q('status')} = 'completed', ${q('records_total')} = ?, ${q('records_filtered')} = ?, ` +
          `${q('records_persisted')} = ?, ${q('processing_time_ms')} = ?, ${q('completed_at')} = ?, ${q('lease_expires_at')} = NULL ` +
          `WHERE ${this.fenced()}`,
      );
    const parameters = [stats.totalRows, stats.filteredRows, stats.persistedRows, stats.durationMs, now, urlHash(fileUrl), fileUrl, token];
    return { sql: this.statement('complete', build), parameters, expected: 1 };
  }

  private async completeIn(tx: EntityManager, fileUrl: string, token: number, stats: ProcessingStats, now: number): Promise<boolean> {
    const { sql, parameters } = this.completion(fileUrl, token, stats, now);
    return (await this.execute(tx, 'complete', () => sql, parameters, `completing "${fileUrl}"`)).affected > 0;
  }

  /** A row by its URL: the key is the URL's hash, and the URL itself is compared too. */
  private byUrl(): string {
    return `${this.dialect.quote('url_hash')} = ? AND ${this.dialect.quote('file_url')} = ?`;
  }

  /** The fencing condition: the presented token is current and the file is still processing. */
  private fenced(): string {
    const q = (column: string) => this.dialect.quote(column);
    return `${this.byUrl()} AND ${fencedCondition(q, '?')}`;
  }

  async complete(fileUrl: string, token: number, stats: ProcessingStats, now: number): Promise<boolean> {
    // One fenced UPDATE: atomic on its own, so no transaction of its own.
    return this.guard(`completing "${fileUrl}"`, () => autocommit(this.db, (tx) => this.completeIn(tx, fileUrl, token, stats, now)));
  }

  async completeWith(
    fileUrl: string,
    token: number,
    work: (tx: EntityManager | undefined) => Promise<ProcessingStats>,
    lane?: TransactionLane,
    next?: NextClaim,
  ): Promise<ProcessingStats> {
    const what = `completing "${fileUrl}"`;
    if (lane && TransactionLane.fits(this.db)) {
      // The fenced completion and the COMMIT in one round trip: a lost claim fails the completion,
      // which keeps the COMMIT from running, so work's writes roll back with it.
      return this.guard(what, async () => {
        const { result, held, after } = await lane.transact(
          this.db, failureOf(work), (stats) => [this.completion(fileUrl, token, stats, Date.now())], what, undefined, this.afterCommit(next),
        );
        this.settle(next, after);
        if (!held) throw claimLost(fileUrl, 'complete');
        return result;
      });
    }
    return this.guard(what, () =>
      transact(this.db, async (tx) => {
        // SQLite: take the write lock before work reads anything, so its snapshot cannot go stale.
        // Elsewhere nothing is locked until the completion, so a stalled worker blocks no takeover.
        const lock = this.dialect.lockRow(TABLE, 'url_hash');
        if (lock.before) await run(tx, lock.before, [urlHash(fileUrl)], `locking "${fileUrl}"`);
        const stats = await failureOf(work)(tx);
        // The fenced update commits with work's writes, or CLAIM_LOST rolls them back with it.
        if (!(await this.completeIn(tx, fileUrl, token, stats, Date.now()))) throw claimLost(fileUrl, 'complete');
        return stats;
      }),
    );
  }

  claimsWithCommit(): boolean {
    return this.dialect.supportsReturning && this.dialect.pipelinedCommit?.openingInCommit === true && TransactionLane.fits(this.db);
  }

  /**
   * `next`'s claim as the statement a lane runs right after a completion's COMMIT (in a transaction
   * of its own, committing unflushed as claimNext's does), built when the commit is sent.
   */
  private afterCommit(next: NextClaim | undefined): (() => AfterCommitStatement | undefined) | undefined {
    if (!next || !this.claimsWithCommit()) return undefined;
    return () => {
      const limit = next.limit();
      if (limit <= 0) return undefined;
      const unflushed = this.dialect.asynchronousCommitExpression !== undefined;
      return this.claimNextStatement(limit, next.fileType, next.claimant, Date.now(), unflushed);
    };
  }

  /** Hands `next` the files its after-commit claim took, or its failure (as claimNext would raise it). */
  private settle(next: NextClaim | undefined, after: AfterCommitOutcome | undefined): void {
    if (!next || !after) return;
    if ('rows' in after) {
      next.claimed((after.rows as unknown as FileRow[]).map(toFileCheckpoint));
      return;
    }
    const what = 'claiming the next files';
    this.guard(what, () => Promise.reject(ownStatementError(after.error, what))).catch((error: unknown) => next.failed(error));
  }

  /** `(url_hash = ? AND file_url = ? AND claim_token = ?) OR …` for `files` claims, with the row still processing. */
  private fencedAll(files: number): string {
    const q = (column: string) => this.dialect.quote(column);
    const one = `(${this.byUrl()} AND ${q('claim_token')} = ?)`;
    return `${stillProcessing(q)} AND (${Array.from({ length: files }, () => one).join(' OR ')})`;
  }

  /** The fenced completions of `files` (one statement per ROWS_PER_STATEMENT files), each changing all its files' rows. */
  private completions(files: HeldClaim[], stats: ProcessingStats[], now: number): FinalStatement[] {
    const q = (column: string) => this.dialect.quote(column);
    const finals: FinalStatement[] = [];
    for (let i = 0; i < files.length; i += ROWS_PER_STATEMENT) {
      const chunk = files.slice(i, i + ROWS_PER_STATEMENT);
      // Each stat column is a CASE over the chunk's URLs; its ELSE keeps the column's own type,
      // which types the bound values on PostgreSQL too.
      const column = (name: string) =>
        `${q(name)} = CASE ${chunk.map(() => `WHEN ${q('url_hash')} = ? THEN ?`).join(' ')} ELSE ${q(name)} END`;
      const build = () =>
        this.sql(
          `UPDATE ${this.table} SET ${q('status')} = 'completed', ${column('records_total')}, ${column('records_filtered')}, ` +
            `${column('records_persisted')}, ${column('processing_time_ms')}, ${q('completed_at')} = ?, ` +
            `${q('lease_expires_at')} = NULL WHERE ${this.fencedAll(chunk.length)}`,
        );
      const hashes = chunk.map((file) => urlHash(file.fileUrl));
      const values = (pick: (s: ProcessingStats) => number) => chunk.flatMap((_, j) => [hashes[j], pick(stats[i + j])]);
      const parameters = [
        ...values((s) => s.totalRows), ...values((s) => s.filteredRows), ...values((s) => s.persistedRows),
        ...values((s) => s.durationMs), now, ...chunk.flatMap((file, j) => [hashes[j], file.fileUrl, file.token]),
      ];
      finals.push({ sql: this.statement(`completeAll:${chunk.length}`, build), parameters, expected: chunk.length });
    }
    return finals;
  }

  async completeAll(
    files: HeldClaim[],
    work: (tx: EntityManager | undefined) => Promise<ProcessingStats[]>,
    lane?: TransactionLane,
    next?: NextClaim,
  ): Promise<ProcessingStats[]> {
    const what = `completing ${files.length} files`;
    // All or nothing: one lost claim rolls back every file's writes, and the caller runs them one by one.
    const lost = () => claimLost(files.map((file) => file.fileUrl).join('", "'), 'complete');
    if (lane && TransactionLane.fits(this.db)) {
      return this.guard(what, async () => {
        const { result, held, after } = await lane.transact(
          this.db, failureOf(work), (stats) => this.completions(files, stats, Date.now()), what, undefined, this.afterCommit(next),
        );
        this.settle(next, after);
        if (!held) throw lost();
        return result;
      });
    }
    return this.guard(what, () =>
      transact(this.db, async (tx) => {
        const lock = this.dialect.lockRow(TABLE, 'url_hash');
        if (lock.before) await run(tx, lock.before, [urlHash(files[0].fileUrl)], `locking "${files[0].fileUrl}"`);
        const stats = await failureOf(work)(tx);
        let completed = 0;
        for (const final of this.completions(files, stats, Date.now())) {
          completed += (await this.execute(tx, final.sql, () => final.sql, final.parameters, what)).affected;
        }
        if (completed !== files.length) throw lost();
        return stats;
      }),
    );
  }

  async release(files: HeldClaim[]): Promise<number> {
    const q = (column: string) => this.dialect.quote(column);
    const what = `giving back ${files.length} files`;
    return this.guard(what, () =>
      transact(this.db, async (tx) => {
        let released = 0;
        for (let i = 0; i < files.length; i += ROWS_PER_STATEMENT) {
          const chunk = files.slice(i, i + ROWS_PER_STATEMENT);
          // retry_count stays: a pending row's next claim counts no attempt, so the count is as before this claim.
          const build = () =>
            this.sql(
              `UPDATE ${this.table} SET ${q('status')} = 'pending', ${q('claim_token')} = ${q('claim_token')} + 1, ` +
                `${q('lease_expires_at')} = NULL WHERE ${this.fencedAll(chunk.length)}`,
            );
          const parameters = chunk.flatMap((file) => [urlHash(file.fileUrl), file.fileUrl, file.token]);
          released += (await this.execute(tx, `release:${chunk.length}`, build, parameters, what)).affected;
        }
        if (released > 0) await this.notify(tx);
        return released;
      }),
    );
  }

  /** Wakes idle workers when `tx` commits (PostgreSQL NOTIFY is delivered on commit); nothing elsewhere. */
  private async notify(tx: EntityManager): Promise<void> {
    const wakeups = this.dialect.wakeups;
    if (!wakeups) return;
    await this.execute(tx, 'notify', () => wakeups.notify, [WAKE_CHANNEL], 'waking the workers');
  }

  subscribe(wake: () => void, onError: (error: unknown) => void): Subscription | undefined {
    return this.dialect.wakeups?.listen(dataSourceOf(this.db), WAKE_CHANNEL, wake, onError);
  }

  async fail(fileUrl: string, token: number, errorMessage: string): Promise<boolean> {
    const q = (column: string) => this.dialect.quote(column);
    const build = () =>
      this.sql(
        `UPDATE ${this.table} SET ${q('status')} = 'failed', ${q('error_message')} = ?, ${q('lease_expires_at')} = NULL ` +
          `WHERE ${this.fenced()}`,
      );
    return this.guard(`failing "${fileUrl}"`, () =>
      autocommit(this.db, async (tx) =>
        (await this.execute(tx, 'fail', build, [errorMessage, urlHash(fileUrl), fileUrl, token], `failing "${fileUrl}"`)).affected > 0,
      ),
    );
  }

  async heartbeat(fileUrl: string, token: number, leaseExpiresAt: number): Promise<boolean> {
    const q = (column: string) => this.dialect.quote(column);
    const build = () => this.sql(`UPDATE ${this.table} SET ${q('lease_expires_at')} = ? WHERE ${this.fenced()}`);
    const what = `extending the lease of "${fileUrl}"`;
    return this.guard(what, () =>
      autocommit(this.db, async (tx) => (await this.execute(tx, 'heartbeat', build, [leaseExpiresAt, urlHash(fileUrl), fileUrl, token], what)).affected > 0),
    );
  }

  async heartbeatAll(files: HeldClaim[], leaseExpiresAt: number): Promise<Set<string>> {
    const q = (column: string) => this.dialect.quote(column);
    const what = `extending the leases of ${files.length} files`;
    const returning = this.dialect.supportsReturning;
    // One fenced UPDATE per chunk: with RETURNING it tells which claims are held; elsewhere a read in
    // the same transaction does (a kept row has this lease and the presented token).
    const extend = (tx: EntityManager, chunk: HeldClaim[]) => {
      const build = () =>
        this.sql(
          `UPDATE ${this.table} SET ${q('lease_expires_at')} = ? WHERE ${this.fencedAll(chunk.length)}` +
            (returning ? ` RETURNING ${q('file_url')}, ${q('claim_token')}` : ''),
        );
      const parameters = [leaseExpiresAt, ...chunk.flatMap((file) => [urlHash(file.fileUrl), file.fileUrl, file.token])];
      return this.execute<{ file_url: string; claim_token: number | string }>(tx, `heartbeatAll:${chunk.length}`, build, parameters, what);
    };
    const held = (chunk: HeldClaim[], rows: { file_url: string; claim_token: number | string }[], kept: Set<string>) => {
      const tokens = new Map(rows.map((row) => [row.file_url, Number(row.claim_token)]));
      for (const file of chunk) if (tokens.get(file.fileUrl) === file.token) kept.add(file.fileUrl);
    };
    return this.guard(what, () =>
      (returning ? autocommit : transact)(this.db, async (tx) => {
        const kept = new Set<string>();
        for (let i = 0; i < files.length; i += ROWS_PER_STATEMENT) {
          const chunk = files.slice(i, i + ROWS_PER_STATEMENT);
          const { rows } = await extend(tx, chunk);
          if (returning) {
            held(chunk, rows, kept);
            continue;
          }
          const read = await run<{ file_url: string; claim_token: number | string }[]>(
            tx,
            this.sql(
              `SELECT ${q('file_url')}, ${q('claim_token')} FROM ${this.table} WHERE ${q('lease_expires_at')} = ? AND ${this.fencedAll(chunk.length)}`,
            ),
            [leaseExpiresAt, ...chunk.flatMap((file) => [urlHash(file.fileUrl), file.fileUrl, file.token])],
            what,
          );
          held(chunk, read, kept);
        }
        return kept;
      }),
    );
  }

  async isCompleted(fileUrl: string): Promise<boolean> {
    return this.guard(`reading "${fileUrl}"`, () =>
      transact(this.db, async (tx) => (await this.readRow(tx, fileUrl))?.status === 'completed'),
    );
  }

  async get(fileUrl: string, now: number): Promise<FileCheckpoint | null> {
    return this.guard(`reading "${fileUrl}"`, () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now, fileUrl);
        const row = await this.readRow(tx, fileUrl);
        return row ? toFileCheckpoint(row) : null;
      }),
    );
  }

  async register(files: FileRef[], maxRetries: number, now: number): Promise<number> {
    const rowsOf = (chunk: FileRef[]) =>
      chunk.flatMap((file) => [
        urlHash(file.fileUrl), file.fileUrl, file.fileType, file.fileTimestamp.getTime(), 'pending', 0, 0, 0, 0, 0, maxRetries, 0, now,
      ]);
    const wakeups = this.dialect.wakeups;
    if (wakeups && files.length <= ROWS_PER_STATEMENT) {
      // One statement, inserting and notifying, with no transaction of its own: one round trip
      // instead of four, which is most of the wake-up latency of an idle worker.
      const d = this.dialect;
      const build = () =>
        wakeups.insertNotifying(
          d.insertIgnoreRows(TABLE, REGISTER_COLUMNS, ['url_hash'], files.length),
          d.placeholder(REGISTER_COLUMNS.length * files.length + 1),
        );
      return this.guard('registering files', () =>
        autocommit(this.db, async (tx) => {
          const { rows } = await this.execute<{ inserted: number | string }>(
            tx, `register:${files.length}`, build, [...rowsOf(files), WAKE_CHANNEL], 'registering files',
          );
          return Number(rows[0].inserted);
        }),
      );
    }
    return this.guard('registering files', () =>
      transact(this.db, async (tx) => {
        let inserted = 0;
        for (let i = 0; i < files.length; i += ROWS_PER_STATEMENT) {
          const chunk = files.slice(i, i + ROWS_PER_STATEMENT);
          const parameters = rowsOf(chunk);
          try {
            inserted += await this.dialect.insertMissingRows(tx.queryRunner!, TABLE, REGISTER_COLUMNS, ['url_hash'], parameters, chunk.length);
          } catch (error) {
            throw ownStatementError(error, 'registering files');
          }
        }
        if (inserted > 0) await this.notify(tx);
        return inserted;
      }),
    );
  }

  /**
   * Turns the files whose lease expired on their last attempt into dead letters, as every reader
   * here does first: for readers of the table outside the store (the dashboard). A plain read
   * finds none in the common case, and then nothing is written (no SQLite write lock taken).
   */
  async expireLeases(now: number): Promise<void> {
    const q = (column: string) => this.dialect.quote(column);
    await this.guard('expiring leases', async () => {
      // A count, not LIMIT 1: PostgreSQL would answer `LIMIT 1` by a sequential scan it expects to stop early.
      const [found] = await autocommit(this.db, (tx) =>
        run<{ n: number | string }[]>(tx, this.sql(`SELECT COUNT(*) AS ${q('n')} FROM ${this.table} WHERE ${expiredOnLastAttempt(q, '?')}`), [now], 'expiring leases'),
      );
      if (Number(found?.n ?? 0) > 0) await transact(this.db, (tx) => this.expireLastAttempts(tx, now));
    });
  }

  async deadLetters(now: number): Promise<FileCheckpoint[]> {
    const q = (column: string) => this.dialect.quote(column);
    return this.guard('listing dead letters', () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now);
        const rows = await run<FileRow[]>(
          tx,
          `SELECT * FROM ${this.table} WHERE ${deadCondition(q)} ORDER BY ${q('file_url')}`,
          [],
          'listing dead letters',
        );
        return rows.map(toFileCheckpoint);
      }),
    );
  }

  async requeue(fileUrl: string, now: number): Promise<boolean> {
    const q = (column: string) => this.dialect.quote(column);
    return this.guard(`requeueing "${fileUrl}"`, () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now, fileUrl);
        const build = () =>
          this.sql(
            `UPDATE ${this.table} SET ${q('status')} = 'pending', ${q('retry_count')} = 0, ${q('error_message')} = NULL, ` +
              `${q('lease_expires_at')} = NULL WHERE ${this.byUrl()} AND ${q('status')} = 'failed'`,
          );
        const { affected } = await this.execute(tx, 'requeue', build, [urlHash(fileUrl), fileUrl], `requeueing "${fileUrl}"`);
        if (affected > 0) await this.notify(tx);
        return affected > 0;
      }),
    );
  }

  async summary(now: number): Promise<ClaimSummary> {
    const q = (column: string) => this.dialect.quote(column);
    return this.guard('summarising', () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now);
        const rows = await run<Record<string, string | number | null>[]>(
          tx,
          `SELECT ${q('status')} AS ${q('status')}, COUNT(*) AS ${q('files')}, ` +
            `SUM(CASE WHEN ${q('retry_count')} >= ${q('max_retries')} THEN 1 ELSE 0 END) AS ${q('exhausted')}, ` +
            `SUM(${q('records_total')}) AS ${q('records_total')}, SUM(${q('records_filtered')}) AS ${q('records_filtered')}, ` +
            `SUM(${q('records_persisted')}) AS ${q('records_persisted')}, SUM(${q('processing_time_ms')}) AS ${q('processing_time_ms')} ` +
            `FROM ${this.table} GROUP BY ${q('status')}`,
          [],
          'summarising',
        );
        const summary: ClaimSummary = {
          pending: 0, processing: 0, completed: 0, failed: 0, deadLetters: 0,
          recordsTotal: 0, recordsFiltered: 0, recordsPersisted: 0, processingTimeMs: 0,
        };
        for (const row of rows) {
          const status = row.status as FileStatus;
          if (status in summary) summary[status] += Number(row.files);
          if (status === 'failed') summary.deadLetters += Number(row.exhausted);
          summary.recordsTotal += Number(row.records_total ?? 0);
          summary.recordsFiltered += Number(row.records_filtered ?? 0);
          summary.recordsPersisted += Number(row.records_persisted ?? 0);
          summary.processingTimeMs += Number(row.processing_time_ms ?? 0);
        }
        return summary;
      }),
    );
  }
}
