import type { DataSource } from 'typeorm';
import { transact } from '../core/transaction';
import { countRejects, readRejects } from '../import/records/write-records';
import { importBatchStatus } from './import-batches';
import { type Outcome, success } from './outcome';

const DEFAULT_LIMIT = 100;

/** `rejects <batch> [--limit N]`: the invalid rows a records import left out, in row order. */
export async function rejectsCommand(db: DataSource, batch: string, limit = DEFAULT_LIMIT): Promise<Outcome> {
  const found = (await importBatchStatus(db, batch)) !== null;
  const { total, rejects } = await transact(db, async (tx) => ({
    total: await countRejects(tx, batch),
    rejects: await readRejects(tx, batch, limit),
  }));
  const text = !found
    ? [`No import batch "${batch}".`]
    : [
        `import "${batch}": ${total} invalid rows${total > rejects.length ? ` (the first ${rejects.length} shown)` : ''}`,
        ...rejects.map((reject) => `  row ${reject.index}: ${reject.reason}\n    ${reject.raw}`),
      ];
  return success({ command: 'rejects', batch, found, total, rejects }, text);
}
