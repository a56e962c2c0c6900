// What a process under injected faults needs (no chai: child processes import this too).
import { DataSource, type DataSourceOptions, type Logger } from 'typeorm';
import { checkpointEntities } from '../../entities';
import { dataSourceOptionsFromUrl } from '../../src/data-source-options';

/** The `application_name` (PostgreSQL) or user (MySQL) of connections a fault test may kill. */
export const VICTIM_APP = 'ck_fault_victim';
const VICTIM_PASSWORD = 'ck-fault-victim';
// The databases the victim user may use: every fault suite's (createTestDatabase names them ck_<label>_…).
const VICTIM_DATABASES = 'ck\\_faults\\_%';

export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * DataSource options for a process under test: on PostgreSQL its connections carry VICTIM_APP as
 * application name, on MySQL they log in as user VICTIM_APP (call allowVictims first), so the
 * test can kill exactly them; on SQLite `busyTimeoutMs` replaces the 30 s busy timeout.
 */
export function victimOptions(
  url: string,
  options: { busyTimeoutMs?: number; logger?: Logger; extra?: Record<string, unknown> } = {},
): DataSourceOptions {
  const base = dataSourceOptionsFromUrl(url) as DataSourceOptions & Record<string, unknown>;
  const tuned: Record<string, unknown> = { ...base, entities: checkpointEntities };
  if (base.type === 'postgres') {
    tuned.applicationName = VICTIM_APP;
    if (options.extra) tuned.extra = options.extra;
  }
  if (base.type === 'mysql' || base.type === 'mariadb') {
    // TypeORM lets the URL's credentials win over `username`/`password`, so they go into the URL.
    const url = new URL(base.url as string);
    url.username = VICTIM_APP;
    url.password = VICTIM_PASSWORD;
    tuned.url = url.toString();
  }
  if (options.busyTimeoutMs !== undefined) {
    if (base.type === 'better-sqlite3') tuned.timeout = options.busyTimeoutMs;
    if ((base.type as string) === 'sqlite') tuned.busyTimeout = options.busyTimeoutMs;
  }
  if (options.logger) {
    tuned.logger = options.logger;
    tuned.logging = true;
  }
  return tuned as unknown as DataSourceOptions;
}

export async function openVictim(url: string, options: Parameters<typeof victimOptions>[1] = {}): Promise<DataSource> {
  const dataSource = new DataSource(victimOptions(url, options));
  await dataSource.initialize();
  return dataSource;
}

/** MySQL: creates the user victims log in as (once per server), allowed into the fault suites' databases. */
export async function allowVictims(admin: DataSource): Promise<void> {
  if (admin.options.type !== 'mysql' && admin.options.type !== 'mariadb') return;
  await admin.query(`CREATE USER IF NOT EXISTS '${VICTIM_APP}'@'%' IDENTIFIED BY '${VICTIM_PASSWORD}'`);
  await admin.query(`GRANT ALL PRIVILEGES ON \`${VICTIM_DATABASES}\`.* TO '${VICTIM_APP}'@'%'`);
}

/**
 * Kills the connections to this database opened by a victim (all of them, or one picked at
 * random): pg_terminate_backend on PostgreSQL, KILL CONNECTION on MySQL; returns how many.
 */
export async function terminateVictims(admin: DataSource, which: 'all' | 'one' = 'all'): Promise<number> {
  if (admin.options.type === 'mysql' || admin.options.type === 'mariadb') {
    const victims = (await admin.query(
      `SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = ? AND DB = DATABASE() ORDER BY RAND() ${which === 'one' ? 'LIMIT 1' : ''}`,
      [VICTIM_APP],
    )) as { id: number | string }[];
    let killed = 0;
    for (const { id } of victims) {
      try {
        await admin.query('KILL CONNECTION ?', [Number(id)]);
        killed++;
      } catch (error) {
        // Gone between the SELECT and the KILL (a victim closing its own connection).
        if ((error as { driverError?: { code?: string } }).driverError?.code !== 'ER_NO_SUCH_THREAD') throw error;
      }
    }
    return killed;
  }
  const rows = (await admin.query(
    `SELECT COUNT(pg_terminate_backend(pid)) AS n FROM (SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()
      ORDER BY random() ${which === 'one' ? 'LIMIT 1' : ''}) AS victims`,
    [VICTIM_APP],
  )) as { n: string }[];
  return Number(rows[0].n);
}
