import type { DataSource } from 'typeorm';
import { ownStatementError } from '../core/database-errors';
import { type Outcome, success } from './outcome';

/** `migrate`: runs the pending checkpoint migrations (none when they already ran). */
export async function migrateCommand(db: DataSource, database: string): Promise<Outcome> {
  let executed: string[];
  try {
    executed = (await db.runMigrations()).map((migration) => migration.name);
  } catch (error) {
    throw ownStatementError(error, 'running the checkpoint migrations');
  }
  const text =
    executed.length === 0
      ? [`${database}: the checkpoint tables are up to date.`]
      : [`${database}: ran ${executed.length} migration(s):`, ...executed.map((name) => `  ${name}`)];
  return success({ command: 'migrate', database, executed }, text);
}
