import type { DataSource } from 'typeorm';
import { reset } from '../jobs/status';
import { deleteImportBatch } from './import-batches';
import { type Outcome, success } from './outcome';

/**
 * `reset <name>`: forgets the job or step of that name (its writes stay) and the import batch of
 * that id (its checkpoint row and its rows in the built-in table). Unknown names are not an
 * error: the result says nothing was reset, so the command can be repeated safely.
 */
export async function resetCommand(db: DataSource, name: string): Promise<Outcome> {
  const job = await reset(db, name);
  const deletedRows = await deleteImportBatch(db, name);
  const text: string[] = [];
  if (job) text.push(`Reset job "${name}" (its writes are kept).`);
  if (deletedRows !== null) text.push(`Reset import batch "${name}": deleted its checkpoint and ${deletedRows} imported rows.`);
  if (text.length === 0) text.push(`Nothing named "${name}" to reset.`);
  return success({ command: 'reset', name, job, import: deletedRows !== null, deletedRows: deletedRows ?? 0 }, text);
}
