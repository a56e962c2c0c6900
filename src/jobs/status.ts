import { InvalidArgumentError } from '../core/errors';
import type { EntityManager } from 'typeorm';
import { deleteJob, type JobKind, type JobRow, lockJob, readJob, selectJobs, type Status, toStatus, validateName } from './job-store';
import { deleteRanges, rangeTotals } from './partition-store';
import { type Db, transact } from '../core/transaction';

export type { Status } from './job-store';

/** Compares strings by Unicode code point (not UTF-16 unit, not database collation). */
export function compareCodePoints(a: string, b: string): number {
  const left = a[Symbol.iterator]();
  const right = b[Symbol.iterator]();
  for (;;) {
    const x = left.next();
    const y = right.next();
    if (x.done || y.done) return x.done ? (y.done ? 0 : -1) : 1;
    const difference = (x.value.codePointAt(0) as number) - (y.value.codePointAt(0) as number);
    if (difference !== 0) return difference;
  }
}

/** The stored state of a job or step, or null if it never ran (or was reset). */
export async function status(db: Db, name: string): Promise<Status | null> {
  validateName(name);
  return transact(db, async (tx) => {
    const row = await readJob(tx, name);
    return row ? (await withRanges(tx, [row]))[0] : null;
  });
}

/** Forgets a job or step; true if there was one. It does not undo the writes the job made. */
export async function reset(db: Db, name: string): Promise<boolean> {
  validateName(name);
  return transact(db, async (tx) => {
    // Locked, not just read: on SQLite a read before the first write would make the delete fail
    // with SQLITE_BUSY when another process wrote in between, instead of waiting its turn.
    const existed = (await lockJob(tx, name)) !== undefined;
    if (existed) {
      await deleteJob(tx, name);
      await deleteRanges(tx, name);
    }
    return existed;
  });
}

/** Which jobs {@link list} returns; every given field must match. */
export interface ListFilter {
  /** Only jobs of this kind. */
  kind?: JobKind;
  /** Only finished (true) or unfinished (false) jobs. */
  done?: boolean;
  /** Only jobs whose name starts with this (compared exactly, case-sensitive). */
  prefix?: string;
  /** Only jobs in this state (see {@link Status.state}). */
  state?: Status['state'];
}

/** Every stored job and step matching the filter, ordered by name (code point order); a malformed filter throws `INVALID_ARGUMENT`. */
export async function list(db: Db, filter: ListFilter = {}): Promise<Status[]> {
  if (typeof filter !== 'object' || filter === null) throw new InvalidArgumentError('list: filter must be an object.');
  if (filter.kind !== undefined && filter.kind !== 'batch' && filter.kind !== 'step' && filter.kind !== 'partitioned') {
    throw new InvalidArgumentError(`list: kind must be 'batch', 'step' or 'partitioned', got ${String(filter.kind)}.`);
  }
  if (filter.done !== undefined && typeof filter.done !== 'boolean') {
    throw new InvalidArgumentError('list: done must be a boolean.');
  }
  if (filter.state !== undefined && !['active', 'paused', 'cancelled', 'done'].includes(filter.state)) {
    throw new InvalidArgumentError(`list: state must be 'active', 'paused', 'cancelled' or 'done', got ${String(filter.state)}.`);
  }
  if (filter.prefix !== undefined && typeof filter.prefix !== 'string') {
    throw new InvalidArgumentError('list: prefix must be a string.');
  }
  const statuses = await transact(db, async (tx) => withRanges(tx, await selectJobs(tx, filter)));
  return statuses.sort((a, b) => compareCodePoints(a.name, b.name));
}

/** Statuses of job rows; a partitioned job's totals and range counts come from its ranges (its row is not updated per batch). */
async function withRanges(tx: EntityManager, rows: JobRow[]): Promise<Status[]> {
  const now = Date.now();
  const totals = await rangeTotals(
    tx,
    rows.filter((row) => row.kind === 'partitioned').map((row) => row.name),
    now,
  );
  return rows.map((row) => {
    const status = toStatus(row);
    if (row.kind !== 'partitioned') return status;
    const total = totals.get(row.name) ?? { partitions: { pending: 0, running: 0, done: 0, dead: 0 }, batches: 0, items: 0, updatedAt: 0 };
    return {
      ...status,
      batches: total.batches,
      items: total.items,
      updatedAt: Math.max(status.updatedAt, total.updatedAt),
      partitions: total.partitions,
    };
  });
}
