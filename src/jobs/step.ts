import type { EntityManager } from 'typeorm';
import { InvalidArgumentError } from '../core/errors';
import { decodeJson, encodeJson, type Json } from '../core/json';
import { assertKind, insertJob, type JobRow, lockJob, readStepRecord, updateJob, validateName } from './job-store';
import { autocommit, type Db, joinsTransaction, transact } from '../core/transaction';
import { type SpanScope, traced } from '../core/telemetry';

function isDone(row: Pick<JobRow, 'done'>): boolean {
  return row.done === true || Number(row.done) === 1;
}

/**
 * Runs the named step once: the first successful run records f's JSON result in the same
 * transaction as f's writes; later calls return the recorded value without calling f. A result
 * that is not JSON throws `NON_SERIALIZABLE` (nothing is recorded); f's own errors re-raise unchanged.
 */
export async function step<T extends Json>(db: Db, name: string, f: (tx: EntityManager) => Promise<T> | T): Promise<T> {
  validateName(name);
  if (typeof f !== 'function') throw new InvalidArgumentError('step: f must be a function.');
  return traced('step', { job: name }, (span) => runStep(db, name, f, span));
}

async function runStep<T extends Json>(db: Db, name: string, f: (tx: EntityManager) => Promise<T> | T, span: SpanScope): Promise<T> {
  if (!joinsTransaction(db)) {
    // A recorded step never changes (until reset), so a hit needs no transaction and no lock:
    // one plain read of committed state, where the locking path costs a transaction with a row lock.
    const recorded = await autocommit(db, (manager) => readStepRecord(manager, name));
    if (recorded && isDone(recorded)) {
      assertKind(recorded, 'step');
      span.set({ cached: true });
      return decodeJson(recorded.value) as T;
    }
  }
  return transact(db, async (tx) => {
    // Inserting the row first makes a concurrent caller of the same step wait on its key until
    // this transaction ends, then see the recorded value: f runs once.
    await insertJob(tx, name, 'step', null);
    const row = (await lockJob(tx, name)) as JobRow;
    assertKind(row, 'step');
    span.set({ cached: isDone(row) });
    if (isDone(row)) return decodeJson(row.value) as T;
    const value = encodeJson(await f(tx), `The result of step "${name}"`);
    const now = Date.now();
    await updateJob(tx, name, { value, done: true, batches: 0, items: 0, finished_at: now });
    return decodeJson(value) as T;
  });
}
