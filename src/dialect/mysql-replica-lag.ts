import type { EntityManager } from 'typeorm';
import { errorCodes } from '../core/database-errors';

// MySQL 8.0.22+ and MariaDB 10.5.1+ know SHOW REPLICA STATUS; older servers only SHOW SLAVE STATUS.
const STATEMENTS = ['SHOW REPLICA STATUS', 'SHOW SLAVE STATUS'];

type ReplicaStatus = Record<string, unknown> & { Seconds_Behind_Source?: unknown; Seconds_Behind_Master?: unknown };

async function replicaStatus(manager: EntityManager): Promise<ReplicaStatus[]> {
  for (const [i, statement] of STATEMENTS.entries()) {
    try {
      return (await manager.query(statement)) as ReplicaStatus[];
    } catch (error) {
      if (i === STATEMENTS.length - 1 || !errorCodes(error).includes('ER_PARSE_ERROR')) throw error;
    }
  }
  return [];
}

/**
 * How far this replica is behind its source, in ms (the largest of its channels): MySQL's
 * `Seconds_Behind_Source`, MariaDB's `Seconds_Behind_Master`. 0 when the server is no replica;
 * Infinity when it is one whose replication threads are stopped (the lag is NULL, unknown).
 */
export async function mysqlReplicaLagMs(manager: EntityManager): Promise<number> {
  let lag = 0;
  for (const row of await replicaStatus(manager)) {
    const seconds = row.Seconds_Behind_Source ?? row.Seconds_Behind_Master ?? null;
    lag = Math.max(lag, seconds === null ? Infinity : Number(seconds) * 1000);
  }
  return lag;
}
