import { InvalidArgumentError } from '../core/errors';

/** What a {@link Throttle} is told before each batch: the job (or import batch) and this call's counts so far. */
export interface ThrottleInfo {
  /** The job's name, or the import's batch id. */
  name: string;
  /** Batches (import chunks) this call has committed so far. */
  batches: number;
  /** Items (import rows) this call has committed so far. */
  items: number;
}

/**
 * Asked before each batch, chunk or claim: the milliseconds to wait first (0: go on). The wait
 * happens outside any transaction and ends early on `signal`, a pause, a cancel or `maxRuntimeMs`.
 * Anything but a finite number ≥ 0 stops the loop with `INVALID_ARGUMENT`.
 */
export interface Throttle {
  (info: ThrottleInfo): number | Promise<number>;
  /**
   * Asked again after each wait, until it returns 0, before the batch may begin (as
   * {@link replicaLag}'s is: it holds a job back for as long as the lag lasts). Unset: one wait per
   * batch, then the batch.
   */
  readonly untilZero?: boolean;
}

/**
 * Asks `throttle` how long to wait before the next batch, chunk or claim of `owner` (how the error
 * names it); INVALID_ARGUMENT for anything but a finite number of milliseconds ≥ 0.
 */
export async function askThrottle(throttle: Throttle, info: ThrottleInfo, owner: string): Promise<number> {
  const ms = await throttle(info);
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new InvalidArgumentError(`The throttle of ${owner} must return a finite number of milliseconds ≥ 0, got ${String(ms)}.`);
  }
  return ms;
}

/**
 * A {@link Throttle} that paces a call's items to at most `n` per second on average: before each
 * batch it waits until the items committed so far are due. Each call is paced from its own start.
 */
export function rowsPerSecond(n: number): Throttle {
  if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0) {
    throw new InvalidArgumentError(`rowsPerSecond: n must be a positive number, got ${String(n)}.`);
  }
  let startedAt = 0;
  let lastItems = Infinity;
  return ({ items }) => {
    const now = Date.now();
    // Fewer items than last time: another call (each call counts from 0) paced from now.
    if (items < lastItems) startedAt = now;
    lastItems = items;
    return Math.max(0, startedAt + (items * 1000) / n - now);
  };
}
