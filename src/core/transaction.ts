import { AsyncLocalStorage } from 'node:async_hooks';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { isRetryable, ownStatementError } from './database-errors';
import { dialectOf } from '../dialect';
import { InvalidArgumentError, NoDataSourceError } from './errors';

/** A DataSource, or an EntityManager (possibly a transaction's). Every function takes one first. */
export type Db = DataSource | EntityManager;

/** One open transaction or savepoint; its children (savepoints) are serialised by `children`. */
interface Frame {
  readonly dataSource: DataSource;
  readonly manager: EntityManager;
  readonly queryRunner: QueryRunner;
  readonly parent?: Frame;
  readonly children: Mutex;
  closed: boolean;
}

/** A FIFO lock: `run` calls queue up and execute one at a time. */
export class Mutex {
  /** Settles when the last queued call is done; null when no call is queued. */
  private last: Promise<void> | null = null;

  async run<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.last;
    let release!: () => void;
    const current = new Promise<void>((resolve) => (release = resolve));
    this.last = current;
    // An idle lock is taken at once, without waiting a turn for an already settled promise.
    if (previous) await previous;
    try {
      return await fn();
    } finally {
      if (this.last === current) this.last = null;
      release();
    }
  }
}

/** Attempts of one of the library's own transactions that fails with a serialization failure, deadlock or busy lock. */
export const MAX_ATTEMPTS = 8;
const context = new AsyncLocalStorage<Frame>();
const callerTransactions = new WeakMap<QueryRunner, Frame>();
const singleConnectionLocks = new WeakMap<DataSource, Mutex>();
/** The locks of database files (SQLite), each shared by every DataSource on that file in this process. */
const fileLocks = new Map<string, Mutex>();
const prepared = new WeakSet<DataSource>();
let defaultDataSource: DataSource | null = null;
let savepointCounter = 0;

export function isEntityManager(db: unknown): db is EntityManager {
  return typeof db === 'object' && db !== null && 'getRepository' in db && !('initialize' in db);
}

function isDataSource(db: unknown): db is DataSource {
  return typeof db === 'object' && db !== null && 'initialize' in db && 'createQueryRunner' in db;
}

/** The DataSource behind a `Db` (TypeORM 1.x calls it `dataSource`, 0.3 `connection`). */
export function dataSourceOf(db: Db): DataSource {
  if (isDataSource(db)) return db;
  if (isEntityManager(db)) {
    const manager = db as EntityManager & { dataSource?: DataSource };
    return manager.dataSource ?? manager.connection;
  }
  throw new InvalidArgumentError('Expected a TypeORM DataSource or EntityManager as the first argument.');
}

function isOpen(frame: Frame): boolean {
  return !frame.closed && frame.queryRunner.isTransactionActive && !frame.queryRunner.isReleased;
}

/** The innermost open frame in this async context, if any. */
function activeFrame(): Frame | undefined {
  let frame = context.getStore();
  while (frame && !isOpen(frame)) frame = frame.parent;
  return frame;
}

/** The transaction a call on `db` must join, or undefined when it must open its own. */
function transactionToJoin(db: Db, dataSource: DataSource): Frame | undefined {
  const active = activeFrame();
  if (isEntityManager(db)) {
    const runner = db.queryRunner;
    if (runner && runner.isTransactionActive && !runner.isReleased) {
      if (active && active.queryRunner === runner) return active;
      let root = callerTransactions.get(runner);
      if (!root) {
        root = { dataSource, manager: db, queryRunner: runner, children: new Mutex(), closed: false };
        callerTransactions.set(runner, root);
      }
      return root;
    }
  }
  return active && active.dataSource === dataSource ? active : undefined;
}

/** Sets (or, with null, clears) the DataSource {@link Checkpointed} and {@link currentManager} fall back on when nothing else gives one. */
export function setDefaultDataSource(dataSource: DataSource | null): void {
  defaultDataSource = dataSource;
}

/** The DataSource given to {@link setDefaultDataSource}, or null. */
export function getDefaultDataSource(): DataSource | null {
  return defaultDataSource;
}

/** The transaction's DataSource active in this async context, if any. */
export function activeDataSource(): DataSource | undefined {
  return activeFrame()?.dataSource;
}

/**
 * The manager of the transaction active in this async context (of `db`'s DataSource, if given);
 * outside one, `db`'s manager; else the default data source's manager; else throws `NO_DATA_SOURCE`.
 */
export function currentManager(db?: Db): EntityManager {
  const active = activeFrame();
  if (db !== undefined) {
    const dataSource = dataSourceOf(db);
    if (active && active.dataSource === dataSource) return active.manager;
    return isEntityManager(db) ? db : dataSource.manager;
  }
  if (active) return active.manager;
  if (defaultDataSource) return defaultDataSource.manager;
  throw new NoDataSourceError(
    'currentManager() was called outside a transaction with no Db and no default: pass a DataSource or call setDefaultDataSource().',
  );
}

async function inSavepoint<T>(parent: Frame, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  // Savepoints on one connection must nest strictly, so siblings wait for each other.
  return parent.children.run(async () => {
    const runner = parent.queryRunner;
    const name = `checkpoint_sp_${++savepointCounter}`;
    try {
      await runner.query(`SAVEPOINT ${name}`);
    } catch (error) {
      throw ownStatementError(error, 'opening a savepoint');
    }
    const frame: Frame = { ...parent, parent, children: new Mutex(), closed: false };
    try {
      const result = await context.run(frame, () => fn(frame.manager));
      frame.closed = true;
      try {
        await runner.query(`RELEASE SAVEPOINT ${name}`);
      } catch (error) {
        throw ownStatementError(error, 'releasing a savepoint');
      }
      return result;
    } catch (error) {
      if (!frame.closed) {
        frame.closed = true;
        await rollbackToSavepoint(runner, name);
      }
      throw error;
    }
  });
}

async function rollbackToSavepoint(runner: QueryRunner, name: string): Promise<void> {
  try {
    await runner.query(`ROLLBACK TO SAVEPOINT ${name}`);
    await runner.query(`RELEASE SAVEPOINT ${name}`);
  } catch {
    // The connection is gone or the transaction already aborted; the caller's own rollback or
    // error handling takes over, and the original error is the one worth re-raising.
  }
}

async function inOwnTransaction<T>(dataSource: DataSource, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  const isolation = dialectOf(dataSource).ownTransactionIsolation;
  for (let attempt = 1; ; attempt++) {
    const runner = dataSource.createQueryRunner();
    try {
      try {
        await runner.startTransaction(isolation);
      } catch (error) {
        throw ownStatementError(error, 'starting a transaction');
      }
      const frame: Frame = { dataSource, manager: runner.manager, queryRunner: runner, children: new Mutex(), closed: false };
      try {
        const result = await context.run(frame, () => fn(runner.manager));
        frame.closed = true;
        try {
          await runner.commitTransaction();
        } catch (error) {
          throw ownStatementError(error, 'committing');
        }
        return result;
      } catch (error) {
        frame.closed = true;
        if (runner.isTransactionActive) await rollbackQuietly(runner);
        throw error;
      }
    } catch (error) {
      if (attempt >= MAX_ATTEMPTS || !isRetryable(error)) throw error;
    } finally {
      await runner.release();
    }
    await retryPause(attempt);
  }
}

/**
 * Waits a random 0–10·2^(attempt−1) ms before the next attempt: contenders that failed together
 * do not collide again at once, and a synchronous driver (better-sqlite3) lets timers and I/O run
 * between attempts instead of retrying in one unbroken chain of microtasks.
 */
export function retryPause(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * 2 ** (attempt - 1)));
}

async function rollbackQuietly(runner: QueryRunner): Promise<void> {
  try {
    await runner.rollbackTransaction();
  } catch {
    // A failed rollback means the connection is gone: the server discards the transaction itself.
  }
}

/** Lets the dialect make the DataSource safe to use (once, before the library's first statement on it). */
export function prepareOnce(dataSource: DataSource): DataSource {
  if (!prepared.has(dataSource) && dialectOf(dataSource).prepare(dataSource)) prepared.add(dataSource);
  return dataSource;
}

/**
 * Runs `fn` in a transaction following the one rule: join the caller's (a SAVEPOINT) when `db` is
 * a transaction's manager or a transaction of the same DataSource is active in this async context,
 * otherwise open, commit and roll back a transaction of its own (retrying serialization failures
 * and deadlocks of its own statements a bounded number of times).
 */
export async function transact<T>(db: Db, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  const dataSource = prepareOnce(dataSourceOf(db));
  const parent = transactionToJoin(db, dataSource);
  if (parent) return inSavepoint(parent, fn);
  if (!dialectOf(dataSource).singleConnection) return inOwnTransaction(dataSource, fn);
  return underLock(dataSource, () => inOwnTransaction(dataSource, fn));
}

/**
 * The lock that serialises the library's use of a single-connection DataSource: its database
 * file's, shared with every DataSource on that file in this process. SQLite has one writer, and a
 * writer that finds the file locked waits synchronously (better-sqlite3's busy timeout), holding up
 * the very event loop the other DataSource's open transaction needs to commit: a `pause()` from a
 * second DataSource stalled the process for the whole timeout. Queued here, it waits its turn instead.
 */
function singleConnectionLock(dataSource: DataSource): Mutex {
  let lock = singleConnectionLocks.get(dataSource);
  if (!lock) {
    const file = dialectOf(dataSource).sharedFile?.(dataSource) ?? null;
    lock = (file === null ? undefined : fileLocks.get(file)) ?? new Mutex();
    if (file !== null) fileLocks.set(file, lock);
    singleConnectionLocks.set(dataSource, lock);
  }
  return lock;
}

/**
 * Runs `fn` holding the DataSource's lock. Inside a transaction of another DataSource on the same
 * file, which holds that lock, it runs without it: waiting for it would never end, and SQLite's own
 * busy wait decides, as it does between processes.
 */
function underLock<T>(dataSource: DataSource, fn: () => Promise<T>): Promise<T> {
  const lock = singleConnectionLock(dataSource);
  const active = activeFrame();
  if (active && active.dataSource !== dataSource && singleConnectionLocks.get(active.dataSource) === lock) return fn();
  return lock.run(fn);
}

/**
 * Runs `fn` without a transaction of its own — each statement commits on its own (autocommit) —
 * for one atomic statement or a read of committed state: one round trip instead of three. When
 * `db` would join a transaction it runs in a savepoint of it, as `transact` does. On a
 * single-connection DataSource it holds the library's lock, so it never runs inside another
 * transaction on that connection (and never sees its uncommitted writes).
 */
export function autocommit<T>(db: Db, fn: (manager: EntityManager) => Promise<T>): Promise<T> {
  return autocommitLazily(db, (manager) => fn(manager()));
}

/**
 * As `autocommit`, but the QueryRunner (and its EntityManager) is made only when `fn` first asks
 * for `manager()`: for reads that mostly go around TypeORM (the dashboard's direct better-sqlite3
 * reads), which then make none. The lock, the joined transaction and the retries are as in `autocommit`.
 */
export async function autocommitLazily<T>(db: Db, fn: (manager: () => EntityManager) => Promise<T>): Promise<T> {
  const dataSource = prepareOnce(dataSourceOf(db));
  if (transactionToJoin(db, dataSource)) return transact(db, (tx) => fn(() => tx));
  const attempt = async () => {
    for (let attempt = 1; ; attempt++) {
      let runner: QueryRunner | undefined;
      try {
        return await fn(() => (runner ??= dataSource.createQueryRunner()).manager);
      } catch (error) {
        if (attempt >= MAX_ATTEMPTS || !isRetryable(error)) throw error;
      } finally {
        if (runner !== undefined) await runner.release();
      }
      await retryPause(attempt);
    }
  };
  if (!dialectOf(dataSource).singleConnection) return attempt();
  return underLock(dataSource, attempt);
}

/** True when a call on `db` would join an existing transaction rather than open its own. */
export function joinsTransaction(db: Db): boolean {
  return transactionToJoin(db, dataSourceOf(db)) !== undefined;
}

/**
 * Runs `fn` as the body of a transaction of the library's own that `runner` already holds, with
 * `tx` bound to the async context as `transact` binds it (nested calls join it with savepoints).
 */
export async function inOwnFrame<T>(dataSource: DataSource, runner: QueryRunner, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  const frame: Frame = { dataSource, manager: runner.manager, queryRunner: runner, children: new Mutex(), closed: false };
  try {
    return await context.run(frame, () => fn(runner.manager));
  } finally {
    frame.closed = true;
  }
}

/**
 * Runs `fn` in a transaction and binds `tx` to the async context, so every call inside (and
 * {@link currentManager}) joins it. Joins the caller's transaction with a SAVEPOINT when `db` is a
 * transaction's manager or one of the same DataSource is active; otherwise opens and commits its own.
 * On SQLite, run concurrent application transactions through it so they queue behind the library's.
 */
export async function runInTransaction<T>(db: Db, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  if (typeof fn !== 'function') throw new InvalidArgumentError('runInTransaction(db, fn): fn must be a function.');
  return transact(db, fn);
}
