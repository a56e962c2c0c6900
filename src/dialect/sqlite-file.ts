import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import type { DataSource } from 'typeorm';

const files = new WeakMap<DataSource, string | null>();

/**
 * The database file of a SQLite DataSource, as every DataSource and process on it names it (its
 * real path, or its resolved path before it exists); null for an in-memory database.
 */
export function sqliteFileOf(ds: DataSource): string | null {
  let file = files.get(ds);
  if (file !== undefined) return file;
  const database = String(ds.options.database ?? '');
  if (database === '' || database === ':memory:' || database.startsWith('file::memory:')) file = null;
  else {
    file = resolve(database);
    try {
      file = realpathSync(file);
    } catch {
      // Not created yet: its resolved path is the name every process uses.
    }
  }
  files.set(ds, file);
  return file;
}
