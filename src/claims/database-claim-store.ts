import type { EntityManager } from 'typeorm';
import type { FileCheckpoint, FileStatus } from '../../entities/FileCheckpoint';
import { operatorWrite } from '../control/operator-write';
import { ownStatementError } from '../core/database-errors';
import { CheckpointError, DatabaseError, StoreUnavailableError } from '../core/errors';
import { carryingFailures, HandlerFailure } from '../core/handler-failure';
import { run } from '../core/run-statement';
import { TransactionLane } from '../core/transaction-lane';
import { autocommit, type Db, dataSourceOf, transact } from '../core/transaction';
import {
  type AfterCommitOutcome,
  type AfterCommitStatement,
  type Dialect,
  dialectOf,
  type Executed,
  type FinalStatement,
} from '../dialect';
import { type ClaimPath, lockingPath, ROWS_PER_STATEMENT, statementPath, type StoreStatements, URLS_PER_STATEMENT } from './claim-paths';
import {
  completeAllSql,
  completeSql,
  countExpiredSql,
  cancelSql,
  deadLettersSql,
  expiredKeysSql,
  expireKeysSql,
  FILE_TYPES_TABLE,
  FILES_TABLE,
  failSql,
  pausedTypesSql,
  requeueDeadSql,
  resumeSql,
  heartbeatSql,
  readRowSql,
  registerNotifyingSql,
  releaseSql,
  REGISTER_COLUMNS,
  requeueSql,
  summarySql,
} from './claim-sql';
import {
  type Claimant,
  claimLost,
  type ClaimStore,
  type ClaimSummary,
  emptySummary,
  type FileRef,
  type HeartbeatOutcome,
  type HeldClaim,
  type NextClaim,
  type ProcessingStats,
  type Subscription,
} from './claim-store';
import { type FileRow, toFileCheckpoint, urlHash } from './file-row';
import { LEASE_EXPIRED, leaseStillCountsAt } from './lease-rules';

export { urlHash } from './file-row';

/** The channel `register` and `requeue` notify and idle workers listen on (where the dialect can). */
export const WAKE_CHANNEL = 'typeorm_checkpoint_files';

/** The statuses a summary counts, each under its own name. */
const COUNTED: Record<FileStatus, true> = { pending: true, processing: true, completed: true, failed: true, cancelled: true };

/** The store's statement texts, built once per dialect (they depend on nothing else). */
const statementsByDialect = new WeakMap<Dialect, Map<string, string>>();

/**
 * The claim rules in SQL over `file_checkpoints`, through the dialect adapter; the statement text
 * is in `claim-sql.ts`, and the statements whose shape differs per database in the path chosen
 * when the store is built (`claim-paths.ts`). Times are the caller's clock (epoch ms bound as
 * parameters), so every comparison is one plain number compare. Every statement runs through
 * `transact`, joining the caller's transaction when there is one.
 */
export class DatabaseClaimStore implements ClaimStore, StoreStatements {
  readonly dialect: Dialect;
  private readonly path: ClaimPath;

  constructor(readonly db: Db) {
    this.dialect = dialectOf(dataSourceOf(db));
    this.path = this.dialect.supportsReturning ? statementPath(this) : lockingPath(this);
  }

  /**
   * Any failure of the store's own statements is STORE_UNAVAILABLE with the database error as
   * `cause` — never a silent switch to memory. The caller's errors and typed ones pass through.
   */
  private async guard<T>(what: string, operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      if (error instanceof HandlerFailure) throw error.failure;
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

  async execute<T = FileRow>(
    tx: EntityManager,
    key: string,
    build: () => string,
    parameters: unknown[],
    what: string,
  ): Promise<Executed<T>> {
    try {
      return await this.dialect.execute<T>(tx.queryRunner!, this.statement(key, build), parameters);
    } catch (error) {
      throw ownStatementError(error, what);
    }
  }

  statement(key: string, build: () => string): string {
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
      this.statement('readRow', () => readRowSql(this.dialect)),
      [urlHash(fileUrl), fileUrl],
      `reading "${fileUrl}"`,
    );
    return rows[0];
  }

  /**
   * A lease that expired on the last allowed attempt turns its file into a dead letter; run first
   * in a transaction, it also takes SQLite's write lock (a write) before anything is read.
   */
  async expireLastAttempts(tx: EntityManager, now: number, fileUrl?: string): Promise<void> {
    const d = this.dialect;
    const expire = (hashes: string[]) =>
      run(
        tx,
        this.statement(`expireKeys:${hashes.length}`, () => expireKeysSql(d, hashes.length)),
        [LEASE_EXPIRED, ...hashes, now],
        'expiring leases',
      );
    if (fileUrl !== undefined) {
      await expire([urlHash(fileUrl)]);
      return;
    }
    // Find them with a plain read, then update by key (the condition checked again): an UPDATE
    // that scans by status locks rows in index order, against completions' key order (MySQL deadlocks).
    const lock = d.lockRow(FILES_TABLE, 'url_hash');
    if (lock.before) await run(tx, lock.before, [''], 'expiring leases');
    const rows = await run<{ url_hash: string }[]>(
      tx,
      this.statement('expiredKeys', () => expiredKeysSql(d)),
      [now],
      'expiring leases',
    );
    const hashes = rows.map((row) => row.url_hash);
    for (let i = 0; i < hashes.length; i += URLS_PER_STATEMENT) await expire(hashes.slice(i, i + URLS_PER_STATEMENT));
  }

  async claim(file: FileRef, claimant: Claimant, now: number): Promise<number | null> {
    return this.guard(`claiming "${file.fileUrl}"`, () => this.path.claim(file, claimant, now));
  }

  async claimNext(limit: number, fileType: string | undefined, claimant: Claimant, now: number): Promise<FileCheckpoint[]> {
    return this.guard('claiming the next files', () => this.path.claimNext(limit, fileType, claimant, now));
  }

  /** The fenced completion of one claim: it changes its one row, or the claim is no longer held. */
  private completion(fileUrl: string, token: number, stats: ProcessingStats, now: number): FinalStatement {
    const parameters = [
      stats.totalRows,
      stats.filteredRows,
      stats.persistedRows,
      stats.durationMs,
      now,
      urlHash(fileUrl),
      fileUrl,
      token,
      now,
    ];
    return { sql: this.statement('complete', () => completeSql(this.dialect)), parameters, expected: 1 };
  }

  private async completeIn(tx: EntityManager, fileUrl: string, token: number, stats: ProcessingStats, now: number): Promise<boolean> {
    const { sql, parameters } = this.completion(fileUrl, token, stats, now);
    return (await this.execute(tx, 'complete', () => sql, parameters, `completing "${fileUrl}"`)).affected > 0;
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
          this.db,
          carryingFailures(work),
          (stats) => [this.completion(fileUrl, token, stats, Date.now())],
          what,
          undefined,
          this.afterCommit(next),
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
        const lock = this.dialect.lockRow(FILES_TABLE, 'url_hash');
        if (lock.before) await run(tx, lock.before, [urlHash(fileUrl)], `locking "${fileUrl}"`);
        const stats = await carryingFailures(work)(tx);
        // The fenced update commits with work's writes, or CLAIM_LOST rolls them back with it.
        if (!(await this.completeIn(tx, fileUrl, token, stats, Date.now()))) throw claimLost(fileUrl, 'complete');
        return stats;
      }),
    );
  }

  claimsWithCommit(): boolean {
    return this.path.nextClaim !== undefined && this.dialect.pipelinedCommit?.openingInCommit === true && TransactionLane.fits(this.db);
  }

  /**
   * `next`'s claim as the statement a lane runs right after a completion's COMMIT (in a transaction
   * of its own, committing unflushed as claimNext's does), built when the commit is sent.
   */
  private afterCommit(next: NextClaim | undefined): (() => AfterCommitStatement | undefined) | undefined {
    const nextClaim = this.path.nextClaim;
    if (!next || !nextClaim || !this.claimsWithCommit()) return undefined;
    return () => {
      const limit = next.limit();
      return limit > 0 ? nextClaim(limit, next.fileType, next.claimant, Date.now()) : undefined;
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

  /** The fenced completions of `files` (one statement per ROWS_PER_STATEMENT files), each changing all its files' rows. */
  private completions(files: HeldClaim[], stats: ProcessingStats[], now: number): FinalStatement[] {
    const finals: FinalStatement[] = [];
    for (let i = 0; i < files.length; i += ROWS_PER_STATEMENT) {
      const chunk = files.slice(i, i + ROWS_PER_STATEMENT);
      const hashes = chunk.map((file) => urlHash(file.fileUrl));
      const values = (pick: (s: ProcessingStats) => number) => chunk.flatMap((_, j) => [hashes[j], pick(stats[i + j])]);
      const parameters = [
        ...values((s) => s.totalRows),
        ...values((s) => s.filteredRows),
        ...values((s) => s.persistedRows),
        ...values((s) => s.durationMs),
        now,
        ...chunk.flatMap((file, j) => [hashes[j], file.fileUrl, file.token]),
        now,
      ];
      const sql = this.statement(`completeAll:${chunk.length}`, () => completeAllSql(this.dialect, chunk.length));
      finals.push({ sql, parameters, expected: chunk.length });
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
          this.db,
          carryingFailures(work),
          (stats) => this.completions(files, stats, Date.now()),
          what,
          undefined,
          this.afterCommit(next),
        );
        this.settle(next, after);
        if (!held) throw lost();
        return result;
      });
    }
    return this.guard(what, () =>
      transact(this.db, async (tx) => {
        const lock = this.dialect.lockRow(FILES_TABLE, 'url_hash');
        if (lock.before) await run(tx, lock.before, [urlHash(files[0].fileUrl)], `locking "${files[0].fileUrl}"`);
        const stats = await carryingFailures(work)(tx);
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
    const what = `giving back ${files.length} files`;
    return this.guard(what, () =>
      transact(this.db, async (tx) => {
        let released = 0;
        for (let i = 0; i < files.length; i += ROWS_PER_STATEMENT) {
          const chunk = files.slice(i, i + ROWS_PER_STATEMENT);
          const parameters = [...chunk.flatMap((file) => [urlHash(file.fileUrl), file.fileUrl, file.token]), Date.now()];
          released += (await this.execute(tx, `release:${chunk.length}`, () => releaseSql(this.dialect, chunk.length), parameters, what))
            .affected;
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

  /** `onError` hears a failure of the wake-up connection as any failure of the store's own statements: STORE_UNAVAILABLE. */
  subscribe(wake: () => void, onError: (error: unknown) => void): Subscription | undefined {
    const reported = (error: unknown) => {
      this.guard('listening for wake-ups', () => Promise.reject(error)).catch(onError);
    };
    return this.dialect.wakeups?.listen(dataSourceOf(this.db), WAKE_CHANNEL, wake, reported);
  }

  async fail(fileUrl: string, token: number, errorMessage: string): Promise<boolean> {
    const what = `failing "${fileUrl}"`;
    return this.guard(what, () =>
      autocommit(
        this.db,
        async (tx) =>
          (await this.execute(tx, 'fail', () => failSql(this.dialect), [errorMessage, urlHash(fileUrl), fileUrl, token, Date.now()], what))
            .affected > 0,
      ),
    );
  }

  async heartbeat(fileUrl: string, token: number, leaseExpiresAt: number): Promise<boolean> {
    const what = `extending the lease of "${fileUrl}"`;
    return this.guard(what, () =>
      autocommit(
        this.db,
        async (tx) =>
          (
            await this.execute(
              tx,
              'heartbeat',
              () => heartbeatSql(this.dialect),
              [leaseExpiresAt, urlHash(fileUrl), fileUrl, token, Date.now()],
              what,
            )
          ).affected > 0,
      ),
    );
  }

  async heartbeatAll(files: HeldClaim[], leaseExpiresAt: number): Promise<HeartbeatOutcome> {
    const what = `extending the leases of ${files.length} files`;
    return this.guard(what, () => this.path.heartbeatAll(files, leaseExpiresAt, what));
  }

  async isCompleted(fileUrl: string): Promise<boolean> {
    return this.guard(`reading "${fileUrl}"`, () =>
      transact(this.db, async (tx) => (await this.readRow(tx, fileUrl))?.status === 'completed'),
    );
  }

  async isHeld(fileUrl: string, token: number, now: number): Promise<boolean> {
    // One read of committed state: no transaction of its own.
    return this.guard(`reading "${fileUrl}"`, () =>
      autocommit(this.db, async (tx) => {
        const row = await this.readRow(tx, fileUrl);
        if (row?.status !== 'processing' || Number(row.claim_token) !== token) return false;
        const lease = row.lease_expires_at === null ? null : Number(row.lease_expires_at);
        return leaseStillCountsAt({ leaseExpiresAt: lease, retryCount: Number(row.retry_count), maxRetries: Number(row.max_retries) }, now);
      }),
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
        urlHash(file.fileUrl),
        file.fileUrl,
        file.fileType,
        file.fileTimestamp.getTime(),
        'pending',
        0,
        0,
        0,
        0,
        0,
        maxRetries,
        0,
        now,
      ]);
    const notifying = files.length <= ROWS_PER_STATEMENT ? registerNotifyingSql(this.dialect, files.length) : undefined;
    if (notifying !== undefined) {
      // One statement, inserting and notifying, with no transaction of its own: one round trip
      // instead of four, which is most of the wake-up latency of an idle worker.
      return this.guard('registering files', () =>
        autocommit(this.db, async (tx) => {
          const { rows } = await this.execute<{ inserted: number | string }>(
            tx,
            `register:${files.length}`,
            () => notifying,
            [...rowsOf(files), WAKE_CHANNEL],
            'registering files',
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
          try {
            inserted += await this.dialect.insertMissingRows(
              tx.queryRunner!,
              FILES_TABLE,
              REGISTER_COLUMNS,
              ['url_hash'],
              rowsOf(chunk),
              chunk.length,
            );
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
    await this.guard('expiring leases', async () => {
      const [found] = await autocommit(this.db, (tx) =>
        run<{ n: number | string }[]>(
          tx,
          this.statement('countExpired', () => countExpiredSql(this.dialect)),
          [now],
          'expiring leases',
        ),
      );
      if (Number(found?.n ?? 0) > 0) await transact(this.db, (tx) => this.expireLastAttempts(tx, now));
    });
  }

  async deadLetters(now: number): Promise<FileCheckpoint[]> {
    return this.guard('listing dead letters', () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now);
        const rows = await run<FileRow[]>(
          tx,
          this.statement('deadLetters', () => deadLettersSql(this.dialect)),
          [],
          'listing dead letters',
        );
        return rows.map(toFileCheckpoint);
      }),
    );
  }

  async requeue(fileUrl: string, now: number): Promise<boolean> {
    const what = `requeueing "${fileUrl}"`;
    return this.guard(what, () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now, fileUrl);
        const { affected } = await this.execute(tx, 'requeue', () => requeueSql(this.dialect), [urlHash(fileUrl), fileUrl], what);
        if (affected > 0) await this.notify(tx);
        return affected > 0;
      }),
    );
  }

  /** Requeues the dead letters among the files of these URL hashes, in one transaction (keys in order): how many. */
  async requeueDead(hashes: string[]): Promise<number> {
    if (hashes.length === 0) return 0;
    const what = 'requeueing dead letters';
    const keys = [...hashes].sort();
    return this.guard(what, () =>
      transact(this.db, async (tx) => {
        const sql = () => requeueDeadSql(this.dialect, keys.length);
        const { affected } = await this.execute(tx, `requeueDead:${keys.length}`, sql, keys, what);
        if (affected > 0) await this.notify(tx);
        return affected;
      }),
    );
  }

  async summary(now: number): Promise<ClaimSummary> {
    return this.guard('summarising', () =>
      transact(this.db, async (tx) => {
        await this.expireLastAttempts(tx, now);
        const rows = await run<Record<string, string | number | null>[]>(
          tx,
          this.statement('summary', () => summarySql(this.dialect)),
          [],
          'summarising',
        );
        const paused = await run<{ file_type: string }[]>(
          tx,
          this.statement('pausedTypes', () => pausedTypesSql(this.dialect)),
          [],
          'summarising',
        );
        const summary = emptySummary(paused.map((row) => row.file_type));
        for (const row of rows) {
          const status = row.status as FileStatus;
          if (status in COUNTED) summary[status] += Number(row.files);
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
  async pause(fileType: string, now: number): Promise<boolean> {
    return this.guard(`pausing files of type "${fileType}"`, () =>
      operatorWrite(this.db, () =>
        transact(this.db, async (tx) => {
          try {
            return (
              (await this.dialect.insertMissingRows(
                tx.queryRunner!,
                FILE_TYPES_TABLE,
                ['file_type', 'paused_at'],
                ['file_type'],
                [fileType, now],
                1,
              )) > 0
            );
          } catch (error) {
            throw ownStatementError(error, `pausing files of type "${fileType}"`);
          }
        }),
      ),
    );
  }

  async resume(fileType: string | undefined): Promise<boolean> {
    const what = fileType === undefined ? 'resuming every file type' : `resuming files of type "${fileType}"`;
    const every = fileType === undefined;
    return this.guard(what, () =>
      operatorWrite(this.db, () =>
        transact(this.db, async (tx) => {
          const { affected } = await this.execute(
            tx,
            every ? 'resume every type' : 'resume',
            () => resumeSql(this.dialect, every),
            every ? [] : [fileType],
            what,
          );
          // Idle workers claim at once rather than at their next poll.
          if (affected > 0) await this.notify(tx);
          return affected > 0;
        }),
      ),
    );
  }

  async cancel(fileUrl: string): Promise<boolean> {
    // One statement: a file is cancelled, or it already completed (on SQLite, this waits for the
    // transaction in flight, and then finds it completed).
    const what = `cancelling "${fileUrl}"`;
    return this.guard(what, () =>
      operatorWrite(this.db, () =>
        autocommit(
          this.db,
          async (tx) => (await this.execute(tx, 'cancel', () => cancelSql(this.dialect), [urlHash(fileUrl), fileUrl], what)).affected > 0,
        ),
      ),
    );
  }
}
