import { ownStatementError } from '../core/database-errors';
import { InvalidArgumentError } from '../core/errors';
import { type Db, dataSourceOf } from '../core/transaction';
import { dialectOf } from '../dialect';
import type { Throttle } from './throttle';

/** Options of {@link replicaLag}. */
export interface ReplicaLagOptions {
  /** The largest lag, in ms, at which batches go on; a replica further behind makes the loop wait. */
  maxLagMs: number;
  /** The longest wait between two checks of the lag, in ms (default 5,000); the waits grow to it. */
  checkEveryMs?: number;
}

const DEFAULT_CHECK_EVERY_MS = 5000;
/** The first wait after a check finds the lag too large; each further one doubles, up to `checkEveryMs`. */
const FIRST_WAIT_MS = 100;

function positive(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidArgumentError(`replicaLag: ${what} must be a positive number of milliseconds, got ${String(value)}.`);
  }
  return value;
}

/**
 * A {@link Throttle} for `eachBatch`, `eachPartition`, `importFile` and `work()` that holds the
 * next batch back while a replica is more than `maxLagMs` behind. Each call runs one status
 * statement on a connection of its own (never in a transaction) and returns the milliseconds to
 * wait: 0 while the lag is within `maxLagMs`; else 100 ms, then twice as long at each further check
 * that still finds the lag too large, up to `checkEveryMs` (default 5 s).
 *
 * - **PostgreSQL**: pass the primary. It reads the largest `pg_stat_replication.replay_lag` of the
 *   standbys streaming from it (logical subscribers included); a standby idle and caught up reports
 *   NULL, read as 0, and a disconnected one is not counted. The role needs `pg_read_all_stats` (or
 *   superuser) to see the lag, else the throttle throws `INVALID_ARGUMENT` rather than reading
 *   "no lag". `replay_lag` is what the standby last reported: it rises about when a late write is
 *   replayed, and falls back once the standby reports being caught up, which an idle standby does
 *   every `wal_receiver_status_interval` (10 s by default; lower it on the standbys for shorter waits).
 * - **MySQL/MariaDB**: pass a DataSource of the replica. It reads `Seconds_Behind_Source` from
 *   `SHOW REPLICA STATUS` (MySQL 8.0.22+, MariaDB 10.5.1+; `Seconds_Behind_Master` from
 *   `SHOW SLAVE STATUS` on older servers), the largest over the replica's channels, in whole
 *   seconds. A server that is no replica never makes the loop wait. A replica whose replication
 *   is stopped (the lag is NULL, unknown) makes it wait until replication runs again. The user
 *   needs `REPLICATION CLIENT` (MySQL) or `REPLICA MONITOR` (MariaDB 10.5+).
 * - **SQLite** has no replicas: the throttle always returns 0 and runs no statement.
 *
 * A failed status statement stops the loop with `DATABASE_ERROR`.
 *
 * @example
 * ```ts
 * await eachBatch(primary, 'backfill-prices', source, 500, handler, {
 *   throttle: replicaLag(primary, { maxLagMs: 2000 }),
 * });
 * ```
 * @throws {@link InvalidArgumentError} when `maxLagMs` or `checkEveryMs` is not a positive, finite number.
 */
export function replicaLag(db: Db, options: ReplicaLagOptions): Throttle {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('replicaLag: options { maxLagMs } are required.');
  }
  const maxLagMs = positive(options.maxLagMs, 'maxLagMs');
  const checkEveryMs = positive(options.checkEveryMs ?? DEFAULT_CHECK_EVERY_MS, 'checkEveryMs');
  const dataSource = dataSourceOf(db);
  const measure = dialectOf(dataSource).replicaLagMs;
  if (!measure) return Object.assign(() => 0, { untilZero: true });
  const firstWait = Math.min(FIRST_WAIT_MS, checkEveryMs);
  let nextWait = firstWait;
  const throttle = async (): Promise<number> => {
    let lag: number;
    try {
      // The DataSource's manager, not `db`: a transaction's manager would run it inside that transaction.
      lag = await measure(dataSource.manager);
    } catch (error) {
      throw ownStatementError(error, "reading the replicas' lag");
    }
    if (lag <= maxLagMs) {
      nextWait = firstWait;
      return 0;
    }
    const wait = nextWait;
    nextWait = Math.min(checkEveryMs, nextWait * 2);
    return wait;
  };
  // Asked again after each wait: no batch begins while the lag is above maxLagMs.
  return Object.assign(throttle, { untilZero: true });
}
