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
  if (value !== 'sqlite' && value !== 'postgres' && value !== 'mysql') throw new Error(`DB must be sqlite, postgres or mysql, not ${value}`);
  return value;
})();

export const POSTGRES_ADMIN_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const MYSQL_ADMIN_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

async function adminQuery<T = unknown>(sql: string): Promise<T> {
  const admin = new DataSource(dataSourceOptionsFromUrl(DRIVER === 'postgres' ? POSTGRES_ADMIN_URL : MYSQL_ADMIN_URL));
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
  mysqlScheme ??= adminQuery<{ version: string }[]>('SELECT VERSION() AS version').then((rows) =>
    /mariadb/i.test(rows[0].version) ? 'mariadb' : 'mysql',
  );
  return mysqlScheme;
}

/** A fresh, empty database for one test file (a SQLite file, or a new PostgreSQL/MySQL database). */
export interface TestDatabase {
  url: string;
  /** Opens a DataSource with the checkpoint entities (plus `entities`) and runs the migrations. */
  open(options?: { entities?: MixedList<Function | string | EntitySchema>; logging?: DataSourceOptions['logging']; logger?: Logger }): Promise<DataSource>;
  drop(): Promise<void>;
}

export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const name = `ck_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  let url: string;
  let drop: () => Promise<void>;
  if (DRIVER === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'ck-'));
    url = `sqlite:${join(dir, `${name}.sqlite`)}`;
    drop = async () => rmSync(dir, { recursive: true, force: true });
  } else if (DRIVER === 'postgres') {
    await adminQuery(`CREATE DATABASE "${name}"`);
    url = POSTGRES_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
    drop = () => adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } else {
    await adminQuery(`CREATE DATABASE \`${name}\``);
    url = MYSQL_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`).replace(/^[a-z]+:/, `${await mysqlUrlScheme()}:`);
    drop = () => adminQuery(`DROP DATABASE IF EXISTS \`${name}\``);
  }
  const opened: DataSource[] = [];
  return {
    url,
    async open(options = {}) {
      const dataSource = new DataSource({
        ...dataSourceOptionsFromUrl(url),
        entities: [...checkpointEntities, ...((options.entities as []) ?? [])],
        migrations: checkpointMigrations,
        logging: options.logging ?? (options.logger ? true : false),
        ...(options.logger ? { logger: options.logger } : {}),
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
