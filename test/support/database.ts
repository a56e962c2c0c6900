import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { DataSource, type DataSourceOptions, type Logger, type MixedList, type EntitySchema } from 'typeorm';
import { checkpointEntities, checkpointMigrations, dataSourceOptionsFromUrl } from '../../src';

export type Driver = 'sqlite' | 'postgres' | 'mysql';

/** The driver every suite runs on, from `DB` (sqlite | postgres | mysql). */
export const DRIVER: Driver = ((): Driver => {
  const value = process.env.DB ?? 'sqlite';
  if (value !== 'sqlite' && value !== 'postgres' && value !== 'mysql')
    throw new Error(`DB must be sqlite, postgres or mysql, not ${value}`);
  return value;
})();

export const POSTGRES_ADMIN_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const MYSQL_ADMIN_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

async function adminQuery<T = unknown>(driver: 'postgres' | 'mysql', sql: string): Promise<T> {
  const admin = new DataSource(dataSourceOptionsFromUrl(driver === 'postgres' ? POSTGRES_ADMIN_URL : MYSQL_ADMIN_URL));
  await admin.initialize();
  try {
    return (await admin.query(sql)) as T;
  } finally {
    await admin.destroy();
  }
}

let mysqlScheme: Promise<'mysql' | 'mariadb'> | undefined;

/** `mariadb` when the MySQL-protocol server is MariaDB: TypeORM reads its catalogue right only with that type. */
function mysqlUrlScheme(): Promise<'mysql' | 'mariadb'> {
  mysqlScheme ??= adminQuery<{ version: string }[]>('mysql', 'SELECT VERSION() AS version').then((rows) =>
    /mariadb/i.test(rows[0].version) ? 'mariadb' : 'mysql',
  );
  return mysqlScheme;
}

export interface OpenOptions {
  entities?: MixedList<Function | string | EntitySchema>;
  logging?: DataSourceOptions['logging'];
  logger?: Logger;
  /** The driver's own options (e.g. `{ max: 1 }`: a pool of one connection). */
  extra?: Record<string, unknown>;
}

/** A fresh, empty database for one test file (a SQLite file, or a new PostgreSQL/MySQL database). */
export interface TestDatabase {
  url: string;
  /** The database's name (on SQLite, the file's name without `.sqlite`). */
  name: string;
  /** The SQLite file; undefined on the servers. */
  file?: string;
  /** Opens a DataSource with the checkpoint entities (plus `entities`) and runs the migrations. */
  open(options?: OpenOptions): Promise<DataSource>;
  drop(): Promise<void>;
}

/** `driver` defaults to the suites' `DB`; the bench passes its own. */
export async function createTestDatabase(label: string, driver: Driver = DRIVER): Promise<TestDatabase> {
  const name = `ck_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  let url: string;
  let file: string | undefined;
  let drop: () => Promise<void>;
  if (driver === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'ck-'));
    file = join(dir, `${name}.sqlite`);
    url = `sqlite:${file}`;
    drop = async () => rmSync(dir, { recursive: true, force: true });
  } else if (driver === 'postgres') {
    await adminQuery(driver, `CREATE DATABASE "${name}"`);
    url = POSTGRES_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
    drop = () => adminQuery(driver, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } else {
    await adminQuery(driver, `CREATE DATABASE \`${name}\``);
    url = MYSQL_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`).replace(/^[a-z]+:/, `${await mysqlUrlScheme()}:`);
    drop = () => adminQuery(driver, `DROP DATABASE IF EXISTS \`${name}\``);
  }
  const opened: DataSource[] = [];
  return {
    url,
    name,
    file,
    async open(options = {}) {
      const dataSource = new DataSource({
        ...dataSourceOptionsFromUrl(url),
        entities: [...checkpointEntities, ...((options.entities as []) ?? [])],
        migrations: checkpointMigrations,
        logging: options.logging ?? (options.logger ? true : false),
        ...(options.logger ? { logger: options.logger } : {}),
        ...(options.extra ? { extra: options.extra } : {}),
      });
      await dataSource.initialize();
      await dataSource.runMigrations();
      opened.push(dataSource);
      return dataSource;
    },
    async drop() {
      for (const dataSource of opened) if (dataSource.isInitialized) await dataSource.destroy();
      await drop();
    },
  };
}

/** A suite's own database, created and opened before its tests and dropped after them. */
export interface SuiteDatabase {
  /** The DataSource opened before the suite's tests (checkpoint entities plus the suite's own). */
  readonly ds: DataSource;
  readonly url: string;
  /** Another DataSource on the same database, dropped with it. */
  open(options?: OpenOptions): Promise<DataSource>;
}

/**
 * Registers mocha hooks in the calling `describe`: `before`, a fresh database opened with
 * `options`; `after`, the DataSources closed and the database dropped. Hooks run in the order they
 * are registered, so the suite's own `before` (creating its tables) comes after this call.
 */
export function useTestDatabase(label: string, options: OpenOptions = {}): SuiteDatabase {
  let database: TestDatabase | undefined;
  let dataSource: DataSource | undefined;
  before(async () => {
    database = await createTestDatabase(label);
    dataSource = await database.open(options);
  });
  after(async () => {
    await database?.drop();
  });
  const opened = (): TestDatabase => {
    if (!database) throw new Error(`the test database "${label}" is used before its before hook ran`);
    return database;
  };
  return {
    get ds() {
      opened();
      return dataSource!;
    },
    get url() {
      return opened().url;
    },
    open: (more) => opened().open(more),
  };
}

/** Numbers from COUNT(*) and int8 columns come back as strings on pg. */
export async function count(db: DataSource, sql: string, parameters: unknown[] = []): Promise<number> {
  const rows = (await db.query(sql, parameters)) as Record<string, unknown>[];
  return Number(Object.values(rows[0])[0]);
}

/**
 * How often to poll for lock waits: InnoDB serves INNODB_TRX from a cache it refreshes only when
 * nobody has read it for 100 ms, so polling it faster would never see a change.
 */
export const LOCK_POLL_MS = DRIVER === 'mysql' ? 150 : 10;

/** Sessions of this test database waiting for a row lock right now (SQLite has no such thing: 0). */
export async function rowLockWaiters(db: DataSource): Promise<number> {
  if (DRIVER === 'postgres') {
    return count(db, "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
  }
  if (DRIVER === 'mysql') {
    return count(
      db,
      `SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
        WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`,
    );
  }
  return 0;
}

/**
 * Callers of `db` waiting for a pooled connection right now (pg-pool's and mysql2's queues; a
 * SQLite DataSource has one connection, which the library queues for in its own lock: 0).
 */
export function connectionWaiters(db: DataSource): number {
  const driver = db.driver as unknown as { master?: { waitingCount: number }; pool?: { _connectionQueue: { length: number } } };
  if (DRIVER === 'postgres') return driver.master!.waitingCount;
  if (DRIVER === 'mysql') return driver.pool!._connectionQueue.length;
  return 0;
}

/** `?` placeholders in test SQL, rewritten to `$n` for PostgreSQL. */
export function sql(text: string): string {
  if (DRIVER !== 'postgres') return text;
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/** Quotes an identifier for the current driver. */
export function q(identifier: string): string {
  return DRIVER === 'mysql' ? `\`${identifier.replace(/`/g, '``')}\`` : `"${identifier.replace(/"/g, '""')}"`;
}
