import type { EntityManager } from 'typeorm';
import { ownStatementError } from '../core/database-errors';
import { run } from '../core/run-statement';
import { type Dialect, dialectOf, type FinalStatement, type OpeningStatement } from '../dialect';
import { InvalidArgumentError } from '../core/errors';
import { decodeJson, type Json } from '../core/json';
import { dataSourceOf } from '../core/transaction';
import { activeCondition } from '../control/control-store';
import { controlStateOf } from '../control/job-state';

/**
 * What a job row is: an {@link eachBatch} job, a {@link step}, or an {@link eachPartition} job.
 * @inline
 */
export type JobKind = 'batch' | 'step' | 'partitioned';

/** The stored state of a batch job, step or partitioned job, as {@link status} and {@link list} return it. Times are milliseconds since the Unix epoch. */
export interface Status {
  /** The job's or step's name. */
  name: string;
  /** Which API made it. */
  kind: JobKind;
  /** True once the job finished or the step recorded its value. */
  done: boolean;
  /** The last committed cursor (batch jobs; null otherwise or before the first batch). */
  cursor: Json;
  /** The recorded result (steps; null otherwise or before it is recorded). */
  value: Json;
  /** Batches committed over every run (a partitioned job: summed over its ranges). */
  batches: number;
  /** Items committed over every run (a partitioned job: summed over its ranges). */
  items: number;
  /** When the job row was created. */
  startedAt: number;
  /** When anything about it last committed. */
  updatedAt: number;
  /** When it finished; null until done. */
  finishedAt: number | null;
  /** `'done'` once finished, else what an operator asked: `'active'`, `'paused'` ({@link pause}) or `'cancelled'` ({@link cancel}). */
  state: 'active' | 'paused' | 'cancelled' | 'done';
  /** Milliseconds its loops spent waiting on a `throttle`, over every run. */
  throttledMs: number;
  /**
   * Batch and partitioned jobs: the items the whole job visits — its source's estimate, taken when
   * it started (`totalEstimated: true`), then its item count once done; null when unknown (steps,
   * a custom source without `total`).
   */
  total: number | null;
  /** True while `total` is the source's estimate; false once the job is done (or without a total). */
  totalEstimated: boolean;
  /** Partitioned jobs only: their ranges by state (a released range is pending). */
  partitions?: {
    /** Ranges waiting for a claim (released or retryable ones included). */
    pending: number;
    /** Ranges claimed and not finished. */
    running: number;
    /** Ranges finished. */
    done: number;
    /** Ranges out of attempts. */
    dead: number;
  };
}

/** A `checkpoint_jobs` row as the drivers return it (pg: int8 as string, sqlite/mysql: 0/1 booleans). */
export interface JobRow {
  name: string;
  kind: string;
  done: boolean | number | string;
  cursor: string | null;
  value: string | null;
  fingerprint: string | null;
  batches: number | string;
  items: number | string;
  started_at: number | string;
  updated_at: number | string;
  finished_at: number | string | null;
  state: string;
  throttled_ms: number | string;
  total: number | string | null;
  total_estimated: boolean | number | string;
}

const TABLE = 'checkpoint_jobs';

export function toStatus(row: JobRow): Status {
  const done = row.done === true || Number(row.done) === 1;
  return {
    name: row.name,
    kind: row.kind as JobKind,
    done,
    cursor: decodeJson(row.cursor),
    value: decodeJson(row.value),
    batches: Number(row.batches),
    items: Number(row.items),
    startedAt: Number(row.started_at),
    updatedAt: Number(row.updated_at),
    finishedAt: row.finished_at === null ? null : Number(row.finished_at),
    state: done ? 'done' : controlStateOf(row.state),
    throttledMs: Number(row.throttled_ms ?? 0),
    total: row.total === null || row.total === undefined ? null : Number(row.total),
    totalEstimated: row.total_estimated === true || Number(row.total_estimated) === 1,
  };
}

export function validateName(name: unknown, what = 'name'): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 512) {
    throw new InvalidArgumentError(`${what} must be a non-empty string of at most 512 characters.`);
  }
}

/** Creates the job row unless it exists (never overwriting a concurrent creator's row). */
export async function insertJob(tx: EntityManager, name: string, kind: JobKind, fingerprint: string | null): Promise<void> {
  const dialect = dialectOf(dataSourceOf(tx));
  const now = Date.now();
  await run(
    tx,
    dialect.insertIgnore(TABLE, ['name', 'kind', 'done', 'fingerprint', 'batches', 'items', 'started_at', 'updated_at'], ['name']),
    [name, kind, dialect.bindable(false), fingerprint, 0, 0, now, now],
    `creating job "${name}"`,
  );
}

/** Reads the job row and locks it (row lock, or the SQLite write lock) until the transaction ends. */
export async function lockJob(tx: EntityManager, name: string): Promise<JobRow | undefined> {
  const lock = dialectOf(dataSourceOf(tx)).lockRow(TABLE, 'name');
  if (lock.before) await run(tx, lock.before, [name], `locking job "${name}"`);
  const rows = await run<JobRow[]>(tx, lock.select, [name], `locking job "${name}"`);
  return rows[0];
}

export async function readJob(tx: EntityManager, name: string): Promise<JobRow | undefined> {
  const dialect = dialectOf(dataSourceOf(tx));
  const rows = await run<JobRow[]>(
    tx,
    dialect.sql(`SELECT * FROM ${dialect.quote(TABLE)} WHERE ${dialect.quote('name')} = ?`),
    [name],
    `reading job "${name}"`,
  );
  return rows[0];
}

/** The columns a recorded step's cache hit needs. */
export type StepRecord = Pick<JobRow, 'name' | 'kind' | 'done' | 'value'>;

const stepRecordSql = new Map<string, string>();

/** Reads a step's record without a lock, only the columns a cache hit needs (the SQL built once per dialect). */
export async function readStepRecord(tx: EntityManager, name: string): Promise<StepRecord | undefined> {
  const dialect = dialectOf(dataSourceOf(tx));
  let sql = stepRecordSql.get(dialect.name);
  if (sql === undefined) {
    const q = (column: string) => dialect.quote(column);
    sql = dialect.sql(`SELECT ${q('name')}, ${q('kind')}, ${q('done')}, ${q('value')} FROM ${q(TABLE)} WHERE ${q('name')} = ?`);
    stepRecordSql.set(dialect.name, sql);
  }
  const rows = await run<StepRecord[]>(tx, sql, [name], `reading step "${name}"`);
  return rows[0];
}

export function assertKind(row: Pick<JobRow, 'name' | 'kind'>, kind: JobKind): void {
  if (row.kind !== kind) {
    throw new InvalidArgumentError(`"${row.name}" is already used by a ${row.kind}; pick another name for this ${kind}.`);
  }
}

/**
 * The UPDATE of one job row's `columns` (`updated_at` last, always refreshed), then its name, in the
 * dialect's placeholders; `unchanged`: then its cursor and batch count, and only while not done
 * and active (a pause or cancel fails it, as a moved row does).
 */
function jobUpdateSql(dialect: Dialect, columns: string[], unchanged = false): string {
  const q = (column: string) => dialect.quote(column);
  const assignments = [...columns, 'updated_at'].map((column) => `${q(column)} = ?`).join(', ');
  const guard = unchanged ? ` AND ${q('cursor')} = ? AND ${q('batches')} = ? AND NOT ${q('done')} AND ${activeCondition(dialect)}` : '';
  return dialect.sql(`UPDATE ${q(TABLE)} SET ${assignments} WHERE ${q('name')} = ?${guard}`);
}

/** The job row's update: `values`, `updated_at`; with `unchanged`, only while the row is as it says. */
function jobUpdate(
  dialect: Dialect,
  name: string,
  values: Record<string, unknown>,
  unchanged?: { cursor: string; batches: number },
): { sql: string; parameters: unknown[] } {
  const entries = Object.entries(values);
  const parameters = [...entries.map(([, value]) => dialect.bindable(value)), Date.now(), name];
  if (unchanged) parameters.push(unchanged.cursor, unchanged.batches);
  return {
    sql: jobUpdateSql(
      dialect,
      entries.map(([column]) => column),
      unchanged !== undefined,
    ),
    parameters,
  };
}

/** Sets columns of one job row; `updated_at` is always refreshed. */
export async function updateJob(tx: EntityManager, name: string, values: Record<string, unknown>): Promise<void> {
  const { sql, parameters } = jobUpdate(dialectOf(dataSourceOf(tx)), name, values);
  await run(tx, sql, parameters, `updating job "${name}"`);
}

/**
 * `updateJob` of a row the transaction has not locked yet, applied only while the row is as
 * `unchanged` says (same cursor and count, not done): true when it was, and the row is then locked
 * until the transaction ends; false when another runner or a reset moved it (waiting first for a
 * transaction that holds it; READ COMMITTED then checks the row's new version).
 */
export async function updateJobUnchanged(
  tx: EntityManager,
  name: string,
  values: Record<string, unknown>,
  unchanged: { cursor: string; batches: number },
): Promise<boolean> {
  const dialect = dialectOf(dataSourceOf(tx));
  const { sql, parameters } = jobUpdate(dialect, name, values, unchanged);
  try {
    return (await dialect.execute(tx.queryRunner!, sql, parameters)).affected === 1;
  } catch (error) {
    throw ownStatementError(error, `updating job "${name}"`);
  }
}

/**
 * `updateJob` as the last statement of a batch's transaction, sent with its COMMIT (see
 * PipelinedCommit): the job row, locked by the transaction, must change.
 */
export function jobUpdateAtCommit(dialect: Dialect, name: string, values: Record<string, string | number>): FinalStatement {
  const entries = Object.entries(values);
  return {
    sql: jobUpdateSql(
      dialect,
      entries.map(([column]) => column),
    ),
    parameters: [...entries.map(([, value]) => value), Date.now(), name],
    expected: 1,
  };
}

/**
 * The job row's lock as the first statement of the next batch's transaction, begun with a
 * batch's COMMIT (see PipelinedCommit; PostgreSQL): it locks the row only while it is as that
 * batch left it — same cursor and count, not done, active — so the batch after can skip re-reading
 * it. A pause or cancel fails it: the batch after then reads the row under its lock, and stops.
 */
export function jobLockAtBegin(dialect: Dialect, name: string, left: { cursor: string; batches: number }): OpeningStatement {
  const q = (column: string) => dialect.quote(column);
  return {
    sql: dialect.sql(
      `SELECT 1 FROM ${q(TABLE)} WHERE ${q('name')} = ? AND ${q('cursor')} = ? AND ${q('batches')} = ? AND NOT ${q('done')} ` +
        `AND ${activeCondition(dialect)} FOR UPDATE`,
    ),
    parameters: [name, left.cursor, left.batches],
    expected: 1,
  };
}

export async function deleteJob(tx: EntityManager, name: string): Promise<void> {
  const dialect = dialectOf(dataSourceOf(tx));
  await run(tx, dialect.sql(`DELETE FROM ${dialect.quote(TABLE)} WHERE ${dialect.quote('name')} = ?`), [name], `resetting "${name}"`);
}

export async function selectJobs(
  tx: EntityManager,
  filter: { kind?: JobKind; done?: boolean; prefix?: string; state?: Status['state'] },
): Promise<JobRow[]> {
  const dialect = dialectOf(dataSourceOf(tx));
  const conditions: string[] = [];
  const parameters: unknown[] = [];
  if (filter.kind !== undefined) {
    conditions.push(`${dialect.quote('kind')} = ?`);
    parameters.push(filter.kind);
  }
  if (filter.done !== undefined) {
    conditions.push(`${dialect.quote('done')} = ?`);
    parameters.push(dialect.bindable(filter.done));
  }
  if (filter.state !== undefined) {
    // 'done' is the done column; the others are the state of an unfinished job.
    conditions.push(`${dialect.quote('done')} = ?`);
    parameters.push(dialect.bindable(filter.state === 'done'));
    if (filter.state !== 'done') {
      conditions.push(`${dialect.quote('state')} = ?`);
      parameters.push(filter.state);
    }
  }
  if (filter.prefix !== undefined && filter.prefix !== '') {
    // substr, not LIKE: a prefix containing % or _ must match literally.
    conditions.push(`SUBSTR(${dialect.quote('name')}, 1, ?) = ?`);
    parameters.push(Array.from(filter.prefix).length, filter.prefix);
  }
  const where = conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : '';
  return run<JobRow[]>(
    tx,
    dialect.sql(`SELECT * FROM ${dialect.quote(TABLE)}${where} ORDER BY ${dialect.quote('name')}`),
    parameters,
    'listing jobs',
  );
}
