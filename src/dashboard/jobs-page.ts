import type { ControlState } from '../control/job-state';
import { controlStateOf } from '../control/job-state';
import { controlBadge, controlButtons, isThrottled, throttledBadge } from './control-page';
import { type PageContext, toBoolean, toNullableNumber, toNumber } from './dashboard-sql';
import { type Html, html } from './html';
import {
  countCell,
  CURRENT_PAGE,
  ELLIPSIS,
  formatCount,
  formatDuration,
  keptForUrl,
  layout,
  NO_VALUE,
  pager,
  progressBar,
  queryValue,
  rateCell,
  timeCell,
  type View,
  withQuery,
} from './layout';
import { Conditions, type ListFilters, listFilters, selectJobPage } from './list-query';
import { hasDeadRange, loadPartitions, type PartitionsView, rangeCommittedSince, renderPartitions } from './partitions-hook';

/** A job not done whose last commit (of any range, for a partitioned job) is older than this is "stalled". */
export const STALLED_AFTER_MS = 10 * 60 * 1000;
const CURSOR_CHARS = 200;

/** `dead`: partitioned jobs with a range out of attempts. */
export const JOB_STATES = ['all', 'running', 'stalled', 'dead', 'done'] as const;
export type JobState = (typeof JOB_STATES)[number];

/** One batch or partitioned job as the jobs page lists it. Times are epoch milliseconds. */
export interface JobView {
  /** The job's name. */
  name: string;
  /** Which API runs it: `eachBatch` or `eachPartition`. */
  kind: 'batch' | 'partitioned';
  /** True once the job finished. */
  done: boolean;
  /** Not done, and no commit for 10 minutes. */
  stalled: boolean;
  /** What an operator asked: `'active'`, `'paused'` or `'cancelled'` (see `pause`, `resume`, `cancel`). */
  state: ControlState;
  /** A loop of the job waits on its throttle now (a wait of more than a second). */
  throttled: boolean;
  /** Over all ranges for a partitioned job. */
  batches: number;
  /** Items committed (over all ranges for a partitioned job). */
  items: number;
  /** When the job row was created. */
  startedAt: number;
  /** The time of the last committed batch (or of the job's creation). */
  lastCommitAt: number;
  /** When the job finished; null until done. */
  finishedAt: number | null;
  /** Items per second over the job's life so far; null before the first batch. */
  rate: number | null;
  /**
   * The time left: with a `total`, the items left at the job's rate so far; else (partitioned jobs)
   * at the pace ranges have finished so far. Null when done, before the first batch (or range), or
   * with no range pending or running.
   */
  etaMs: number | null;
  /** The items the whole job visits: its source's estimate while it runs (`totalEstimated`), its item count once done; null when unknown. */
  total: number | null;
  /** True while `total` is an estimate. */
  totalEstimated: boolean;
  /** The stored cursor as JSON text, cut at 200 characters (batch jobs). */
  cursor: string | null;
  /** True when `cursor` was cut. */
  cursorTruncated: boolean;
  /** Partitioned jobs: the ranges by state, each range's rows; null for batch jobs. */
  partitions: PartitionsView | null;
}

/** The jobs page's data (`api/jobs`). */
export interface JobsData {
  /** Which page this data is for. */
  page: 'jobs';
  /** The filters read from the URL: state tab, name search, page size and position. */
  filters: ListFilters<JobState>;
  /** Batch and partitioned jobs in name order. */
  items: JobView[];
  /** The `after` value of the next page; null on the last page. */
  next: string | null;
}

export function isStalled(done: boolean, lastCommitAt: number, now: number): boolean {
  return !done && now - lastCommitAt >= STALLED_AFTER_MS;
}

/**
 * Batch or partitioned jobs, not done, with a commit in the last 10 minutes (`stalled: false`) or
 * none (`true`), as `isStalled` says of a row: a partitioned job's commits are on its ranges.
 */
export function stalledCondition(ctx: PageContext, stalled: boolean): [string, unknown[]] {
  const q = (name: string) => ctx.dialect.quote(name);
  const since = ctx.now - STALLED_AFTER_MS;
  const [committed, parameters] = rangeCommittedSince(ctx, since);
  const open = `${q('kind')} IN (?, ?) AND ${q('done')} = ?`;
  const head = ['batch', 'partitioned', ctx.dialect.bindable(false)];
  return stalled
    ? [`${open} AND ${q('updated_at')} <= ? AND NOT (${q('kind')} = ? AND ${committed})`, [...head, since, 'partitioned', ...parameters]]
    : [`${open} AND (${q('updated_at')} > ? OR (${q('kind')} = ? AND ${committed}))`, [...head, since, 'partitioned', ...parameters]];
}

export async function loadJobs(ctx: PageContext, query: URLSearchParams): Promise<JobsData> {
  const filters = listFilters(query, 'state', JOB_STATES, 'all');
  const q = (name: string) => ctx.dialect.quote(name);
  const conditions = new Conditions();
  const kind = (...kinds: string[]) => conditions.add(`${q('kind')} IN (${kinds.map(() => '?').join(', ')})`, ...kinds);
  if (filters.state === 'all' || filters.state === 'done') kind('batch', 'partitioned');
  if (filters.state === 'done') conditions.add(`${q('done')} = ?`, ctx.dialect.bindable(true));
  if (filters.state === 'running' || filters.state === 'stalled') {
    const [condition, parameters] = stalledCondition(ctx, filters.state === 'stalled');
    conditions.add(condition, ...parameters);
  }
  if (filters.state === 'dead') {
    kind('partitioned');
    const [condition, parameters] = hasDeadRange(ctx);
    conditions.add(condition, ...parameters);
  }
  const page = await selectJobPage(
    ctx,
    `jobs\0${filters.state}`,
    () =>
      `${q('name')}, ${q('kind')}, ${q('done')}, ${q('batches')}, ${q('items')}, ${q('started_at')}, ${q('updated_at')}, ${q('finished_at')}, ` +
      `${q('total')}, ${q('total_estimated')}, ${q('state')}, ${q('throttled_until')}, SUBSTR(${q('cursor')}, 1, ${CURSOR_CHARS + 1}) AS ${q('cursor_text')}`,
    conditions,
    filters,
  );
  const partitions = await loadPartitions(
    ctx,
    page.rows.filter((row) => row.kind === 'partitioned').map((row) => String(row.name)),
  );
  const items = page.rows.map((row): JobView => {
    const name = String(row.name);
    const ranges = row.kind === 'partitioned' ? partitions.get(name)! : null;
    const done = toBoolean(row.done);
    const items = ranges ? ranges.items : toNumber(row.items);
    const startedAt = toNumber(row.started_at);
    const lastCommitAt = Math.max(toNumber(row.updated_at), ranges?.lastCommitAt ?? 0);
    const finishedAt = toNullableNumber(row.finished_at);
    const elapsed = (finishedAt ?? lastCommitAt) - startedAt;
    const cursor = row.cursor_text === null || row.cursor_text === undefined ? null : String(row.cursor_text);
    const open = ranges ? ranges.counts.pending + ranges.counts.running : 0;
    const rate = items > 0 && elapsed > 0 ? (items * 1000) / elapsed : null;
    const total = toNullableNumber(row.total);
    // None while nothing is left to run: dead ranges wait for a retry, a paused job for a resume, not for time.
    const state = controlStateOf(row.state);
    const runnable = !done && state === 'active' && (ranges === null || open > 0);
    const byRanges = ranges && ranges.counts.done > 0 && elapsed > 0 ? Math.round((elapsed / ranges.counts.done) * open) : null;
    return {
      name,
      kind: ranges ? 'partitioned' : 'batch',
      done,
      stalled: isStalled(done, lastCommitAt, ctx.now),
      state,
      throttled: !done && isThrottled(row.throttled_until, ctx.now),
      batches: ranges ? ranges.batches : toNumber(row.batches),
      items,
      startedAt,
      lastCommitAt,
      finishedAt,
      rate,
      etaMs: !runnable ? null : total !== null && rate !== null ? Math.round((Math.max(0, total - items) * 1000) / rate) : byRanges,
      total,
      totalEstimated: toBoolean(row.total_estimated),
      cursor: cursor !== null && cursor.length > CURSOR_CHARS ? cursor.slice(0, CURSOR_CHARS) : cursor,
      cursorTruncated: cursor !== null && cursor.length > CURSOR_CHARS,
      partitions: ranges,
    };
  });
  return { page: 'jobs', filters, items, next: page.next };
}

// Fixed markup a list repeats on every row: made once, not per row.
const DONE = html`<span class="state state-done">done</span>`;
const STALLED = html`<span class="state state-bad">stalled</span>`;
const RUNNING = html`<span class="state state-running">running</span>`;
const PARTITIONED = html` <span class="state">partitioned</span>`;
const NO_RESET = html``;

/** The job's badge: done; else paused or cancelled (an operator's state); else stalled or running; "throttled" after it while a loop waits. */
export function jobState(job: { done: boolean; stalled: boolean; state?: ControlState; throttled?: boolean }): Html {
  if (job.done) return DONE;
  const badge = controlBadge(job.state ?? 'active') ?? (job.stalled ? STALLED : RUNNING);
  return job.throttled === true ? html`${badge}${throttledBadge(true)}` : badge;
}

/** The "Reset…" link to the confirmation page (only where writes are allowed). */
export function resetLink(view: View, name: string): Html {
  // As `href(view, 'jobs/reset', { name })` would write it, without its general case on every row.
  return view.canWrite ? html`<a class="action" href="${view.base}jobs/reset?name=${queryValue(name)}">Reset&hellip;</a>` : NO_RESET;
}

/** The state tabs of a list; without `counts`, made once per URL (see `keptForUrl`): `current` must come from the URL. */
export function stateTabs(view: View, states: readonly string[], current: string, counts?: Record<string, number>): Html {
  const make = () =>
    html`<nav class="subtabs">${states.map(
      (state) =>
        html`<a href="${withQuery(view, { state, after: null })}"${state === current ? CURRENT_PAGE : ''}>${state}${
          counts && counts[state] !== undefined ? html` <span class="count">${formatCount(counts[state])}</span>` : ''
        }</a>`,
    )}</nav>`;
  return counts === undefined ? keptForUrl(view, 'tabs', make) : make();
}

/** A list's search form, made once per URL (see `keptForUrl`): `hidden` and `value` must come from the URL, `label` be fixed. */
export function searchForm(view: View, hidden: Record<string, string>, value: string, label: string): Html {
  return keptForUrl(
    view,
    'search',
    () =>
      html`<form class="search" method="get" action="${view.base}${view.path}">${Object.entries(hidden).map(
        ([name, v]) => html`<input type="hidden" name="${name}" value="${v}">`,
      )}<input type="search" name="q" value="${value}" placeholder="${label}" aria-label="${label}"><button type="submit">Search</button></form>`,
  );
}

/** After a job's item count where it has a total: ` / ~24,000` and a bar (`~` while the total is an estimate). */
function ofTotal(job: JobView): Html | string {
  if (job.total === null) return '';
  return html` / ${job.totalEstimated ? '~' : ''}${countCell(job.total)}<br>${progressBar(job.items, job.total)}`;
}

/** The Finished cell: the time, else the ETA where there is one. */
function finishedCell(job: JobView): Html | string {
  if (job.finishedAt !== null) return timeCell(job.finishedAt);
  return job.etaMs !== null ? `ETA ${formatDuration(job.etaMs)}` : NO_VALUE;
}

export function renderJobs(data: JobsData, view: View): Html {
  // A batch job's row is one template (its kind and cursor cell written in it): each template and
  // value is one piece of the page that sending it flattens, and a list repeats them per row. Its
  // reset link is written in it too (as `resetLink` writes it), the link's start made once per page.
  const resetHref = view.canWrite ? html`${view.base}jobs/reset?name=` : null;
  const rows = data.items.map((job) =>
    job.partitions
      ? html`<tr data-kind="partitioned">
<td class="name">${job.name}${PARTITIONED}</td>
<td>${jobState(job)}</td>
<td class="num">${countCell(job.items)}${ofTotal(job)}</td>
<td class="num">${countCell(job.batches)}</td>
<td class="num">${rateCell(job.rate)}</td>
<td>${timeCell(job.lastCommitAt)}</td>
<td>${finishedCell(job)}</td>
<td>${renderPartitions(job.name, job.partitions, view)}</td>
<td>${resetLink(view, job.name)}${controlButtons(view, job.name, job.state, job.done, 'jobs')}</td>
</tr>`
      : resetHref !== null
        ? html`<tr data-kind="batch">
<td class="name">${job.name}</td>
<td>${jobState(job)}</td>
<td class="num">${countCell(job.items)}${ofTotal(job)}</td>
<td class="num">${countCell(job.batches)}</td>
<td class="num">${rateCell(job.rate)}</td>
<td>${timeCell(job.lastCommitAt)}</td>
<td>${finishedCell(job)}</td>
<td><code class="json">${job.cursor ?? NO_VALUE}${job.cursorTruncated ? ELLIPSIS : ''}</code></td>
<td><a class="action" href="${resetHref}${queryValue(job.name)}">Reset&hellip;</a>${controlButtons(view, job.name, job.state, job.done, 'jobs')}</td>
</tr>`
        : html`<tr data-kind="batch">
<td class="name">${job.name}</td>
<td>${jobState(job)}</td>
<td class="num">${countCell(job.items)}${ofTotal(job)}</td>
<td class="num">${countCell(job.batches)}</td>
<td class="num">${rateCell(job.rate)}</td>
<td>${timeCell(job.lastCommitAt)}</td>
<td>${finishedCell(job)}</td>
<td><code class="json">${job.cursor ?? NO_VALUE}${job.cursorTruncated ? ELLIPSIS : ''}</code></td>
<td></td>
</tr>`,
  );
  return layout(
    view,
    'Jobs',
    html`${stateTabs(view, JOB_STATES, data.filters.state)}
${searchForm(view, { state: data.filters.state }, data.filters.q, 'Job name contains…')}
<table class="list">
<thead><tr><th>Name</th><th>State</th><th>Items</th><th>Batches</th><th>Rate</th><th>Last commit</th><th>Finished</th><th>Cursor / ranges</th><th></th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="9" class="empty">No jobs.</td></tr>`}</tbody>
</table>
${pager(view, data.next)}`,
  );
}
