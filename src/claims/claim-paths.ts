import type { EntityManager } from 'typeorm';
import type { FileCheckpoint } from '../../entities/FileCheckpoint';
import { ownStatementError } from '../core/database-errors';
import { run } from '../core/run-statement';
import { autocommit, type Db, joinsTransaction, transact } from '../core/transaction';
import type { AfterCommitStatement, Dialect, Executed } from '../dialect';
import type { Claimant, FileRef, HeartbeatOutcome, HeldClaim } from './claim-store';
import {
  CLAIM_COLUMNS,
  claimKeysSql,
  claimNextSql,
  claimOneSql,
  claimOneUpsert,
  FILES_TABLE,
  heartbeatAllSql,
  heldAfterHeartbeatSql,
  pickSql,
  readKeysSql,
  readRowSql,
} from './claim-sql';
import { type FileRow, toFileCheckpoint, urlHash } from './file-row';

// Bounds the placeholders per statement well below every driver's limit (SQLite's is the lowest).
export const ROWS_PER_STATEMENT = 50;
export const URLS_PER_STATEMENT = 500;

/** What a claim path needs from its store: the Db, the dialect, and how the store runs its statements. */
export interface StoreStatements {
  readonly db: Db;
  readonly dialect: Dialect;
  /** The statement text kept under `key`, built by `build` once per dialect. */
  statement(key: string, build: () => string): string;
  /** Runs the statement kept under `key` through the dialect (prepared once per connection on PostgreSQL). */
  execute<T = FileRow>(tx: EntityManager, key: string, build: () => string, parameters: unknown[], what: string): Promise<Executed<T>>;
  /** Turns the files whose lease expired on their last attempt (all, or `fileUrl`) into dead letters. */
  expireLastAttempts(tx: EntityManager, now: number, fileUrl?: string): Promise<void>;
}

/**
 * The statements whose shape depends on the database: where INSERT/UPDATE … RETURNING rows come
 * back (PostgreSQL), a claim and a heartbeat are one statement each, with no transaction of their
 * own; elsewhere (MySQL/MariaDB, SQLite) a transaction picks, writes and reads back. The store
 * chooses its path once, when it is built.
 */
export interface ClaimPath {
  /** Claims one file (creating its row if needed): the new token, or null. */
  claim(file: FileRef, claimant: Claimant, now: number): Promise<number | null>;
  claimNext(limit: number, fileType: string | undefined, claimant: Claimant, now: number): Promise<FileCheckpoint[]>;
  /** Extends the leases of `files`: the URLs whose claim is still held, and those cancelled. */
  heartbeatAll(files: HeldClaim[], leaseExpiresAt: number, what: string): Promise<HeartbeatOutcome>;
  /** claimNext as a statement a lane sends right after a COMMIT; undefined where the path cannot. */
  readonly nextClaim?: (limit: number, fileType: string | undefined, claimant: Claimant, now: number) => AfterCommitStatement;
}

function claimParameters(file: FileRef, claimant: Claimant, now: number): unknown[] {
  // In CLAIM_COLUMNS' order.
  return [
    urlHash(file.fileUrl),
    file.fileUrl,
    file.fileType,
    file.fileTimestamp.getTime(),
    'processing',
    0,
    0,
    0,
    0,
    0,
    claimant.maxRetries,
    1,
    now,
    claimant.workerId,
    now,
    now + claimant.leaseMs,
  ];
}

/** A row a heartbeat extended or found cancelled. */
interface HeartbeatRow {
  file_url: string;
  claim_token: number | string;
  status: string;
}

function heldOf(chunk: HeldClaim[], rows: HeartbeatRow[], outcome: HeartbeatOutcome): void {
  const found = new Map(rows.map((row) => [row.file_url, row]));
  for (const file of chunk) {
    const row = found.get(file.fileUrl);
    if (row === undefined || Number(row.claim_token) !== file.token) continue;
    (row.status === 'cancelled' ? outcome.cancelled : outcome.kept).add(file.fileUrl);
  }
}

function heldParameters(leaseExpiresAt: number, chunk: HeldClaim[]): unknown[] {
  return [leaseExpiresAt, ...chunk.flatMap((file) => [urlHash(file.fileUrl), file.fileUrl, file.token]), Date.now()];
}

/** One statement each, no transaction of its own (PostgreSQL's SQL, as everywhere with RETURNING). */
export function statementPath(store: StoreStatements): ClaimPath {
  const { db, dialect: d } = store;
  const nextClaim = (limit: number, fileType: string | undefined, claimant: Claimant, now: number, unflushed: boolean) => {
    const byType = fileType !== undefined;
    const key = `claimNext${byType ? ' of type' : ''}${unflushed ? ', unflushed' : ''}`;
    return {
      key,
      build: () => claimNextSql(d, { byType, unflushed }),
      parameters: [now, ...(byType ? [fileType] : []), limit, claimant.workerId, now, now + claimant.leaseMs],
    };
  };
  return {
    async claim(file, claimant, now) {
      const what = `claiming "${file.fileUrl}"`;
      return autocommit(db, async (tx) => {
        const { rows } = await store.execute<{ claim_token: number | string }>(
          tx,
          'claim',
          () => claimOneSql(d),
          claimParameters(file, claimant, now),
          what,
        );
        if (rows.length > 0) return Number(rows[0].claim_token);
        // Not claimable: when that is because its lease expired on the last attempt, the row becomes
        // the dead letter it is now (a statement only on this path), as the locking path's claim does.
        await store.expireLastAttempts(tx, now, file.fileUrl);
        return null;
      });
    },

    async claimNext(limit, fileType, claimant, now) {
      // A claim's commit need not wait for its WAL flush: a crash can lose it only together with
      // everything after it (a completion's synchronous commit flushes the claim first), and a lost
      // claim leaves the file to run again, its attempt uncounted. Not in a caller's transaction,
      // whose own commit must stay as durable as the caller made it.
      const unflushed = d.asynchronousCommitExpression !== undefined && !joinsTransaction(db);
      const { key, build, parameters } = nextClaim(limit, fileType, claimant, now, unflushed);
      return autocommit(db, async (tx) =>
        (await store.execute(tx, key, build, parameters, 'claiming the next files')).rows.map(toFileCheckpoint),
      );
    },

    async heartbeatAll(files, leaseExpiresAt, what) {
      return autocommit(db, async (tx) => {
        const outcome: HeartbeatOutcome = { kept: new Set(), cancelled: new Set() };
        for (let i = 0; i < files.length; i += ROWS_PER_STATEMENT) {
          const chunk = files.slice(i, i + ROWS_PER_STATEMENT);
          const { rows } = await store.execute<HeartbeatRow>(
            tx,
            `heartbeatAll:${chunk.length}`,
            () => heartbeatAllSql(d, chunk.length, true),
            heldParameters(leaseExpiresAt, chunk),
            what,
          );
          heldOf(chunk, rows, outcome);
        }
        return outcome;
      });
    },

    nextClaim(limit, fileType, claimant, now) {
      // Committing unflushed, as claimNext's does; the text is kept per dialect like every other.
      const { key, build, parameters } = nextClaim(limit, fileType, claimant, now, d.asynchronousCommitExpression !== undefined);
      return { sql: store.statement(key, build), parameters: parameters as (string | number)[] };
    },
  };
}

/** A transaction that takes the write lock (SQLite) or row locks (MySQL) first, then reads back what it wrote. */
export function lockingPath(store: StoreStatements): ClaimPath {
  const { db, dialect: d } = store;
  return {
    async claim(file, claimant, now) {
      const what = `claiming "${file.fileUrl}"`;
      return transact(db, async (tx) => {
        await store.expireLastAttempts(tx, now, file.fileUrl);
        const { assignments, condition } = claimOneUpsert(d);
        let claimed: boolean;
        try {
          claimed = await d.applyConditionalUpsert(
            tx.queryRunner!,
            FILES_TABLE,
            CLAIM_COLUMNS,
            'url_hash',
            assignments,
            condition,
            claimParameters(file, claimant, now),
          );
        } catch (error) {
          throw ownStatementError(error, what);
        }
        if (!claimed) return null;
        // The row stays locked by the upsert until commit: the token read here is this claim's.
        const rows = await run<FileRow[]>(
          tx,
          store.statement('readRow', () => readRowSql(d)),
          [urlHash(file.fileUrl), file.fileUrl],
          what,
        );
        return rows.length > 0 ? Number(rows[0].claim_token) : null;
      });
    },

    async claimNext(limit, fileType, claimant, now) {
      const byType = fileType !== undefined;
      return transact(db, async (tx) => {
        await store.expireLastAttempts(tx, now);
        // The picked rows stay locked until commit (SKIP LOCKED row locks; SQLite's write lock,
        // taken above), so the update below changes exactly them and no other worker can.
        const picked = await run<{ url_hash: string }[]>(
          tx,
          store.statement(`pick${byType ? ' of type' : ''}`, () => pickSql(d, { byType })),
          byType ? [now, fileType, limit] : [now, limit],
          'picking the next files',
        );
        const hashes = picked.map((row) => row.url_hash);
        const rows: FileRow[] = [];
        for (let i = 0; i < hashes.length; i += URLS_PER_STATEMENT) {
          const chunk = hashes.slice(i, i + URLS_PER_STATEMENT);
          await run(
            tx,
            store.statement(`claimKeys:${chunk.length}`, () => claimKeysSql(d, chunk.length)),
            [claimant.workerId, now, now + claimant.leaseMs, ...chunk],
            'claiming the next files',
          );
          const read = store.statement(`readKeys:${chunk.length}`, () => readKeysSql(d, chunk.length));
          rows.push(...(await run<FileRow[]>(tx, read, chunk, 'reading the claimed files')));
        }
        const order = new Map(hashes.map((hash, i) => [hash, i]));
        return rows.sort((a, b) => order.get(a.url_hash)! - order.get(b.url_hash)!).map(toFileCheckpoint);
      });
    },

    async heartbeatAll(files, leaseExpiresAt, what) {
      // One fenced UPDATE per chunk, then a read in the same transaction tells which claims are
      // held (a kept row has this lease and the presented token; a cancelled one that token).
      return transact(db, async (tx) => {
        const outcome: HeartbeatOutcome = { kept: new Set(), cancelled: new Set() };
        for (let i = 0; i < files.length; i += ROWS_PER_STATEMENT) {
          const chunk = files.slice(i, i + ROWS_PER_STATEMENT);
          const parameters = heldParameters(leaseExpiresAt, chunk);
          await store.execute(tx, `heartbeatAll:${chunk.length}`, () => heartbeatAllSql(d, chunk.length, false), parameters, what);
          const rows = await run<HeartbeatRow[]>(
            tx,
            store.statement(`heldAfterHeartbeat:${chunk.length}`, () => heldAfterHeartbeatSql(d, chunk.length)),
            parameters,
            what,
          );
          heldOf(chunk, rows, outcome);
        }
        return outcome;
      });
    },
  };
}
