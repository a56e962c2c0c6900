import type { EntityManager } from 'typeorm';
import { InvalidArgumentError } from '../core/errors';

// One row per WAL sender. replay_lag is NULL once a standby reported twice that it replayed
// everything (idle, caught up), and for a standby that never replayed yet: 0. A role without
// pg_read_all_stats sees other users' senders with every column but pid NULL (state too).
const REPLICA_LAG = `SELECT COUNT(*)::int AS senders, COUNT(state)::int AS visible,
  COALESCE(EXTRACT(EPOCH FROM MAX(replay_lag)) * 1000, 0)::float8 AS lag_ms
  FROM pg_stat_replication`;

/** The largest `pg_stat_replication.replay_lag` of the primary's standbys, in ms; 0 with none. */
export async function pgReplicaLagMs(manager: EntityManager): Promise<number> {
  const [row] = (await manager.query(REPLICA_LAG)) as { senders: number; visible: number; lag_ms: number }[];
  if (row.visible < row.senders) {
    // Reading NULL as "caught up" would silently turn the throttle off.
    throw new InvalidArgumentError(
      "replicaLag: the DataSource's role cannot see the replicas' lag in pg_stat_replication; grant it pg_read_all_stats (or use a superuser).",
    );
  }
  return Number(row.lag_ms);
}
