import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import {
  type AfterCommitOutcome,
  type AfterCommitStatement,
  type Dialect,
  dialectOf,
  type FinalStatement,
  type IsolationLevel,
  type OpeningStatement,
  type PipelinedOutcome,
} from '../dialect';
import { isRetryable, ownStatementError } from './database-errors';
import { type Db, dataSourceOf, inOwnFrame, joinsTransaction, MAX_ATTEMPTS, prepareOnce, retryPause } from './transaction';

const ISOLATION_LEVELS: readonly unknown[] = [
  'READ UNCOMMITTED',
  'READ COMMITTED',
  'REPEATABLE READ',
  'SERIALIZABLE',
] satisfies IsolationLevel[];

/** TypeORM's own bookkeeping of a runner's transaction (the same fields in 0.3 and 1.x). */
function markTransaction(runner: QueryRunner, active: boolean): void {
  const state = runner as unknown as { isTransactionActive: boolean; transactionDepth: number };
  state.isTransactionActive = active;
  state.transactionDepth = active ? 1 : 0;
}

/** The isolation level TypeORM's `startTransaction()` would use, when it is one the lane can spell; null when it is not. */
function isolationOf(dialect: Dialect, dataSource: DataSource): IsolationLevel | undefined | null {
  const level = dialect.ownTransactionIsolation ?? (dataSource.options as { isolationLevel?: unknown }).isolationLevel;
  if (level === undefined) return undefined;
  return ISOLATION_LEVELS.includes(level) ? (level as IsolationLevel) : null;
}

/** What `TransactionLane.transact` did: `held` is false when a final statement changed other rows than it must (nothing committed). */
export interface LaneOutcome<T> {
  result: T;
  held: boolean;
  /** The after-commit statement's outcome, when one was sent. */
  after?: AfterCommitOutcome;
  /** The answer of the finals that carry a `flag` (see FinalStatement), when one did. */
  flagged?: boolean;
}

/**
 * A query runner that one worker slot keeps between the library's own transactions, one after
 * another: one pool checkout for a run of files instead of one each, and each transaction's final
 * statements, its COMMIT and — when `next()` says another transaction follows at once — the next
 * one's BEGIN in a single round trip on PostgreSQL; on MySQL/MariaDB that BEGIN (and its isolation
 * level) rides on the COMMIT (COMMIT AND CHAIN). Any failure rolls back and gives the
 * runner back to the pool; so does `close()`, which the slot's owner calls before it waits for
 * anything but its own files (the runner's connection must not be held while, say, a claim waits
 * for the pool).
 */
export class TransactionLane {
  private runner: QueryRunner | undefined;
  private dataSource: DataSource | undefined;
  /** The server is already in a transaction the lane opened ahead (its BEGIN went with the last COMMIT). */
  private begun = false;
  /** That transaction followed the last call's commit at once and ran its opening statements, if any (it holds their locks). */
  private opened = false;

  /**
   * `asynchronousCommit`: COMMIT returns before the WAL reaches the disk (`SET LOCAL`, so the
   * setting ends with each transaction): a database crash may lose the last commits, never half of one.
   * `giveWay`: when someone waits for a pooled connection at a commit, the lane begins nothing
   * ahead and gives its runner back, so a long run of transactions does not keep the connection
   * from others between them (the next transaction queues for one again).
   */
  constructor(
    private readonly next: () => boolean,
    private readonly options: { asynchronousCommit?: boolean; giveWay?: boolean } = {},
  ) {}

  /**
   * True when a transaction of the library's on `db` can run on a lane: one of its own (nothing to
   * join), a dialect with pipelined commits, an isolation level it can spell, and no subscribers
   * (the lane does not broadcast TypeORM's transaction events; TypeORM's own path does).
   */
  static fits(db: Db): boolean {
    const dataSource = dataSourceOf(db);
    const dialect = dialectOf(dataSource);
    return (
      dialect.pipelinedCommit !== undefined &&
      dataSource.subscribers.length === 0 &&
      isolationOf(dialect, dataSource) !== null &&
      !joinsTransaction(db)
    );
  }

  /**
   * Runs `fn` in a transaction of its own on the lane's runner (retrying serialization failures
   * and deadlocks of the library's statements as `transact` does), then `finals(result)` and the
   * COMMIT in one round trip. `fn`'s errors pass through after the rollback. When the next
   * transaction is begun in that round trip, `opening(result)` runs first in it; the next call's
   * `fn` is told (`opened`) whether its transaction is that one — begun by the last call's commit, nothing
   * run on it since but `opening`'s statements, which hold their locks. `after`, asked when the
   * commit is sent, is a statement to run right after the COMMIT in a transaction of its own, in the
   * same round trip where the dialect can (else none is sent); a next transaction is then begun
   * ahead too, as its rows (e.g. claimed files) are likely to be worked on next.
   */
  async transact<T>(
    db: Db,
    fn: (tx: EntityManager, opened: boolean) => Promise<T>,
    finals: (result: T) => FinalStatement[],
    what: string,
    opening?: (result: T) => OpeningStatement[],
    after?: () => AfterCommitStatement | undefined,
  ): Promise<LaneOutcome<T>> {
    const dataSource = prepareOnce(dataSourceOf(db));
    const dialect = dialectOf(dataSource);
    const commit = dialect.pipelinedCommit!;
    const isolation = isolationOf(dialect, dataSource) ?? undefined;
    if (this.dataSource !== dataSource) await this.close();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(dataSource, commit, isolation, fn, finals, what, opening, after);
      } catch (error) {
        if (attempt >= MAX_ATTEMPTS || !isRetryable(error)) throw error;
      }
      await retryPause(attempt);
    }
  }

  private async once<T>(
    dataSource: DataSource,
    commit: NonNullable<Dialect['pipelinedCommit']>,
    isolation: IsolationLevel | undefined,
    fn: (tx: EntityManager, opened: boolean) => Promise<T>,
    finals: (result: T) => FinalStatement[],
    what: string,
    opening: ((result: T) => OpeningStatement[]) | undefined,
    after: (() => AfterCommitStatement | undefined) | undefined,
  ): Promise<LaneOutcome<T>> {
    if (!this.runner || this.runner.isReleased) {
      this.runner = dataSource.createQueryRunner();
      this.dataSource = dataSource;
      this.begun = false;
    }
    const runner = this.runner;
    const opened = this.begun && this.opened;
    this.opened = false;
    if (!this.begun) {
      try {
        await commit.begin(runner, isolation);
      } catch (error) {
        await this.close();
        throw ownStatementError(error, 'starting a transaction');
      }
    }
    this.begun = false;
    markTransaction(runner, true);
    let result: T;
    try {
      result = await inOwnFrame(dataSource, runner, (tx) => fn(tx, opened));
    } catch (error) {
      await this.abort();
      throw error;
    }
    const giveWay = this.options.giveWay === true && commit.connectionWanted(dataSource);
    const afterStatement = commit.openingInCommit ? after?.() : undefined;
    const beginNext = !giveWay && (this.next() || afterStatement !== undefined);
    let outcome: PipelinedOutcome;
    try {
      const openingStatements = beginNext && opening ? opening(result) : [];
      outcome = await commit.commit(runner, finals(result), {
        beginNext,
        isolation,
        asynchronous: this.options.asynchronousCommit,
        opening: openingStatements,
        after: afterStatement,
      });
    } catch (error) {
      await this.abort();
      throw ownStatementError(error, what);
    }
    if (!outcome.held) {
      await this.abort();
      return { result, held: false };
    }
    markTransaction(runner, false);
    // An opening that failed after the COMMIT was rolled back with its transaction: none is open.
    this.begun = beginNext && outcome.opened;
    this.opened = this.begun;
    if (giveWay) await this.close();
    return {
      result,
      held: true,
      ...(outcome.after ? { after: outcome.after } : {}),
      ...(outcome.flagged === undefined ? {} : { flagged: outcome.flagged }),
    };
  }

  /** Rolls the current transaction back and gives the runner back. */
  private async abort(): Promise<void> {
    this.begun = true;
    await this.close();
  }

  /** Ends the lane's open transaction, if any (nothing in it is kept), and gives its runner back to the pool. */
  async close(): Promise<void> {
    const runner = this.runner;
    const dataSource = this.dataSource;
    const begun = this.begun;
    this.runner = undefined;
    this.dataSource = undefined;
    this.begun = false;
    this.opened = false;
    if (!runner) return;
    markTransaction(runner, false);
    try {
      if (begun && dataSource && !runner.isReleased) await dialectOf(dataSource).pipelinedCommit!.rollback(runner);
    } catch {
      // A failed rollback means a broken connection: TypeORM gives it back as broken, and the server
      // discards the transaction with the session.
    } finally {
      await runner.release();
    }
  }
}
