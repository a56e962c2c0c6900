import type { EntityManager } from 'typeorm';
import { InvalidArgumentError } from '../core/errors';
import { type JobRow, updateJob } from './job-store';

/** A source's own estimate of the items its whole job visits (see `Source.total`). */
export type TotalOf = (tx: EntityManager) => Promise<number | null>;

/** The job row's columns once it ends: its total is then its item count, no longer an estimate. */
export function endedTotal(items: number): { total: number; total_estimated: boolean } {
  return { total: items, total_estimated: false };
}

/**
 * The job's total as a run starts, in the transaction that locked its row: the stored one, else
 * (a new job, or one stored before totals, not done) the source's estimate, stored now. Asked once
 * per call, never per batch; a source without `total` leaves it unknown (null).
 */
export async function startingTotal(tx: EntityManager, row: JobRow, totalOf: TotalOf | undefined): Promise<number | null> {
  if (row.total !== null && row.total !== undefined) return Number(row.total);
  if (row.done === true || Number(row.done) === 1 || typeof totalOf !== 'function') return null;
  const estimate = await totalOf(tx);
  if (estimate === null) return null;
  if (typeof estimate !== 'number' || !Number.isFinite(estimate) || estimate < 0) {
    throw new InvalidArgumentError(`The source's total() must return a finite number >= 0 or null, got ${String(estimate)}.`);
  }
  const total = Math.round(estimate);
  await updateJob(tx, row.name, { total, total_estimated: true });
  return total;
}
