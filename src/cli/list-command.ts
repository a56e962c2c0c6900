import type { DataSource } from 'typeorm';
import { list } from '../jobs/status';
import { importPosition, listImportBatches } from './import-batches';
import { progressCell } from './job-progress';
import { type Outcome, success } from './outcome';
import { describeRanges } from './status-command';
import { formatTime, textTable } from './text-table';

/** `list`: every job and step, then every import batch. */
export async function listCommand(db: DataSource): Promise<Outcome> {
  const jobs = await list(db);
  const imports = await listImportBatches(db);
  const text = [
    ...(jobs.length === 0
      ? ['No jobs or steps.']
      : textTable(
          ['NAME', 'KIND', 'DONE', 'STATE', 'BATCHES', 'ITEMS', 'PROGRESS', 'RANGES', 'UPDATED'],
          jobs.map((job) => [
            job.name,
            job.kind,
            job.done ? 'yes' : 'no',
            job.state,
            String(job.batches),
            String(job.items),
            progressCell(job),
            job.partitions ? describeRanges(job.partitions) : '-',
            formatTime(job.updatedAt),
          ]),
        )),
    '',
    ...(imports.length === 0
      ? ['No imports.']
      : textTable(
          ['BATCH', 'DONE', 'STATE', 'ROWS', 'WRITTEN', 'SKIPPED', 'INVALID', 'DIGEST', 'UPDATED'],
          imports.map((batch) => [
            batch.batch,
            batch.done ? 'yes' : 'no',
            batch.state,
            importPosition(batch),
            String(batch.rows ?? '—'),
            String(batch.skipped ?? '—'),
            String(batch.invalid),
            batch.digest.slice(0, 12),
            formatTime(batch.updatedAt),
          ]),
        )),
  ];
  return success({ command: 'list', jobs, imports }, text);
}
