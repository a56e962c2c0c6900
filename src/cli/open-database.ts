import { DataSource } from 'typeorm';
import { checkpointEntities } from '../../entities';
import { checkpointMigrations } from '../../migrations';
import { dataSourceOptionsFromUrl, DEFAULT_DATABASE_URL } from '../data-source-options';
import { ownStatementError } from '../core/database-errors';

/** `--db`, else `DATABASE_URL`, else the embedded SQLite file `./checkpoint.sqlite`. */
export function databaseUrl(option: string | undefined): string {
  if (option !== undefined && option !== '') return option;
  const fromEnv = process.env.DATABASE_URL;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_DATABASE_URL;
}

/** The URL with its password masked, for output. */
export function displayUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:/@]*:)[^@]*@/i, '$1***@');
}

/**
 * Connects with the checkpoint entities and migrations. With `migrate` the pending migrations run
 * first (they are idempotent), so every command works on a fresh database, the embedded default
 * included; `migrate` itself opens without it to report what it ran.
 */
export async function openDatabase(url: string, options: { migrate: boolean }): Promise<DataSource> {
  const dataSource = new DataSource({
    ...dataSourceOptionsFromUrl(url),
    entities: checkpointEntities,
    migrations: checkpointMigrations,
    logging: false,
  });
  try {
    await dataSource.initialize();
  } catch (error) {
    throw ownStatementError(error, `connecting to ${displayUrl(url)}`);
  }
  if (options.migrate) {
    try {
      await dataSource.runMigrations();
    } catch (error) {
      await dataSource.destroy();
      throw ownStatementError(error, 'running the checkpoint migrations');
    }
  }
  return dataSource;
}
