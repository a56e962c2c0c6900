import { QueryFailedError, type QueryRunner } from 'typeorm';
import type { Executed } from './dialect';

/** The pg client under a runner; a released runner still holds its old one, which the pool may have handed to someone else. */
export async function pgClientOf<T>(runner: QueryRunner): Promise<T> {
  if (runner.isReleased) throw new Error('The query runner was already released.');
  return (await runner.connect()) as T;
}

/** The name each statement text is prepared under: one text, one name, for the life of the process. */
const preparedNames = new Map<string, string>();

function preparedName(sql: string): string {
  let name = preparedNames.get(sql);
  if (name === undefined) {
    name = `typeorm_checkpoint_${preparedNames.size + 1}`;
    preparedNames.set(sql, name);
  }
  return name;
}

interface PgClient {
  query<T>(query: { name: string; text: string; values: unknown[] }): Promise<{ rows: T[]; rowCount: number | null }>;
  connection?: { parsedStatements?: Record<string, string> };
}

/** PostgreSQL's invalid_sql_statement_name: the connection lost its prepared statements (DEALLOCATE, DISCARD ALL). */
const UNKNOWN_PREPARED_STATEMENT = '26000';

/**
 * A named statement on the runner's own connection (inside its transaction), logged and failing
 * as TypeORM's `query()` would (its query events are not broadcast to subscribers).
 */
export async function executePrepared<T>(runner: QueryRunner, sql: string, parameters: unknown[], again = true): Promise<Executed<T>> {
  const logger = runner.connection.logger;
  const client = await pgClientOf<PgClient>(runner);
  const name = preparedName(sql);
  logger.logQuery(sql, parameters, runner);
  try {
    const result = await client.query<T>({ name, text: sql, values: parameters });
    return { rows: result.rows, affected: result.rowCount ?? 0 };
  } catch (error) {
    if ((error as { code?: unknown }).code === UNKNOWN_PREPARED_STATEMENT && client.connection?.parsedStatements) {
      // pg believes the statement is prepared on this connection, but the server dropped it: forget
      // it, so it is prepared again — now if nothing else is in this transaction, else next time.
      delete client.connection.parsedStatements[name];
      if (again && !runner.isTransactionActive) return executePrepared(runner, sql, parameters, false);
    }
    logger.logQueryError(error instanceof Error ? error : String(error), sql, parameters, runner);
    // The same error TypeORM's own query() raises, so callers see one shape on every path.
    throw new QueryFailedError(sql, parameters, error instanceof Error ? error : new Error(String(error)));
  }
}

/** A pooled connection's 'error' event, already handled by the pool or TypeORM when they listen. */
export function ignoreClientError(): void {
  // Nothing to do: the client is unusable from now on, and its next query fails with a typed error.
}
