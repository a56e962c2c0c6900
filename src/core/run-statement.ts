import type { EntityManager } from 'typeorm';
import { ownStatementError } from './database-errors';

/** Runs one of the library's own statements; failures become typed errors. */
export async function run<T = unknown>(tx: EntityManager, sql: string, parameters: unknown[], what: string): Promise<T> {
  try {
    return (await tx.query(sql, parameters)) as T;
  } catch (error) {
    throw ownStatementError(error, what);
  }
}
