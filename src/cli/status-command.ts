import type { DataSource } from 'typeorm';
import { list, type Status, status } from '../jobs/status';
import { type FilesSummary, filesSummary } from './files-summary';
import { type ImportBatchStatus, importBatchStatus, importPosition, listImportBatches } from './import-batches';
import { type Outcome, success } from './outcome';
import { formatTime } from './text-table';

function describeJob(job: Status): string[] {
  return [
    `${job.kind === 'step' ? 'step' : 'job'} "${job.name}": ${job.done ? 'done' : 'not done'}` +
      (job.kind === 'batch' ? `, ${job.batches} batches, ${job.items} items` : ''),
    `  ${job.kind === 'batch' ? 'cursor' : 'value'} ${JSON.stringify(job.kind === 'batch' ? job.cursor : job.value)}`,
    `  started ${formatTime(job.startedAt)}, updated ${formatTime(job.updatedAt)}, finished ${formatTime(job.finishedAt)}`,
  ];
}

function describeImport(batch: ImportBatchStatus): string[] {
  return [
    `import "${batch.batch}": ${importPosition(batch)}, ${batch.done ? 'done' : 'not done'}` +
      (batch.invalid > 0 ? `, ${batch.invalid} invalid rows (rejects)` : ''),
    `  digest ${batch.digest}`,
    `  updated ${formatTime(batch.updatedAt)}`,
  ];
}

/** `status <name>`: the job or step of that name and/or the import batch of that id. */
async function statusOf(db: DataSource, name: string): Promise<Outcome> {
  const job = await status(db, name);
  const batch = await importBatchStatus(db, name);
  const text = [...(job ? describeJob(job) : []), ...(batch ? describeImport(batch) : [])];
  if (text.length === 0) text.push(`Nothing named "${name}": no job, step or import batch.`);
  return success({ command: 'status', name, found: job !== null || batch !== null, job, import: batch }, text);
}

/** `status`: counts over every job, step, import batch and file claim. */
async function overallStatus(db: DataSource, database: string): Promise<Outcome> {
  const jobs = await list(db);
  const imports = await listImportBatches(db);
  const files: FilesSummary = await filesSummary(db);
  const batchJobs = jobs.filter((job) => job.kind === 'batch');
  const summary = {
    jobs: {
      total: batchJobs.length,
      done: batchJobs.filter((job) => job.done).length,
      batches: batchJobs.reduce((sum, job) => sum + job.batches, 0),
      items: batchJobs.reduce((sum, job) => sum + job.items, 0),
    },
    steps: { total: jobs.length - batchJobs.length, done: jobs.filter((job) => job.kind === 'step' && job.done).length },
    imports: {
      total: imports.length,
      done: imports.filter((batch) => batch.done).length,
      rows: imports.reduce((sum, batch) => sum + batch.nextIndex, 0),
      invalid: imports.reduce((sum, batch) => sum + batch.invalid, 0),
    },
    files,
  };
  const text = [
    `database ${database}`,
    `batch jobs: ${summary.jobs.total} (${summary.jobs.done} done), ${summary.jobs.batches} batches, ${summary.jobs.items} items`,
    `steps: ${summary.steps.total} (${summary.steps.done} done)`,
    `imports: ${summary.imports.total} (${summary.imports.done} done), ${summary.imports.rows} rows committed, ${summary.imports.invalid} invalid`,
    `files: ${files.pending} pending, ${files.processing} processing, ${files.completed} completed, ` +
      `${files.failed} failed (${files.deadLetters} dead letters)`,
  ];
  return success({ command: 'status', database, ...summary }, text);
}

export async function statusCommand(db: DataSource, name: string | undefined, database: string): Promise<Outcome> {
  return name === undefined ? overallStatus(db, database) : statusOf(db, name);
}
