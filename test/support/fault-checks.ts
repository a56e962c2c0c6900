import { expect } from 'chai';
import { readdirSync, readlinkSync } from 'node:fs';
import type { DataSource } from 'typeorm';
import { CheckpointError } from '../../src';
import { DRIVER } from './database';
import { pause, VICTIM_APP } from './victim';

export { allowVictims, openVictim, pause, terminateVictims, VICTIM_APP, victimOptions } from './victim';

/** Every `code` on the error and its `cause` / `driverError` chain. */
export function codesOf(error: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  for (let queue: unknown[] = [error]; queue.length > 0;) {
    const current = queue.shift();
    if (typeof current !== 'object' || current === null || seen.has(current)) continue;
    seen.add(current);
    const record = current as { code?: unknown; cause?: unknown; driverError?: unknown };
    if (typeof record.code === 'string') codes.push(record.code);
    queue.push(record.cause, record.driverError);
  }
  return codes;
}

/**
 * A failure under a fault must be a typed error with one of `codes`, or an error a user callback
 * threw (recorded in `userErrors`), passed through unchanged. Returns which it was.
 */
export function expectTypedOrUser(error: unknown, userErrors: Set<unknown>, codes: string[]): 'user' | string {
  if (userErrors.has(error)) return 'user';
  expect(error, `an untyped error escaped: ${String((error as Error)?.stack ?? error)}`).to.be.instanceOf(CheckpointError);
  expect(codes, String((error as Error).stack)).to.include((error as CheckpointError).code);
  return (error as CheckpointError).code;
}

/**
 * No leaked query runners or connections: on PostgreSQL every pooled client is idle, nobody waits
 * for one, no runner is still registered and no backend of this database sits in a transaction;
 * on MySQL every pooled connection is back in the pool and nobody waits for one; on SQLite no
 * transaction is left open on the shared connection (a fresh BEGIN works).
 */
export async function expectNoLeaks(dataSource: DataSource, admin: DataSource): Promise<void> {
  const driver = dataSource.driver as unknown as {
    master?: { totalCount: number; idleCount: number; waitingCount: number };
    connectedQueryRunners?: unknown[];
  };
  if (DRIVER === 'postgres') {
    const pool = driver.master!;
    expect(pool.totalCount - pool.idleCount, 'pooled clients still checked out').to.equal(0);
    expect(pool.waitingCount, 'callers waiting for a client').to.equal(0);
    if (driver.connectedQueryRunners) expect(driver.connectedQueryRunners, 'query runners not released').to.have.length(0);
    const open = (await admin.query(
      "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    )) as { n: string }[];
    expect(Number(open[0].n), 'backends left inside a transaction').to.equal(0);
    const backends = (await admin.query(
      'SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1',
      [VICTIM_APP],
    )) as { n: string }[];
    expect(Number(backends[0].n), 'more backends than pooled clients').to.be.at.most(pool.totalCount);
  } else if (DRIVER === 'mysql') {
    // mysql2's pool keeps no public counters; INNODB_TRX is a cached view, unfit for a check like this.
    const pool = (
      dataSource.driver as unknown as { pool: Record<'_allConnections' | '_freeConnections' | '_connectionQueue', { length: number }> }
    ).pool;
    expect(pool._allConnections.length - pool._freeConnections.length, 'pooled connections still checked out').to.equal(0);
    expect(pool._connectionQueue.length, 'callers waiting for a connection').to.equal(0);
  } else if (DRIVER === 'sqlite') {
    expect(dataSource.createQueryRunner().isTransactionActive, 'the shared SQLite runner thinks a transaction is open').to.equal(false);
    await dataSource.query('BEGIN');
    await dataSource.query('ROLLBACK');
  }
}

/** Waits until no connection to this database belongs to a victim (the processes have exited); not on SQLite. */
export async function untilVictimsGone(admin: DataSource): Promise<void> {
  if (DRIVER === 'sqlite') return;
  const victims =
    DRIVER === 'postgres'
      ? 'SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1'
      : 'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND USER = ?';
  for (let i = 0; ; i++) {
    const rows = (await admin.query(victims, [VICTIM_APP])) as { n: string }[];
    if (Number(rows[0].n) === 0) return;
    if (i > 500) throw new Error('backends of exited processes are still connected');
    await pause(10);
  }
}

/** How many file descriptors of this process point into `dir` (Linux; null elsewhere). */
export function openFilesUnder(dir: string): number | null {
  let entries: string[];
  try {
    entries = readdirSync('/proc/self/fd');
  } catch {
    return null;
  }
  return entries.filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir);
    } catch {
      return false; // closed while we looked
    }
  }).length;
}
