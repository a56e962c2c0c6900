import type { EntityManager } from 'typeorm';
import { ownStatementError } from '../core/database-errors';
import { run } from '../core/run-statement';
import { dataSourceOf } from '../core/transaction';
import { type Dialect, dialectOf } from '../dialect';
import type { ControlState } from './job-state';

/** A table whose rows carry a control state: the jobs (keyed by name) or the import batches (by id). */
export interface ControlTable {
  table: 'checkpoint_jobs' | 'checkpoint_imports';
  key: 'name' | 'id';
  /** The condition (quoted SQL, no values) of a row that pause and cancel apply to: a job or import that can still run. */
  unfinished(q: (identifier: string) => string): string;
}

export const JOBS: ControlTable = {
  table: 'checkpoint_jobs',
  key: 'name',
  // Steps have no loop to stop.
  unfinished: (q) => `${q('kind')} IN ('batch', 'partitioned') AND NOT ${q('done')}`,
};

export const IMPORTS: ControlTable = {
  table: 'checkpoint_imports',
  key: 'id',
  unfinished: (q) => `(${q('total_rows')} IS NULL OR ${q('next_index')} < ${q('total_rows')})`,
};

/** The condition, in quoted SQL, of a row whose loop may start another batch. */
export function activeCondition(dialect: Pick<Dialect, 'quote'>): string {
  return `${dialect.quote('state')} = 'active'`;
}

/** The transition each operation makes: from which states, to which. */
const TRANSITIONS: Record<'pause' | 'resume' | 'cancel', { from: ControlState[]; to: ControlState; unfinished: boolean }> = {
  pause: { from: ['active'], to: 'paused', unfinished: true },
  resume: { from: ['paused'], to: 'active', unfinished: false },
  cancel: { from: ['active', 'paused'], to: 'cancelled', unfinished: true },
};

/** Moves the row `key` of `target` to the operation's state, when it is in one it moves from: true when it moved. */
export async function changeState(
  tx: EntityManager,
  target: ControlTable,
  operation: 'pause' | 'resume' | 'cancel',
  key: string,
): Promise<boolean> {
  const dialect = dialectOf(dataSourceOf(tx));
  const q = (identifier: string) => dialect.quote(identifier);
  const { from, to, unfinished } = TRANSITIONS[operation];
  const states = from.map(() => '?').join(', ');
  // The time of the change, by the server's clock where a fenced commit compares it with its transaction's start.
  const clock = dialect.stateClock;
  const sql = dialect.sql(
    `UPDATE ${q(target.table)} SET ${q('state')} = ?, ${q('updated_at')} = ${clock ? clock.now : '?'} ` +
      `WHERE ${q(target.key)} = ? AND ${q('state')} IN (${states})${unfinished ? ` AND ${target.unfinished(q)}` : ''}`,
  );
  try {
    return (await dialect.execute(tx.queryRunner!, sql, [to, ...(clock ? [] : [Date.now()]), key, ...from])).affected > 0;
  } catch (error) {
    throw ownStatementError(error, `changing the state of "${key}"`);
  }
}

/** The row's control state; undefined when there is no such row. */
export async function readState(tx: EntityManager, target: ControlTable, key: string): Promise<ControlState | undefined> {
  const dialect = dialectOf(dataSourceOf(tx));
  const q = (identifier: string) => dialect.quote(identifier);
  const rows = await run<{ state: ControlState }[]>(
    tx,
    dialect.sql(`SELECT ${q('state')} FROM ${q(target.table)} WHERE ${q(target.key)} = ?`),
    [key],
    `reading the state of "${key}"`,
  );
  return rows[0]?.state;
}

/** The row's loop waits on its throttle until `until` (epoch ms): the dashboard shows it "throttled" until then. */
export async function markThrottled(tx: EntityManager, target: ControlTable, key: string, until: number): Promise<void> {
  const dialect = dialectOf(dataSourceOf(tx));
  const q = (identifier: string) => dialect.quote(identifier);
  await run(
    tx,
    dialect.sql(`UPDATE ${q(target.table)} SET ${q('throttled_until')} = ? WHERE ${q(target.key)} = ?`),
    [Math.round(until), key],
    `recording the throttle wait of "${key}"`,
  );
}

/** Adds `ms` to the row's throttled time; the wait is over (`throttled_until` cleared). */
export async function addThrottled(tx: EntityManager, target: ControlTable, key: string, ms: number): Promise<void> {
  const dialect = dialectOf(dataSourceOf(tx));
  const q = (identifier: string) => dialect.quote(identifier);
  await run(
    tx,
    dialect.sql(
      `UPDATE ${q(target.table)} SET ${q('throttled_ms')} = ${q('throttled_ms')} + ?, ${q('throttled_until')} = NULL WHERE ${q(target.key)} = ?`,
    ),
    [Math.round(ms), key],
    `recording the throttled time of "${key}"`,
  );
}
