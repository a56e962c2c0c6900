import type { DataSource } from 'typeorm';
import { retryDead } from '../jobs/partitions';
import { type Outcome, success } from './outcome';

/** `retry-dead <name>`: makes a partitioned job's dead ranges claimable again, each with a fresh attempt budget. */
export async function retryDeadCommand(db: DataSource, name: string): Promise<Outcome> {
  const revived = await retryDead(db, name);
  const text = [revived === 0 ? `No dead ranges in "${name}".` : `Revived ${revived} dead range${revived === 1 ? '' : 's'} of "${name}".`];
  return success({ command: 'retry-dead', name, revived }, text);
}
