import type { EntityManager } from 'typeorm';
import { InvalidArgumentError } from './errors';
import { decodeJson, encodeJson, type Json } from './json';
import { assertKind, insertJob, type JobRow, lockJob, updateJob, validateName } from './job-store';
import { type Db, transact } from './transaction';

/**
 * Runs the named step once: the first successful run records f's JSON result in the same
 * transaction as f's writes; later calls return the recorded value without calling f.
 */
export async function step<T extends Json>(db: Db, name: string, f: (tx: EntityManager) => Promise<T> | T): Promise<T> {
  validateName(name);
  if (typeof f !== 'function') throw new InvalidArgumentError('step: f must be a function.');
  return transact(db, async (tx) => {
    // Inserting the row first makes a concurrent caller of the same step wait on its key until
    // this transaction ends, then see the recorded value: f runs once.
    await insertJob(tx, name, 'step', null);
    const row = (await lockJob(tx, name)) as JobRow;
    assertKind(row, 'step');
    if (row.done === true || Number(row.done) === 1) return decodeJson(row.value) as T;
    const value = encodeJson(await f(tx), `The result of step "${name}"`);
    const now = Date.now();
    await updateJob(tx, name, { value, done: true, batches: 0, items: 0, finished_at: now });
    return decodeJson(value) as T;
  });
}
