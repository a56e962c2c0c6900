import type { DataSource } from 'typeorm';
import { filesSummary } from './files-summary';
import { type Outcome, success } from './outcome';

/** `files`: the file-claims summary (CheckpointManager.summary()). */
export async function filesCommand(db: DataSource): Promise<Outcome> {
  const summary = await filesSummary(db);
  const text = [
    `pending ${summary.pending}, processing ${summary.processing}, completed ${summary.completed}, ` +
      `failed ${summary.failed} (dead letters ${summary.deadLetters}), cancelled ${summary.cancelled}`,
    `records: ${summary.recordsTotal} total, ${summary.recordsFiltered} filtered, ${summary.recordsPersisted} persisted; ` +
      `processing time ${summary.processingTimeMs} ms`,
    `paused types: ${summary.pausedTypes.length === 0 ? 'none' : summary.pausedTypes.map((type) => (type === '*' ? '* (every type)' : type)).join(', ')}`,
  ];
  return success({ command: 'files', ...summary }, text);
}
