// An operator's write (pause, resume, cancel of a job, an import batch or file claims): where the
// database has one writer at a time (SQLite), it knocks first, so that running loops of batches
// leave the write lock free for it between two batches instead of starving it.
import { type Db, dataSourceOf } from '../core/transaction';
import { dialectOf } from '../dialect';

/** Runs `write` as an operator's write on `db`'s database. */
export function operatorWrite<T>(db: Db, write: () => Promise<T>): Promise<T> {
  const ds = dataSourceOf(db);
  const knock = dialectOf(ds).writerKnock;
  return knock ? knock.knocking(ds, write) : write();
}
