import { createTestDatabase, POSTGRES_ADMIN_URL, type TestDatabase } from '../test/support/database';

export { POSTGRES_ADMIN_URL };

export type BenchDriver = 'sqlite' | 'postgres' | 'mysql';

/**
 * A database of the bench's own, made as the test suites make theirs: a SQLite file in a temp dir
 * (`file`, for raw better-sqlite3 baselines) or a new PostgreSQL database (`name`, for psql baselines).
 */
export interface BenchDatabase extends TestDatabase {
  driver: BenchDriver;
}

export async function createBenchDatabase(driver: BenchDriver, label: string): Promise<BenchDatabase> {
  const database = await createTestDatabase(`bench_${label}`, driver);
  return { ...database, driver };
}

/** `?` placeholders rewritten to `$n` on PostgreSQL, for the bench's hand-written SQL. */
export function placeholders(driver: BenchDriver, text: string): string {
  if (driver !== 'postgres') return text;
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}
