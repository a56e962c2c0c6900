// What a process under injected faults needs (no chai: child processes import this too).
import { DataSource, type DataSourceOptions, type Logger } from 'typeorm';
import { checkpointEntities } from '../../entities';
import { dataSourceOptionsFromUrl } from '../../src/data-source-options';

/** The `application_name` of connections a fault test may kill (PostgreSQL). */
export const VICTIM_APP = 'ck_fault_victim';

export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * DataSource options for a process under test: on PostgreSQL its connections carry VICTIM_APP so
 * the test can terminate exactly them; on SQLite `busyTimeoutMs` replaces the 30 s busy timeout.
 */
export function victimOptions(url: string, options: { busyTimeoutMs?: number; logger?: Logger; extra?: Record<string, unknown> } = {}): DataSourceOptions {
  const base = dataSourceOptionsFromUrl(url) as DataSourceOptions & Record<string, unknown>;
  const tuned: Record<string, unknown> = { ...base, entities: checkpointEntities };
  if (base.type === 'postgres') {
    tuned.applicationName = VICTIM_APP;
    if (options.extra) tuned.extra = options.extra;
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

/**
 * PostgreSQL: terminates the backends of this database opened by a victim (all of them, or one
 * picked at random); returns how many.
 */
export async function terminateVictims(admin: DataSource, which: 'all' | 'one' = 'all'): Promise<number> {
  const rows = (await admin.query(
    `SELECT COUNT(pg_terminate_backend(pid)) AS n FROM (SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()
      ORDER BY random() ${which === 'one' ? 'LIMIT 1' : ''}) AS victims`,
    [VICTIM_APP],
  )) as { n: string }[];
  return Number(rows[0].n);
}
