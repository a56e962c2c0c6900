import type { DataSource } from 'typeorm';
import { list, type Status, status } from '../jobs/status';
import { listPartitions } from '../jobs/partitions';
import type { PartitionInfo } from '../jobs/partition-store';
import { type FilesSummary, filesSummary } from './files-summary';
import { type ImportBatchStatus, importBatchStatus, importCounts, importPosition, listImportBatches } from './import-batches';
import { describeProgress } from './job-progress';
import { type Outcome, success } from './outcome';
import { formatTime, textTable } from './text-table';

/** `done 30, running 1, pending 0, dead 1 of 32 ranges`. */
export function describeRanges(counts: NonNullable<Status['partitions']>): string {
  const total = counts.pending + counts.running + counts.done + counts.dead;
  return `${counts.done} done, ${counts.running} running, ${counts.pending} pending, ${counts.dead} dead of ${total} ranges`;
}

const throttled = (ms: number) => (ms > 0 ? `, throttled ${(ms / 1000).toFixed(1)} s` : '');

function describePartitioned(job: Status, ranges: PartitionInfo[]): string[] {
  return [
    `partitioned job "${job.name}": ${job.state}, ${job.batches} batches, ${job.items} items, ${describeRanges(job.partitions!)}`,
    ...progressLine(job),
    `  started ${formatTime(job.startedAt)}, updated ${formatTime(job.updatedAt)}, finished ${formatTime(job.finishedAt)}`,
    ...textTable(
      ['RANGE', 'STATUS', 'LOWER', 'UPPER', 'CURSOR', 'ATTEMPTS', 'BATCHES', 'ITEMS', 'WORKER', 'UPDATED'],
      ranges.map((range) => [
        String(range.index),
        range.status,
        JSON.stringify(range.lower),
        JSON.stringify(range.upper),
        JSON.stringify(range.cursor),
        String(range.attempts),
        String(range.batches),
        String(range.items),
        range.worker ?? '-',
        formatTime(range.updatedAt),
      ]),
    ).map((line) => `  ${line}`),
  ];
}

/** `  progress [####----] 41% of ~24,000 items, ETA 2m05s` where the job has a total. */
function progressLine(job: Status): string[] {
  const progress = describeProgress(job);
  return progress === null ? [] : [`  progress ${progress}`];
}

function describeJob(job: Status): string[] {
  return [
    `${job.kind === 'step' ? 'step' : 'job'} "${job.name}": ${job.state}` +
      (job.kind === 'batch' ? `, ${job.batches} batches, ${job.items} items${throttled(job.throttledMs)}` : ''),
    `  ${job.kind === 'batch' ? 'cursor' : 'value'} ${JSON.stringify(job.kind === 'batch' ? job.cursor : job.value)}`,
    ...progressLine(job),
    `  started ${formatTime(job.startedAt)}, updated ${formatTime(job.updatedAt)}, finished ${formatTime(job.finishedAt)}`,
  ];
}

function describeImport(batch: ImportBatchStatus): string[] {
  return [
    `import "${batch.batch}": ${importPosition(batch)}, ${batch.state}${throttled(batch.throttledMs)}`,
    `  ${importCounts(batch)} (rejects: ${batch.invalid}), ${batch.chunks ?? '—'} chunks`,
    `  digest ${batch.digest}`,
    `  started ${formatTime(batch.startedAt)}, updated ${formatTime(batch.updatedAt)}`,
  ];
}

/** `status <name>`: the job or step of that name and/or the import batch of that id. */
async function statusOf(db: DataSource, name: string): Promise<Outcome> {
  const job = await status(db, name);
  const ranges = job?.kind === 'partitioned' ? await listPartitions(db, name) : undefined;
  const batch = await importBatchStatus(db, name);
  const text = [...(job ? (ranges ? describePartitioned(job, ranges) : describeJob(job)) : []), ...(batch ? describeImport(batch) : [])];
  if (text.length === 0) text.push(`Nothing named "${name}": no job, step or import batch.`);
  return success(
    { command: 'status', name, found: job !== null || batch !== null, job, ...(ranges ? { ranges } : {}), import: batch },
    text,
  );
}

/** `status`: counts over every job, step, import batch and file claim. */
async function overallStatus(db: DataSource, database: string): Promise<Outcome> {
  const jobs = await list(db);
  const imports = await listImportBatches(db);
  const files: FilesSummary = await filesSummary(db);
  const batchJobs = jobs.filter((job) => job.kind === 'batch');
  const partitionedJobs = jobs.filter((job) => job.kind === 'partitioned');
  const ranges = { pending: 0, running: 0, done: 0, dead: 0 };
  for (const job of partitionedJobs)
    for (const state of Object.keys(ranges) as (keyof typeof ranges)[]) ranges[state] += job.partitions![state];
  const summary = {
    jobs: {
      total: batchJobs.length,
      done: batchJobs.filter((job) => job.done).length,
      batches: batchJobs.reduce((sum, job) => sum + job.batches, 0),
      items: batchJobs.reduce((sum, job) => sum + job.items, 0),
    },
    partitioned: {
      total: partitionedJobs.length,
      done: partitionedJobs.filter((job) => job.done).length,
      batches: partitionedJobs.reduce((sum, job) => sum + job.batches, 0),
      items: partitionedJobs.reduce((sum, job) => sum + job.items, 0),
      ranges,
    },
    steps: { total: jobs.filter((job) => job.kind === 'step').length, done: jobs.filter((job) => job.kind === 'step' && job.done).length },
    imports: {
      total: imports.length,
      done: imports.filter((batch) => batch.done).length,
      rows: imports.reduce((sum, batch) => sum + batch.nextIndex, 0),
      skipped: imports.reduce((sum, batch) => sum + (batch.skipped ?? 0), 0),
      invalid: imports.reduce((sum, batch) => sum + batch.invalid, 0),
    },
    files,
  };
  const text = [
    `database ${database}`,
    `batch jobs: ${summary.jobs.total} (${summary.jobs.done} done), ${summary.jobs.batches} batches, ${summary.jobs.items} items`,
    `partitioned jobs: ${summary.partitioned.total} (${summary.partitioned.done} done), ${summary.partitioned.batches} batches, ` +
      `${summary.partitioned.items} items, ${describeRanges(ranges)}`,
    `steps: ${summary.steps.total} (${summary.steps.done} done)`,
    `imports: ${summary.imports.total} (${summary.imports.done} done), ${summary.imports.rows} rows committed, ${summary.imports.skipped} skipped, ${summary.imports.invalid} invalid`,
    `files: ${files.pending} pending, ${files.processing} processing, ${files.completed} completed, ` +
      `${files.failed} failed (${files.deadLetters} dead letters)`,
  ];
  return success({ command: 'status', database, ...summary }, text);
}

export async function statusCommand(db: DataSource, name: string | undefined, database: string): Promise<Outcome> {
  return name === undefined ? overallStatus(db, database) : statusOf(db, name);
}
