import { deadCondition, expiredOnLastAttempt, LEASE_EXPIRED } from '../claims/lease-rules';
import type { Db } from '../core/transaction';
import { validateName } from '../jobs/job-store';
import { type RangeCounts, type RangeRow, type RangeState, rangeState } from '../jobs/partition-store';
import { retryDead } from '../jobs/partitions';
import { type PageContext, read, toNumber } from './dashboard-sql';
import { type Html, html } from './html';
import { backPath, ERROR_CHARS, formatCount, formatTime, progressBar, type View } from './layout';

/** Where partitioned jobs (`eachPartition`, their `checkpoint_partitions` ranges) join the jobs page and the overview. */

const SAMPLE = 5;

/**
 * One range of a partitioned job, in key order. Times are epoch milliseconds.
 * @inline
 */
export interface RangeView {
  /** The range's place in key order, from 0. */
  index: number;
  /** Where the range is. */
  state: RangeState;
  /** Rows (items) this range has committed. */
  items: number;
  /** Batches this range has committed. */
  batches: number;
  /** Re-claims so far. */
  retryCount: number;
  /** Retries allowed after the first attempt. */
  maxRetries: number;
  /** The last error, cut at 500 characters (`lease expired` when its last lease ran out). */
  error: string | null;
  /** Time of the range's latest change. */
  updatedAt: number;
}

/**
 * A partitioned job's ranges: their counts by state, each range, and the totals over them.
 * @inline
 */
export interface PartitionsView {
  /** The ranges by state. */
  counts: RangeCounts;
  /** Every range, in key order. */
  ranges: RangeView[];
  /** Items committed over all ranges. */
  items: number;
  /** Batches committed over all ranges. */
  batches: number;
  /** The latest commit of any range. */
  lastCommitAt: number;
}

export interface DeadRangeView {
  job: string;
  index: number;
  error: string | null;
}

type ColumnRef = (column: string) => string;

/** A range out of attempts: failed with no retries left, or its lease expired on the last attempt (as `rangeState`). */
function deadRange(column: ColumnRef): string {
  return `((${deadCondition(column)}) OR (${expiredOnLastAttempt(column, '?')}))`;
}

/** The condition (and its parameters) "the `checkpoint_jobs` row is a partitioned job with a dead range": the jobs page's `dead` tab. */
export function hasDeadRange(ctx: PageContext): [string, unknown[]] {
  const q = (name: string) => ctx.dialect.quote(name);
  const p = (column: string) => `${q('p')}.${q(column)}`;
  return [
    `EXISTS (SELECT 1 FROM ${q('checkpoint_partitions')} ${q('p')} WHERE ${p('job_name')} = ${q('checkpoint_jobs')}.${q('name')} AND ${deadRange(p)})`,
    [ctx.now],
  ];
}

/** The condition "the `checkpoint_jobs` row's ranges have a commit after `since`" (a partitioned job's commits are on its ranges). */
export function rangeCommittedSince(ctx: PageContext, since: number): [string, unknown[]] {
  const q = (name: string) => ctx.dialect.quote(name);
  return [
    `EXISTS (SELECT 1 FROM ${q('checkpoint_partitions')} ${q('p')} WHERE ${q('p')}.${q('job_name')} = ${q('checkpoint_jobs')}.${q('name')} AND ${q('p')}.${q('updated_at')} > ?)`,
    [since],
  ];
}

/** The time of the last commit of any range of the `checkpoint_jobs` row (NULL for a job without ranges), as a column. */
export function lastRangeCommit(ctx: PageContext): string {
  const q = (name: string) => ctx.dialect.quote(name);
  return `(SELECT MAX(${q('p')}.${q('updated_at')}) FROM ${q('checkpoint_partitions')} ${q('p')} WHERE ${q('p')}.${q('job_name')} = ${q('checkpoint_jobs')}.${q('name')})`;
}

/** The ranges of the named partitioned jobs (a page's worth; every name gets a view): one statement over the primary key. */
export async function loadPartitions(ctx: PageContext, names: string[]): Promise<Map<string, PartitionsView>> {
  const views = new Map<string, PartitionsView>();
  if (names.length === 0) return views;
  const q = (name: string) => ctx.dialect.quote(name);
  const columns = [
    'job_name',
    'partition_index',
    'status',
    'retry_count',
    'max_retries',
    'lease_expires_at',
    'batches',
    'items',
    'updated_at',
  ];
  const rows = await read(ctx, (query) =>
    query<RangeRow & { error_text: string | null }>(
      `SELECT ${columns.map(q).join(', ')}, SUBSTR(${q('error_message')}, 1, ${ERROR_CHARS}) AS ${q('error_text')} FROM ${q('checkpoint_partitions')} ` +
        `WHERE ${q('job_name')} IN (${names.map(() => '?').join(', ')}) ORDER BY ${q('job_name')}, ${q('partition_index')}`,
      names,
    ),
  );
  for (const name of names)
    views.set(name, { counts: { pending: 0, running: 0, done: 0, dead: 0 }, ranges: [], items: 0, batches: 0, lastCommitAt: 0 });
  for (const row of rows) {
    const view = views.get(row.job_name)!;
    const state = rangeState(row, ctx.now);
    const range: RangeView = {
      index: toNumber(row.partition_index),
      state,
      items: toNumber(row.items),
      batches: toNumber(row.batches),
      retryCount: toNumber(row.retry_count),
      maxRetries: toNumber(row.max_retries),
      error: row.error_text ?? (state === 'dead' ? LEASE_EXPIRED : null),
      updatedAt: toNumber(row.updated_at),
    };
    view.counts[state] += 1;
    view.ranges.push(range);
    view.items += range.items;
    view.batches += range.batches;
    view.lastCommitAt = Math.max(view.lastCommitAt, range.updatedAt);
  }
  return views;
}

/** Dead ranges for the overview's problems: how many, and the first few with their error. */
export async function loadDeadRanges(ctx: PageContext): Promise<{ count: number; sample: DeadRangeView[] }> {
  const q = (name: string) => ctx.dialect.quote(name);
  const where = `WHERE ${deadRange(q)}`;
  return read(ctx, async (query) => {
    const counted = await query(`SELECT COUNT(*) AS ${q('n')} FROM ${q('checkpoint_partitions')} ${where}`, [ctx.now]);
    const sample = await query(
      `SELECT ${q('job_name')}, ${q('partition_index')}, SUBSTR(${q('error_message')}, 1, 200) AS ${q('error_text')} FROM ${q('checkpoint_partitions')} ` +
        `${where} ORDER BY ${q('job_name')}, ${q('partition_index')} LIMIT ${SAMPLE}`,
      [ctx.now],
    );
    return {
      count: toNumber(counted[0]?.n),
      sample: sample.map((row) => ({
        job: String(row.job_name),
        index: toNumber(row.partition_index),
        error: row.error_text === null || row.error_text === undefined ? LEASE_EXPIRED : String(row.error_text),
      })),
    };
  });
}

/** The "retry dead ranges" action: the job's dead ranges claimable again, each with a fresh attempt budget. */
export async function retryDeadRanges(db: Db, name: string | undefined): Promise<{ revived: number }> {
  validateName(name);
  return { revived: await retryDead(db, name) };
}

/**
 * Progress by ranges, a bar of the ranges by state (each segment titled with its rows), the dead
 * ranges with their errors, and the retry form where there are dead ranges and writes are allowed.
 * Only the dead ranges get a line of their own: a page of jobs with many ranges each stays small.
 */
export function renderPartitions(name: string, partitions: PartitionsView, view: View): Html {
  const { counts, ranges } = partitions;
  const retry =
    view.canWrite && counts.dead > 0
      ? html`<form method="post" action="${view.base}jobs/retry-dead-ranges" class="inline"><input type="hidden" name="name" value="${name}"><input type="hidden" name="back" value="${backPath(view)}"><button type="submit">Retry dead ranges</button></form>`
      : '';
  return html`<div class="partitions">${progressBar(counts.done, ranges.length)}
<span class="range-counts">${formatCount(counts.done)} done &middot; ${formatCount(counts.running)} running &middot; ${formatCount(counts.pending)} pending${
    counts.dead > 0 ? html` &middot; <span class="error">${formatCount(counts.dead)} dead</span>` : ''
  }</span>${retry}
<div class="ranges" role="list" aria-label="Ranges of ${name}">${ranges.map(
    (range) =>
      html`<span role="listitem" class="range range-${range.state}" data-range="${range.index}" title="#${range.index} ${range.state}: ${formatCount(range.items)} rows, ${formatCount(range.batches)} batches"></span>`,
  )}</div>${
    counts.dead > 0
      ? html`<ul class="dead-ranges">${ranges
          .filter((range) => range.state === 'dead')
          .map(
            (range) =>
              html`<li data-range="${range.index}">#${range.index} dead after ${range.retryCount + 1} attempt${range.retryCount === 0 ? '' : 's'}, ${formatCount(range.items)} rows done, last at ${formatTime(range.updatedAt)}: <span class="error">${range.error ?? ''}</span></li>`,
          )}</ul>`
      : ''
  }</div>`;
}
