import type { EntityManager } from 'typeorm';
import {
  claimableCondition,
  claimAssignments,
  deadCondition,
  expiredOnLastAttempt,
  fencedCondition,
  LEASE_EXPIRED,
} from '../claims/lease-rules';
import { ownStatementError } from '../core/database-errors';
import { decodeJson, encodeJson, type Json } from '../core/json';
import { run } from '../core/run-statement';
import { dataSourceOf } from '../core/transaction';
import { JOBS } from '../control/control-store';
import { type Dialect, dialectOf, type Executed, type FinalStatement } from '../dialect';

const TABLE = 'checkpoint_partitions';
// Bounds the placeholders per statement well below every driver's limit (SQLite's is the lowest).
const ROWS_PER_STATEMENT = 50;
const RANGE_COLUMNS = [
  'job_name',
  'partition_index',
  'lower_key',
  'upper_key',
  'status',
  'retry_count',
  'max_retries',
  'claim_token',
  'batches',
  'items',
  'updated_at',
];

/** A `checkpoint_partitions` row as the drivers return it (pg: int8 as strings). */
export interface RangeRow {
  job_name: string;
  partition_index: number | string;
  lower_key: string | null;
  upper_key: string | null;
  cursor: string | null;
  status: string;
  retry_count: number | string;
  max_retries: number | string;
  claim_token: number | string;
  processed_by: string | null;
  started_at: number | string | null;
  lease_expires_at: number | string | null;
  error_message: string | null;
  batches: number | string;
  items: number | string;
  updated_at: number | string;
}

/** What a range is, as `status` and `listPartitions` report it. */
export type RangeState = 'pending' | 'running' | 'done' | 'dead';

/** One range of a partitioned job, in key order. `lower` is exclusive, `upper` inclusive; null = unbounded. */
export interface PartitionInfo {
  /** The range's place in key order, from 0. */
  index: number;
  /** The key the range starts after (exclusive); null = from the first key. */
  lower: Json;
  /** The range's last key (inclusive); null = to the last key. */
  upper: Json;
  /** The range's last committed cursor; null before its first batch. */
  cursor: Json;
  /** Where the range is (a released or retryable range is `pending`). */
  status: RangeState;
  /** Counted attempts so far (a release does not count). */
  attempts: number;
  /** The worker id of the latest claim, if any. */
  worker: string | null;
  /** Batches committed in the range, over every attempt. */
  batches: number;
  /** Items committed in the range, over every attempt. */
  items: number;
  /** Time of the range's latest change (epoch ms). */
  updatedAt: number;
}

/**
 * A partitioned job's ranges counted by {@link RangeState}.
 * @inline
 */
export interface RangeCounts {
  /** Ranges waiting for a claim (released or retryable ones included). */
  pending: number;
  /** Ranges claimed and not finished. */
  running: number;
  /** Ranges finished. */
  done: number;
  /** Ranges out of attempts. */
  dead: number;
}

/** Who claims, and on what terms (the file claims' Claimant). */
export interface RangeClaimant {
  workerId: string;
  leaseMs: number;
}

function dialectFor(tx: EntityManager): Dialect {
  return dialectOf(dataSourceOf(tx));
}

function names(dialect: Dialect) {
  const q = (column: string) => dialect.quote(column);
  return { q, table: q(TABLE), byKey: `${q('job_name')} = ? AND ${q('partition_index')} = ?` };
}

/**
 * True, in SQL, when the job of the range row of `table` is paused or cancelled: the job's state,
 * read inside a statement the range loop runs anyway (no statement of its own).
 */
function jobHeld(dialect: Dialect, table: string, since?: (column: string) => string): string {
  const q = (column: string) => dialect.quote(column);
  const changed = since ? ` AND ${since(`${q('j')}.${q('updated_at')}`)}` : '';
  return (
    `EXISTS (SELECT 1 FROM ${q(JOBS.table)} ${q('j')} WHERE ${q('j')}.${q(JOBS.key)} = ${table}.${q('job_name')} ` +
    `AND ${q('j')}.${q('state')} IN ('paused', 'cancelled')${changed})`
  );
}

async function execute(tx: EntityManager, sql: string, parameters: unknown[], what: string): Promise<Executed<RangeRow>> {
  try {
    return await dialectFor(tx).execute<RangeRow>(tx.queryRunner!, sql, parameters);
  } catch (error) {
    throw ownStatementError(error, what);
  }
}

/** A released or retryable range is pending; a failed one with no retries left, or whose lease expired on its last attempt, is dead. */
export function rangeState(row: RangeRow, now: number): RangeState {
  const exhausted = Number(row.retry_count) >= Number(row.max_retries);
  if (row.status === 'completed') return 'done';
  if (row.status === 'failed') return exhausted ? 'dead' : 'pending';
  if (row.status === 'processing') {
    return exhausted && row.lease_expires_at !== null && Number(row.lease_expires_at) <= now ? 'dead' : 'running';
  }
  return 'pending';
}

export function toPartitionInfo(row: RangeRow, now: number): PartitionInfo {
  return {
    index: Number(row.partition_index),
    lower: decodeJson(row.lower_key),
    upper: decodeJson(row.upper_key),
    cursor: decodeJson(row.cursor),
    status: rangeState(row, now),
    // Counted attempts: every claim but one that was released (pending again) without counting.
    attempts: Number(row.retry_count) + (row.status === 'pending' ? 0 : 1),
    worker: row.processed_by,
    batches: Number(row.batches),
    items: Number(row.items),
    updatedAt: Number(row.updated_at),
  };
}

export async function countRanges(tx: EntityManager, name: string): Promise<number> {
  const { q, table } = names(dialectFor(tx));
  const rows = await run<{ ranges: number | string }[]>(
    tx,
    dialectFor(tx).sql(`SELECT COUNT(*) AS ${q('ranges')} FROM ${table} WHERE ${q('job_name')} = ?`),
    [name],
    `reading the plan of job "${name}"`,
  );
  return Number(rows[0].ranges);
}

/** Stores the plan: `boundaries.length + 1` ranges, the first unbounded below, the last above. */
export async function insertRanges(tx: EntityManager, name: string, boundaries: Json[], maxRetries: number, now: number): Promise<void> {
  const dialect = dialectFor(tx);
  const { q, table } = names(dialect);
  const bound = (value: Json | undefined) => (value === undefined ? null : encodeJson(value, 'A range boundary'));
  const rows = boundaries.length + 1;
  for (let start = 0; start < rows; start += ROWS_PER_STATEMENT) {
    const count = Math.min(ROWS_PER_STATEMENT, rows - start);
    const parameters: unknown[] = [];
    for (let i = start; i < start + count; i++) {
      // Tokens start at the plan's time in µs: a worker still holding a token of a plan that was
      // reset and planned again can never match a token of the new plan.
      parameters.push(name, i, bound(boundaries[i - 1]), bound(boundaries[i]), 'pending', 0, maxRetries, now * 1000, 0, 0, now);
    }
    const row = `(${RANGE_COLUMNS.map(() => '?').join(', ')})`;
    await run(
      tx,
      dialect.sql(`INSERT INTO ${table} (${RANGE_COLUMNS.map(q).join(', ')}) VALUES ${new Array<string>(count).fill(row).join(', ')}`),
      parameters,
      `storing the plan of job "${name}"`,
    );
  }
}

/**
 * Claims the first claimable range of the job (the file claims' rules): a lease that expired on
 * the last attempt first makes its range dead; the pick skips ranges other claimers hold locked,
 * and claims nothing while the job is paused or cancelled.
 * One statement on PostgreSQL; elsewhere run in a transaction of its own (on SQLite its first
 * statement, a write, takes the write lock).
 */
export async function claimRange(tx: EntityManager, name: string, claimant: RangeClaimant, now: number): Promise<RangeRow | undefined> {
  const dialect = dialectFor(tx);
  const { q, table, byKey } = names(dialect);
  const what = `claiming a range of job "${name}"`;
  const expire =
    `UPDATE ${table} SET ${q('status')} = 'failed', ${q('error_message')} = ?, ${q('lease_expires_at')} = NULL ` +
    `WHERE ${q('job_name')} = ? AND ${expiredOnLastAttempt(q, '?')}`;
  // No range of a paused or cancelled job is claimed (the claim reads the job's state).
  const pick =
    `SELECT ${q('partition_index')} FROM ${table} WHERE ${q('job_name')} = ? AND ${claimableCondition(q, '?')} ` +
    `AND NOT ${jobHeld(dialect, table)} ORDER BY ${q('partition_index')} LIMIT 1${dialect.skipLockedSuffix}`;
  const assignments = claimAssignments((column) => `${table}.${q(column)}`, '?', '?', '?')
    .map(([column, value]) => `${q(column)} = ${value}`)
    .join(', ');
  if (dialect.supportsReturning) {
    // One statement: both parts see the same snapshot, and a range the first makes dead is not
    // claimable by the second anyway (no retries left).
    const claimed = await execute(
      tx,
      dialect.sql(
        `WITH ${q('expired')} AS (${expire} RETURNING 1), ${q('picked')} AS (${pick}) ` +
          `UPDATE ${table} SET ${assignments}, ${q('updated_at')} = ? FROM ${q('picked')} ` +
          `WHERE ${table}.${q('job_name')} = ? AND ${table}.${q('partition_index')} = ${q('picked')}.${q('partition_index')} RETURNING ${table}.*`,
      ),
      [LEASE_EXPIRED, name, now, name, now, claimant.workerId, now, now + claimant.leaseMs, now, name],
      what,
    );
    return claimed.rows[0];
  }
  await execute(tx, dialect.sql(expire), [LEASE_EXPIRED, name, now], what);
  const picked = await execute(tx, dialect.sql(pick), [name, now], what);
  if (picked.rows.length === 0) return undefined;
  const index = Number(picked.rows[0].partition_index);
  await execute(
    tx,
    dialect.sql(`UPDATE ${table} SET ${assignments}, ${q('updated_at')} = ? WHERE ${byKey}`),
    [claimant.workerId, now, now + claimant.leaseMs, now, name, index],
    what,
  );
  const claimed = await execute(tx, dialect.sql(`SELECT * FROM ${table} WHERE ${byKey}`), [name, index], what);
  return claimed.rows[0];
}

/**
 * On SQLite a batch's first statement must be a write (the write lock, so its reads cannot go
 * stale); elsewhere nothing is locked until the fenced commit, so a stalled worker blocks no takeover.
 * On SQLite it also reads the job's state: false (nothing written) when the job is paused or
 * cancelled, or the range is gone; the batch must not run. Elsewhere true (the fenced commit reads the state).
 */
export async function lockForBatch(tx: EntityManager, name: string, index: number): Promise<boolean> {
  const dialect = dialectFor(tx);
  if (!dialect.singleConnection) return true;
  const { q, table, byKey } = names(dialect);
  const { affected } = await execute(
    tx,
    dialect.sql(`UPDATE ${table} SET ${q('job_name')} = ${q('job_name')} WHERE ${byKey} AND NOT ${jobHeld(dialect, table)}`),
    [name, index],
    `locking job "${name}"`,
  );
  return affected > 0;
}

/** What a batch changes in its range: the cursor (or the range's end), the counts, the lease. */
export interface RangeChange {
  cursor: string | null;
  batches: number;
  items: number;
  finished: boolean;
  leaseExpiresAt: number;
  now: number;
}

/**
 * `commitRange`'s statement, fenced by the claim token: it changes the range's row, or nothing when
 * the claim was lost, or (PostgreSQL) when the job was paused or cancelled before the batch's
 * transaction began, so a batch begun after a pause never commits. Except on SQLite (where `lockForBatch` reads it), it also reads the job's
 * state: PostgreSQL returns `held` (paused or cancelled) from the changed row; MySQL/MariaDB's
 * statement joins the job row when it is paused or cancelled, which changes one row more (see FinalStatement.flag).
 */
function rangeCommit(
  dialect: Dialect,
  name: string,
  index: number,
  token: number,
  change: RangeChange,
): { sql: string; parameters: (string | number | null)[]; flag?: { returning: string } } {
  const { q, table } = names(dialect);
  // MySQL/MariaDB's multi-table UPDATE names every column with its table.
  const joined = dialect.name === 'mysql';
  const c = (column: string) => (joined ? `${table}.${q(column)}` : q(column));
  const set =
    `${c('cursor')} = ?, ${c('batches')} = ${c('batches')} + ?, ${c('items')} = ${c('items')} + ?, ` +
    `${c('lease_expires_at')} = ?, ${c('updated_at')} = ?, ${c('status')} = ?`;
  const where = `${c('job_name')} = ? AND ${c('partition_index')} = ? AND ${fencedCondition(c, '?')}`;
  const parameters = [
    change.cursor,
    change.batches,
    change.items,
    change.finished ? null : change.leaseExpiresAt,
    change.now,
    change.finished ? 'completed' : 'processing',
    name,
    index,
    token,
  ];
  if (joined) {
    const j = q('j');
    const sql =
      `UPDATE ${table} LEFT JOIN ${q(JOBS.table)} ${j} ON ${j}.${q(JOBS.key)} = ${table}.${q('job_name')} ` +
      `AND ${j}.${q('state')} IN ('paused', 'cancelled') SET ${set}, ${j}.${q('state')} = ${j}.${q('state')} WHERE ${where}`;
    return { sql: dialect.sql(sql), parameters, flag: { returning: '' } };
  }
  // PostgreSQL: a batch begun after its job was paused or cancelled commits nothing (no row changes).
  const begunHeld = dialect.stateClock ? ` AND NOT ${jobHeld(dialect, table, dialect.stateClock.before)}` : '';
  const sql = dialect.sql(`UPDATE ${table} SET ${set} WHERE ${where}${begunHeld}`);
  return dialect.singleConnection ? { sql, parameters } : { sql, parameters, flag: { returning: jobHeld(dialect, table) } };
}

/**
 * What a fenced commit found: `held` false when nothing may commit (the claim is no longer this
 * worker's, or on PostgreSQL the job was paused or cancelled before the batch began); `paused`: the
 * job is paused or cancelled.
 */
export interface RangeCommitted {
  held: boolean;
  paused: boolean;
}

/**
 * Commits a batch's cursor (or the range's end) with the handler's writes, fenced by the claim
 * token, renewing the lease, and reads the job's state in the same statement (not on SQLite).
 */
export async function commitRange(
  tx: EntityManager,
  name: string,
  index: number,
  token: number,
  change: RangeChange,
): Promise<RangeCommitted> {
  const dialect = dialectFor(tx);
  const { sql, parameters, flag } = rangeCommit(dialect, name, index, token, change);
  if (!flag) {
    const { affected } = await execute(tx, sql, parameters, `committing a range of job "${name}"`);
    return { held: affected > 0, paused: false };
  }
  if (dialect.name === 'mysql') {
    const { affected } = await execute(tx, sql, parameters, `committing a range of job "${name}"`);
    return { held: affected > 0, paused: affected > 1 };
  }
  const { rows } = await execute(
    tx,
    `${sql} RETURNING ${flag.returning} AS ${dialect.quote('held')}`,
    parameters,
    `committing a range of job "${name}"`,
  );
  const held = (rows as unknown as { held: unknown }[])[0]?.held;
  return { held: rows.length > 0, paused: held === true || held === 't' };
}

/**
 * `commitRange` of a batch that does not finish its range, as the last statement of the batch's
 * transaction, sent with its COMMIT (see PipelinedCommit): a lost claim changes no row, and the
 * COMMIT does not run. Its `flag` asks whether the job is paused or cancelled.
 */
export function commitRangeAtCommit(
  dialect: Dialect,
  name: string,
  index: number,
  token: number,
  change: RangeChange & { cursor: string; finished: false },
): FinalStatement {
  const { sql, parameters, flag } = rangeCommit(dialect, name, index, token, change);
  return { sql, parameters: parameters as (string | number)[], expected: 1, ...(flag ? { flag } : {}) };
}

/** Fenced: extends the lease (heartbeat), fails the range (an attempt counted by its next claim) or releases it (pending, none counted). */
export async function settleRange(
  tx: EntityManager,
  name: string,
  index: number,
  token: number,
  how: { heartbeat: number } | { failed: string } | { released: true },
): Promise<boolean> {
  const dialect = dialectFor(tx);
  const { q, table, byKey } = names(dialect);
  const [set, values] =
    'heartbeat' in how
      ? [`${q('lease_expires_at')} = ?`, [how.heartbeat]]
      : 'failed' in how
        ? [`${q('status')} = 'failed', ${q('error_message')} = ?, ${q('lease_expires_at')} = NULL`, [how.failed]]
        : [`${q('status')} = 'pending', ${q('lease_expires_at')} = NULL`, []];
  const { affected } = await execute(
    tx,
    dialect.sql(`UPDATE ${table} SET ${set} WHERE ${byKey} AND ${fencedCondition(q, '?')}`),
    [...values, name, index, token],
    `updating a range of job "${name}"`,
  );
  return affected > 0;
}

export async function selectRanges(tx: EntityManager, name: string): Promise<RangeRow[]> {
  const dialect = dialectFor(tx);
  const { q, table } = names(dialect);
  return run<RangeRow[]>(
    tx,
    dialect.sql(`SELECT * FROM ${table} WHERE ${q('job_name')} = ? ORDER BY ${q('partition_index')}`),
    [name],
    `reading the ranges of job "${name}"`,
  );
}

/** Makes the dead ranges pending with a fresh attempt budget; how many it revived. */
export async function reviveDeadRanges(tx: EntityManager, name: string, now: number): Promise<number> {
  const dialect = dialectFor(tx);
  const { q, table } = names(dialect);
  await execute(
    tx,
    dialect.sql(
      `UPDATE ${table} SET ${q('status')} = 'failed', ${q('error_message')} = ?, ${q('lease_expires_at')} = NULL ` +
        `WHERE ${q('job_name')} = ? AND ${expiredOnLastAttempt(q, '?')}`,
    ),
    [LEASE_EXPIRED, name, now],
    `reviving the dead ranges of job "${name}"`,
  );
  const { affected } = await execute(
    tx,
    dialect.sql(
      `UPDATE ${table} SET ${q('status')} = 'pending', ${q('retry_count')} = 0, ${q('error_message')} = NULL, ` +
        `${q('lease_expires_at')} = NULL, ${q('updated_at')} = ? WHERE ${q('job_name')} = ? AND ${deadCondition(q)}`,
    ),
    [now, name],
    `reviving the dead ranges of job "${name}"`,
  );
  return affected;
}

export async function deleteRanges(tx: EntityManager, name: string): Promise<void> {
  const dialect = dialectFor(tx);
  const { q, table } = names(dialect);
  await run(tx, dialect.sql(`DELETE FROM ${table} WHERE ${q('job_name')} = ?`), [name], `resetting "${name}"`);
}

export interface RangeTotals {
  partitions: RangeCounts;
  batches: number;
  items: number;
  updatedAt: number;
}

/** Totals over each named job's ranges (one statement for any number of jobs). */
export async function rangeTotals(tx: EntityManager, jobNames: string[], now: number): Promise<Map<string, RangeTotals>> {
  const totals = new Map<string, RangeTotals>();
  if (jobNames.length === 0) return totals;
  const dialect = dialectFor(tx);
  const { q, table } = names(dialect);
  for (let i = 0; i < jobNames.length; i += ROWS_PER_STATEMENT) {
    const chunk = jobNames.slice(i, i + ROWS_PER_STATEMENT);
    const rows = await run<RangeRow[]>(
      tx,
      dialect.sql(`SELECT * FROM ${table} WHERE ${q('job_name')} IN (${chunk.map(() => '?').join(', ')})`),
      chunk,
      'reading the ranges of partitioned jobs',
    );
    for (const row of rows) {
      const total = totals.get(row.job_name) ?? {
        partitions: { pending: 0, running: 0, done: 0, dead: 0 },
        batches: 0,
        items: 0,
        updatedAt: 0,
      };
      total.partitions[rangeState(row, now)] += 1;
      total.batches += Number(row.batches);
      total.items += Number(row.items);
      total.updatedAt = Math.max(total.updatedAt, Number(row.updated_at));
      totals.set(row.job_name, total);
    }
  }
  return totals;
}

/** How many of the job's ranges are not finished (completed). */
export async function unfinishedRanges(tx: EntityManager, name: string): Promise<number> {
  const dialect = dialectFor(tx);
  const { q, table } = names(dialect);
  const rows = await run<{ open: number | string }[]>(
    tx,
    dialect.sql(`SELECT COUNT(*) AS ${q('open')} FROM ${table} WHERE ${q('job_name')} = ? AND ${q('status')} <> 'completed'`),
    [name],
    `reading the ranges of job "${name}"`,
  );
  return Number(rows[0].open);
}

/** How many of the job's ranges are not finished, and the job's state, in one statement (the call's last). */
export async function unfinishedRangesAndState(tx: EntityManager, name: string): Promise<{ open: number; state: unknown }> {
  const dialect = dialectFor(tx);
  const { q, table } = names(dialect);
  const rows = await run<{ open: number | string; state: unknown }[]>(
    tx,
    dialect.sql(
      `SELECT COUNT(*) AS ${q('open')}, (SELECT ${q('state')} FROM ${q(JOBS.table)} WHERE ${q(JOBS.key)} = ?) AS ${q('state')} ` +
        `FROM ${table} WHERE ${q('job_name')} = ? AND ${q('status')} <> 'completed'`,
    ),
    [name, name],
    `reading the ranges of job "${name}"`,
  );
  return { open: Number(rows[0].open), state: rows[0].state };
}
