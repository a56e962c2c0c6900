import { ownStatementError } from '../core/database-errors';
import { autocommit, type Db, dataSourceOf } from '../core/transaction';
import { dialectOf } from '../dialect';

const LEASES = 'checkpoint_leases';

async function execute(db: Db, sql: string, parameters: unknown[], what: string): Promise<number> {
  const dialect = dialectOf(dataSourceOf(db));
  return autocommit(dataSourceOf(db), async (manager) => {
    try {
      return (await dialect.execute(manager.queryRunner!, sql, parameters)).affected;
    } catch (error) {
      throw ownStatementError(error, what);
    }
  });
}

/**
 * Takes or renews the lease `name` for `holder` until `ttlMs` from now: true when `holder` holds
 * it now. The row is created once (unheld, expired); taking it is then one conditional UPDATE, so
 * of several instances racing for an expired lease exactly one gets it.
 */
export async function takeLease(db: Db, name: string, holder: string, ttlMs: number): Promise<boolean> {
  const dialect = dialectOf(dataSourceOf(db));
  const q = (identifier: string) => dialect.quote(identifier);
  await execute(
    db,
    dialect.insertIgnore(LEASES, ['name', 'holder', 'expires_at'], ['name']),
    [name, '', 0],
    `creating the lease "${name}"`,
  );
  const now = Date.now();
  const take = dialect.sql(
    `UPDATE ${q(LEASES)} SET ${q('holder')} = ?, ${q('expires_at')} = ? ` +
      `WHERE ${q('name')} = ? AND (${q('holder')} = ? OR ${q('expires_at')} <= ?)`,
  );
  return (await execute(db, take, [holder, now + ttlMs, name, holder, now], `taking the lease "${name}"`)) > 0;
}

/** Gives the lease `name` up when `holder` holds it, so another instance may take it at once. */
export async function releaseLease(db: Db, name: string, holder: string): Promise<void> {
  const dialect = dialectOf(dataSourceOf(db));
  const q = (identifier: string) => dialect.quote(identifier);
  const release = dialect.sql(`UPDATE ${q(LEASES)} SET ${q('expires_at')} = 0 WHERE ${q('name')} = ? AND ${q('holder')} = ?`);
  await execute(db, release, [name, holder], `releasing the lease "${name}"`);
}
