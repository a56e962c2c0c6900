import { claimableIndexPredicate } from '../../entities/FileCheckpoint';
import type { Dialect } from '../dialect';
import { EVERY_TYPE } from './claim-store';
import {
  claimableCondition,
  claimAssignments,
  deadCondition,
  expiredOnLastAttempt,
  fencedCondition,
  leaseStillCounts,
  stillProcessing,
} from './lease-rules';

/**
 * The statement text of the database claim store, as plain functions of the dialect (pg-boss's
 * `plans.ts`): no values, only the dialect's quoting and placeholders, so each text is built once
 * per dialect and kept (see `DatabaseClaimStore.statement`). `?` marks are rewritten by `d.sql`.
 */

export const FILES_TABLE = 'file_checkpoints';
/** The paused file types; the type `'*'` pauses every type. */
export const FILE_TYPES_TABLE = 'checkpoint_file_types';
export const REGISTER_COLUMNS = [
  'url_hash',
  'file_url',
  'file_type',
  'file_timestamp',
  'status',
  'records_total',
  'records_filtered',
  'records_persisted',
  'processing_time_ms',
  'retry_count',
  'max_retries',
  'claim_token',
  'created_at',
];
export const CLAIM_COLUMNS = [...REGISTER_COLUMNS, 'processed_by', 'started_at', 'lease_expires_at'];

function table(d: Dialect): string {
  return d.quote(FILES_TABLE);
}

/** `column` of the existing row, qualified so it also reads right inside an upsert. */
function existing(d: Dialect, column: string): string {
  return `${table(d)}.${d.quote(column)}`;
}

function claimable(d: Dialect, now: string): string {
  return claimableCondition((column) => existing(d, column), now);
}

/** Oldest first, in IDX_file_checkpoints_claim_order's order, so a claim reads `limit` index entries, not the whole queue. */
function claimOrder(d: Dialect): string {
  return `${d.quote('created_at')}, ${d.quote('url_hash')}`;
}

/**
 * The file's type is not paused, read inside the claim statement itself (no read-then-write): an
 * uncorrelated NOT IN (hashed once per statement on PostgreSQL) and the `'*'` row (read once).
 */
function notPaused(d: Dialect): string {
  const types = d.quote(FILE_TYPES_TABLE);
  const type = `${types}.${d.quote('file_type')}`;
  return (
    `${existing(d, 'file_type')} NOT IN (SELECT ${type} FROM ${types}) ` +
    `AND NOT EXISTS (SELECT 1 FROM ${types} WHERE ${type} = '${EVERY_TYPE}')`
  );
}

/**
 * claimNext's condition: the claim order index's predicate (implied by the claimable condition,
 * repeated so every planner sees the partial index applies), the claimable condition, then the
 * type filter and the pause.
 */
function pickable(d: Dialect, now: string, byType: boolean): string {
  const type = byType ? ` AND ${existing(d, 'file_type')} = ?` : '';
  return `(${claimableIndexPredicate((column) => existing(d, column))}) AND ${claimable(d, now)}${type} AND ${notPaused(d)}`;
}

function assignments(list: [string, string][], d: Dialect): string {
  return list.map(([column, value]) => `${d.quote(column)} = ${value}`).join(', ');
}

/** The claim's SET list with `?` for the worker, its start and its lease's end. */
function claimSet(d: Dialect): string {
  return assignments(
    claimAssignments((column) => existing(d, column), '?', '?', '?'),
    d,
  );
}

/** A row by its URL: the key is the URL's hash, and the URL itself is compared too. */
function byUrl(d: Dialect): string {
  return `${d.quote('url_hash')} = ? AND ${d.quote('file_url')} = ?`;
}

/** The fencing condition: the presented token is current and the file is still processing. */
function fenced(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return `${byUrl(d)} AND ${fencedCondition(q, '?')} AND ${leaseStillCounts(q, '?')}`;
}

/** `(url_hash = ? AND file_url = ? AND claim_token = ?) OR …` for `files` claims. */
function heldBy(d: Dialect, files: number): string {
  const one = `(${byUrl(d)} AND ${d.quote('claim_token')} = ?)`;
  return Array.from({ length: files }, () => one).join(' OR ');
}

/** The same, with the rows still processing. */
function fencedAll(d: Dialect, files: number): string {
  const q = (column: string) => d.quote(column);
  return `${stillProcessing(q)} AND (${heldBy(d, files)}) AND ${leaseStillCounts(q, '?')}`;
}

function marks(count: number): string {
  return Array.from({ length: count }, () => '?').join(', ');
}

/**
 * claim (one file) as one statement, where the dialect has RETURNING (bound: CLAIM_COLUMNS in
 * order): claim the existing row by key (a plain UPDATE, the common case: files are registered or
 * seen before), else insert it — or, when another worker inserted it meanwhile, apply the claim
 * where the condition holds. The condition already refuses a lease that expired on the last
 * attempt (readers turn that row into a dead letter before showing it).
 */
export function claimOneSql(d: Dialect): string {
  const at = (column: string) => d.placeholder(CLAIM_COLUMNS.indexOf(column) + 1);
  const column = (name: string) => existing(d, name);
  const byKey = assignments(claimAssignments(column, at('processed_by'), at('started_at'), at('lease_expires_at')), d);
  const onConflict = assignments(
    claimAssignments(column, d.proposed('processed_by'), d.proposed('started_at'), d.proposed('lease_expires_at')),
    d,
  );
  const key = `${column('url_hash')} = ${at('url_hash')} AND ${column('file_url')} = ${at('file_url')}`;
  return (
    `WITH updated AS (UPDATE ${table(d)} SET ${byKey} WHERE ${key} AND ${claimable(d, at('started_at'))} ` +
    `RETURNING ${column('claim_token')}), ` +
    `inserted AS (INSERT INTO ${table(d)} (${CLAIM_COLUMNS.map((name) => d.quote(name)).join(', ')}) ` +
    `SELECT ${CLAIM_COLUMNS.map((_, i) => d.placeholder(i + 1)).join(', ')} WHERE NOT EXISTS (SELECT 1 FROM ${table(d)} WHERE ${key}) ` +
    `ON CONFLICT (${d.quote('url_hash')}) DO UPDATE SET ${onConflict} ` +
    `WHERE ${column('file_url')} = ${d.proposed('file_url')} AND ${claimable(d, d.proposed('started_at'))} ` +
    `RETURNING ${column('claim_token')}) ` +
    `SELECT ${d.quote('claim_token')} FROM updated UNION ALL SELECT ${d.quote('claim_token')} FROM inserted`
  );
}

/**
 * The conditional upsert of claim (one file) where there is no RETURNING: its assignments and
 * condition (the proposed row's started_at is `now`: the condition needs no placeholder of its own).
 */
export function claimOneUpsert(d: Dialect): { assignments: [string, string][]; condition: string } {
  return {
    assignments: claimAssignments(
      (column) => existing(d, column),
      d.proposed('processed_by'),
      d.proposed('started_at'),
      d.proposed('lease_expires_at'),
    ),
    condition: `${existing(d, 'file_url')} = ${d.proposed('file_url')} AND ${claimable(d, d.proposed('started_at'))}`,
  };
}

/**
 * claimNext as one statement, where the dialect has RETURNING: pick (SKIP LOCKED), claim and
 * return the rows, oldest first. Bound: now, [fileType], limit, worker, now, lease end.
 * `unflushed`: its commit does not wait for the WAL flush.
 */
export function claimNextSql(d: Dialect, options: { byType: boolean; unflushed: boolean }): string {
  return d.sql(
    `WITH picked AS (SELECT ${d.quote('url_hash')} FROM ${table(d)} WHERE ${pickable(d, '?', options.byType)} ` +
      `ORDER BY ${claimOrder(d)} LIMIT ?${d.skipLockedSuffix}), ` +
      // The picked keys as an array, so even a generic plan (the after-commit claim's) finds the
      // rows by the key rather than joining the picked ones with the whole table.
      `claimed AS (UPDATE ${table(d)} SET ${claimSet(d)} WHERE ${existing(d, 'url_hash')} = ANY (ARRAY(SELECT ${d.quote('url_hash')} FROM picked)) ` +
      `RETURNING ${table(d)}.*) SELECT claimed.* FROM claimed` +
      (options.unflushed ? `, (SELECT ${d.asynchronousCommitExpression}) AS ${d.quote('unflushed')}` : '') +
      ` ORDER BY ${claimOrder(d)}`,
  );
}

/** claimNext's pick where there is no RETURNING (locks the rows it returns). Bound: now, [fileType], limit. */
export function pickSql(d: Dialect, options: { byType: boolean }): string {
  return d.sql(
    `SELECT ${d.quote('url_hash')} FROM ${table(d)} WHERE ${pickable(d, '?', options.byType)} ` +
      `ORDER BY ${claimOrder(d)} LIMIT ?${d.skipLockedSuffix}`,
  );
}

/** Claims `count` picked rows by key. Bound: worker, now, lease end, the keys. */
export function claimKeysSql(d: Dialect, count: number): string {
  return d.sql(`UPDATE ${table(d)} SET ${claimSet(d)} WHERE ${d.quote('url_hash')} IN (${marks(count)})`);
}

/** Reads `count` rows by key. */
export function readKeysSql(d: Dialect, count: number): string {
  return d.sql(`SELECT * FROM ${table(d)} WHERE ${d.quote('url_hash')} IN (${marks(count)})`);
}

/** Reads one row. Bound: hash, URL. */
export function readRowSql(d: Dialect): string {
  return d.sql(`SELECT * FROM ${table(d)} WHERE ${byUrl(d)}`);
}

/** The keys of the rows whose lease expired on their last attempt. Bound: now. */
export function expiredKeysSql(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return d.sql(`SELECT ${q('url_hash')} FROM ${table(d)} WHERE ${expiredOnLastAttempt(q, '?')}`);
}

/** How many rows' lease expired on their last attempt (a count: PostgreSQL answers LIMIT 1 by a sequential scan). Bound: now. */
export function countExpiredSql(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return d.sql(`SELECT COUNT(*) AS ${q('n')} FROM ${table(d)} WHERE ${expiredOnLastAttempt(q, '?')}`);
}

/** Makes `count` rows dead letters by key, the condition checked again. Bound: message, the keys, now. */
export function expireKeysSql(d: Dialect, count: number): string {
  const q = (column: string) => d.quote(column);
  return d.sql(
    `UPDATE ${table(d)} SET ${q('status')} = 'failed', ${q('error_message')} = ?, ${q('lease_expires_at')} = NULL ` +
      `WHERE ${q('url_hash')} IN (${marks(count)}) AND ${expiredOnLastAttempt(q, '?')}`,
  );
}

/** The fenced completion of one claim. Bound: total, filtered, persisted, duration, now, hash, URL, token, now. */
export function completeSql(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return d.sql(
    `UPDATE ${table(d)} SET ${q('status')} = 'completed', ${q('records_total')} = ?, ${q('records_filtered')} = ?, ` +
      `${q('records_persisted')} = ?, ${q('processing_time_ms')} = ?, ${q('completed_at')} = ?, ${q('lease_expires_at')} = NULL ` +
      `WHERE ${fenced(d)}`,
  );
}

/**
 * The fenced completion of `count` claims in one statement. Each stat column is a CASE over the
 * URLs' hashes whose ELSE keeps the column's own type, which types the bound values on PostgreSQL too.
 * Bound: (hash, value) per file for each of the four stats, now, then (hash, URL, token) per file, then now.
 */
export function completeAllSql(d: Dialect, count: number): string {
  const q = (column: string) => d.quote(column);
  const column = (name: string) =>
    `${q(name)} = CASE ${Array.from({ length: count }, () => `WHEN ${q('url_hash')} = ? THEN ?`).join(' ')} ELSE ${q(name)} END`;
  return d.sql(
    `UPDATE ${table(d)} SET ${q('status')} = 'completed', ${column('records_total')}, ${column('records_filtered')}, ` +
      `${column('records_persisted')}, ${column('processing_time_ms')}, ${q('completed_at')} = ?, ` +
      `${q('lease_expires_at')} = NULL WHERE ${fencedAll(d, count)}`,
  );
}

/**
 * Gives `count` claims back: pending, the token moved on. retry_count stays: a pending row's next
 * claim counts no attempt, so the count is as before this claim. Bound: (hash, URL, token) per file, then now.
 */
export function releaseSql(d: Dialect, count: number): string {
  const q = (column: string) => d.quote(column);
  return d.sql(
    `UPDATE ${table(d)} SET ${q('status')} = 'pending', ${q('claim_token')} = ${q('claim_token')} + 1, ` +
      `${q('lease_expires_at')} = NULL WHERE ${fencedAll(d, count)}`,
  );
}

/** The fenced failure. Bound: message, hash, URL, token, now. */
export function failSql(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return d.sql(
    `UPDATE ${table(d)} SET ${q('status')} = 'failed', ${q('error_message')} = ?, ${q('lease_expires_at')} = NULL WHERE ${fenced(d)}`,
  );
}

/** The fenced lease extension of one claim. Bound: lease end, hash, URL, token, now. */
export function heartbeatSql(d: Dialect): string {
  return d.sql(`UPDATE ${table(d)} SET ${d.quote('lease_expires_at')} = ? WHERE ${fenced(d)}`);
}

/** Processing, or cancelled (under the same token: while its claim was held); as stillProcessing, no status index. */
function processingOrCancelled(d: Dialect): string {
  return `CASE ${d.quote('status')} WHEN 'processing' THEN 1 WHEN 'cancelled' THEN 1 ELSE 0 END = 1`;
}

/**
 * The lease extension of `count` claims, fenced by their tokens; it also finds the claims cancelled
 * meanwhile (their lease stays as cancel left it), so the worker learns of a cancellation with no
 * statement of its own. With `returning`, the rows come back (URL, token, status).
 * Bound: lease end, then (hash, URL, token) per file, then now.
 */
export function heartbeatAllSql(d: Dialect, count: number, returning: boolean): string {
  const q = (column: string) => d.quote(column);
  // The ELSE keeps the column's own type, which types the bound lease on PostgreSQL too.
  return d.sql(
    `UPDATE ${table(d)} SET ${q('lease_expires_at')} = CASE ${q('status')} WHEN 'processing' THEN ? ELSE ${q('lease_expires_at')} END ` +
      `WHERE ${processingOrCancelled(d)} AND (${heldBy(d, count)}) AND ${leaseStillCounts(q, '?')}` +
      (returning ? ` RETURNING ${q('file_url')}, ${q('claim_token')}, ${q('status')}` : ''),
  );
}

/**
 * Which of `count` claims a heartbeat kept (processing, with the new lease) or found cancelled,
 * read in its transaction where there is no RETURNING. Bound as heartbeatAllSql.
 */
export function heldAfterHeartbeatSql(d: Dialect, count: number): string {
  const q = (column: string) => d.quote(column);
  return d.sql(
    `SELECT ${q('file_url')}, ${q('claim_token')}, ${q('status')} FROM ${table(d)} ` +
      `WHERE (${q('lease_expires_at')} = ? OR ${q('status')} = 'cancelled') AND ${processingOrCancelled(d)} AND (${heldBy(d, count)}) ` +
      `AND ${leaseStillCounts(q, '?')}`,
  );
}

/** Every dead letter, by URL. */
export function deadLettersSql(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return `SELECT * FROM ${table(d)} WHERE ${deadCondition(q)} ORDER BY ${q('file_url')}`;
}

/** A failed or cancelled file made pending with a fresh retry budget. Bound: hash, URL. */
export function requeueSql(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return d.sql(
    `UPDATE ${table(d)} SET ${q('status')} = 'pending', ${q('retry_count')} = 0, ${q('error_message')} = NULL, ` +
      `${q('lease_expires_at')} = NULL WHERE ${byUrl(d)} AND ${q('status')} IN ('failed', 'cancelled')`,
  );
}

/**
 * Requeues the dead letters among `n` files by key (failed with no retries left; the others are
 * left alone): the dashboard's "requeue all matching". Bound: the URL hashes.
 */
export function requeueDeadSql(d: Dialect, n: number): string {
  const q = (column: string) => d.quote(column);
  return d.sql(
    `UPDATE ${table(d)} SET ${q('status')} = 'pending', ${q('retry_count')} = 0, ${q('error_message')} = NULL, ` +
      `${q('lease_expires_at')} = NULL WHERE ${q('url_hash')} IN (${Array.from({ length: n }, () => '?').join(', ')}) ` +
      `AND ${q('status')} = 'failed' AND ${q('retry_count')} >= ${q('max_retries')}`,
  );
}

/**
 * Cancels a pending, failed or processing file. The token stays, so the worker holding it sees
 * its own claim cancelled (heartbeatAllSql), and its fenced completion, which needs `processing`,
 * is refused. Bound: hash, URL.
 */
export function cancelSql(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return d.sql(
    `UPDATE ${table(d)} SET ${q('status')} = 'cancelled', ${q('lease_expires_at')} = NULL ` +
      `WHERE ${byUrl(d)} AND ${q('status')} IN ('pending', 'failed', 'processing')`,
  );
}

/** The paused types, sorted. */
export function pausedTypesSql(d: Dialect): string {
  const type = d.quote('file_type');
  return `SELECT ${type} FROM ${d.quote(FILE_TYPES_TABLE)} ORDER BY ${type}`;
}

/** Resumes one type (bound: the type), or with `every` all of them. */
export function resumeSql(d: Dialect, every: boolean): string {
  return d.sql(`DELETE FROM ${d.quote(FILE_TYPES_TABLE)}` + (every ? '' : ` WHERE ${d.quote('file_type')} = ?`));
}

/** Counts and sums by status. */
export function summarySql(d: Dialect): string {
  const q = (column: string) => d.quote(column);
  return (
    `SELECT ${q('status')} AS ${q('status')}, COUNT(*) AS ${q('files')}, ` +
    `SUM(CASE WHEN ${q('retry_count')} >= ${q('max_retries')} THEN 1 ELSE 0 END) AS ${q('exhausted')}, ` +
    `SUM(${q('records_total')}) AS ${q('records_total')}, SUM(${q('records_filtered')}) AS ${q('records_filtered')}, ` +
    `SUM(${q('records_persisted')}) AS ${q('records_persisted')}, SUM(${q('processing_time_ms')}) AS ${q('processing_time_ms')} ` +
    `FROM ${table(d)} GROUP BY ${q('status')}`
  );
}

/** register of `count` files as one statement that inserts the unknown ones and notifies (where the dialect can). */
export function registerNotifyingSql(d: Dialect, count: number): string | undefined {
  const wakeups = d.wakeups;
  if (!wakeups) return undefined;
  return wakeups.insertNotifying(
    d.insertIgnoreRows(FILES_TABLE, REGISTER_COLUMNS, ['url_hash'], count),
    d.placeholder(REGISTER_COLUMNS.length * count + 1),
  );
}
