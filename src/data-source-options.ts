import type { DataSourceOptions } from 'typeorm';
import { InvalidArgumentError } from './core/errors';

/** The embedded default: a SQLite file in the working directory. */
export const DEFAULT_DATABASE_URL = 'sqlite:checkpoint.sqlite';

function hasModule(name: string): boolean {
  try {
    require.resolve(name);
    return true;
  } catch {
    return false;
  }
}

/** TypeORM 1.x dropped the `sqlite3` driver; on 0.3 it is used when installed, else better-sqlite3. */
function sqliteDriver(): 'better-sqlite3' | 'sqlite' {
  if (process.env.CHECKPOINT_SQLITE_DRIVER === 'sqlite3') return 'sqlite';
  if (process.env.CHECKPOINT_SQLITE_DRIVER === 'better-sqlite3') return 'better-sqlite3';
  // TypeORM 1.x removed `Connection` together with the sqlite3 driver.
  const typeorm0 = 'Connection' in (require('typeorm') as object);
  return typeorm0 && hasModule('sqlite3') ? 'sqlite' : 'better-sqlite3';
}

/**
 * DataSource options (without entities/migrations) for `postgres://…`, `mysql://…`/`mariadb://…`
 * or `sqlite:path` (`sqlite::memory:` for memory).
 */
export function dataSourceOptionsFromUrl(url: string): DataSourceOptions {
  if (/^postgres(ql)?:\/\//.test(url)) return { type: 'postgres', url };
  const mysql = /^(mysql|mariadb):\/\//.exec(url);
  if (mysql) {
    // TypeORM reads MariaDB's catalogue right (e.g. its 'NULL' column defaults) only with type
    // `mariadb`; with `mysql` its schema:log reports phantom changes on a MariaDB server.
    const type = mysql[1] as 'mysql' | 'mariadb';
    return { type, url: url.replace(/^mariadb:/, 'mysql:'), supportBigNumbers: true, bigNumberStrings: false };
  }
  const sqlite = /^sqlite:(?:\/\/)?(.+)$/.exec(url);
  if (sqlite) {
    const database = sqlite[1];
    const type = sqliteDriver();
    // WAL lets readers run beside the writer; the busy timeout makes a second process wait for the write lock.
    const wal = database !== ':memory:';
    // Typed loosely: the `sqlite` (sqlite3) type exists on TypeORM 0.3 only.
    return (type === 'sqlite'
      ? { type, database, enableWAL: wal, busyTimeout: 30_000 }
      : { type, database, enableWAL: wal, timeout: 30_000 }) as unknown as DataSourceOptions;
  }
  throw new InvalidArgumentError(
    `Unsupported database URL "${url}": use postgres://…, mysql://… or sqlite:path (e.g. sqlite:checkpoint.sqlite).`,
  );
}
