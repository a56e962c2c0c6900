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

async function adminQuery(sql: string): Promise<void> {
  const admin = new DataSource(dataSourceOptionsFromUrl(DRIVER === 'postgres' ? POSTGRES_ADMIN_URL : MYSQL_ADMIN_URL));
  await admin.initialize();
  try {
    await admin.query(sql);
  } finally {
    await admin.destroy();
  }
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
    url = MYSQL_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
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
