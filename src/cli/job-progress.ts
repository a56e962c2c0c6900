import type { Status } from '../jobs/job-store';
import { formatDuration } from './progress-reporter';

const BAR_WIDTH = 20;

/** Items per second over the job's life so far (first row to last commit); 0 before the first batch. */
function jobRate(job: Status): number {
  const elapsedMs = (job.finishedAt ?? job.updatedAt) - job.startedAt;
  return job.items > 0 && elapsedMs > 0 ? (job.items * 1000) / elapsedMs : 0;
}

/** How far the job is through its total, from 0 to 1 (a job visiting more rows than estimated stops at 1). */
function shareDone(job: Status & { total: number }): number {
  if (job.total > 0) return Math.min(1, job.items / job.total);
  return job.done ? 1 : 0;
}

/**
 * A batch or partitioned job's bar and ETA from its total and its rate so far, or null without a
 * total: `[########------------] 41% of ~24,000 items, ETA 2m05s` (`~` while the total is an
 * estimate; the bar stops at 100 % when a job visits more rows than estimated).
 */
export function describeProgress(job: Status): string | null {
  if (job.total === null || job.kind === 'step') return null;
  const share = shareDone({ ...job, total: job.total });
  const filled = Math.round(share * BAR_WIDTH);
  const bar = `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}]`;
  const total = `${job.totalEstimated ? '~' : ''}${job.total.toLocaleString('en-US')}`;
  return `${bar} ${Math.floor(share * 100)}% of ${total} items, ETA ${jobEta(job)}`;
}

/** Time left at the job's rate so far: `0s` once done, `?` before its first batch or when paused/cancelled. */
export function jobEta(job: Status): string {
  if (job.done) return formatDuration(0);
  const rate = jobRate(job);
  if (job.total === null || rate <= 0 || job.state === 'paused' || job.state === 'cancelled') return '?';
  return formatDuration(Math.max(0, job.total - job.items) / rate);
}

/** The list's PROGRESS cell: `41% ETA 2m05s`, or `-` without a total. */
export function progressCell(job: Status): string {
  if (job.total === null || job.kind === 'step') return '-';
  const share = shareDone({ ...job, total: job.total });
  return `${Math.floor(share * 100)}% ETA ${jobEta(job)}`;
}
