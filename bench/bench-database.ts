import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { checkpointEntities, checkpointMigrations, dataSourceOptionsFromUrl } from '../src';

export type BenchDriver = 'sqlite' | 'postgres';

export const POSTGRES_ADMIN_URL = process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A database of the bench's own: a SQLite file in a temp dir, or a new PostgreSQL database. */
export interface BenchDatabase {
  driver: BenchDriver;
  url: string;
  /** The SQLite file, for raw better-sqlite3 baselines. */
  file?: string;
  /** The PostgreSQL database name, for psql baselines. */
  name?: string;
  /** A migrated DataSource with the checkpoint entities. */
  open(extra?: Partial<DataSourceOptions>): Promise<DataSource>;
  drop(): Promise<void>;
}

async function admin(sql: string): Promise<void> {
  const dataSource = new DataSource(dataSourceOptionsFromUrl(POSTGRES_ADMIN_URL));
  await dataSource.initialize();
  try {
    await dataSource.query(sql);
  } finally {
    await dataSource.destroy();
  }
}

export async function createBenchDatabase(driver: BenchDriver, label: string): Promise<BenchDatabase> {
  const name = `ck_bench_${label}_${randomBytes(4).toString('hex')}`;
  let url: string;
  let file: string | undefined;
  let remove: () => Promise<void>;
  if (driver === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'ck-bench-'));
    file = join(dir, `${name}.sqlite`);
    url = `sqlite:${file}`;
    remove = async () => rmSync(dir, { recursive: true, force: true });
  } else {
    await admin(`CREATE DATABASE "${name}"`);
    url = POSTGRES_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
    remove = () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  }
  const opened: DataSource[] = [];
  return {
    driver,
    url,
    file,
    name: driver === 'postgres' ? name : undefined,
    async open(extra = {}) {
      const dataSource = new DataSource({
        ...dataSourceOptionsFromUrl(url),
        entities: checkpointEntities,
        migrations: checkpointMigrations,
        ...extra,
      } as DataSourceOptions);
      await dataSource.initialize();
      await dataSource.runMigrations();
      opened.push(dataSource);
      return dataSource;
    },
    async drop() {
      for (const dataSource of opened) if (dataSource.isInitialized) await dataSource.destroy();
      await remove();
    },
  };
}

/** `?` placeholders rewritten to `$n` on PostgreSQL, for the bench's hand-written SQL. */
export function placeholders(driver: BenchDriver, text: string): string {
  if (driver !== 'postgres') return text;
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}
