import { choice, containsPattern, keysetPage, type PageContext, pageSize, read, toBoolean, toNullableNumber, toNumber } from './dashboard-sql';
import { type Html, html } from './html';
import { formatCount, formatRate, formatTime, href, layout, pager, type View, withQuery } from './layout';
import { loadPartitionedJobs, type PartitionedJobView, renderPartitionedJobs } from './partitions-hook';

/** A batch job not done whose last commit is older than this is "stalled". */
export const STALLED_AFTER_MS = 10 * 60 * 1000;
const CURSOR_CHARS = 200;

export const JOB_STATES = ['all', 'running', 'stalled', 'done'] as const;
export type JobState = (typeof JOB_STATES)[number];

export interface JobView {
  name: string;
  done: boolean;
  stalled: boolean;
  batches: number;
  items: number;
  startedAt: number;
  /** The time of the last committed batch (or of the job's creation). */
  lastCommitAt: number;
  finishedAt: number | null;
  /** Items per second over the job's life so far; null before the first batch. */
  rate: number | null;
  /** The stored cursor as JSON text, cut at 200 characters. */
  cursor: string | null;
  cursorTruncated: boolean;
}

export interface JobsData {
  page: 'jobs';
  filters: { state: JobState; q: string; limit: number; after: string | null };
  items: JobView[];
  /** The `after` value of the next page; null on the last page. */
  next: string | null;
  /** Partitioned jobs (issue 14); empty until their table exists. */
  partitioned: PartitionedJobView[];
}

export function isStalled(done: boolean, lastCommitAt: number, now: number): boolean {
  return !done && now - lastCommitAt >= STALLED_AFTER_MS;
}

export async function loadJobs(ctx: PageContext, query: URLSearchParams): Promise<JobsData> {
  const filters = {
    state: choice('state', query.get('state'), JOB_STATES, 'all'),
    q: query.get('q') ?? '',
    limit: pageSize(query.get('limit')),
    after: query.get('after') || null,
  };
  const q = (name: string) => ctx.dialect.quote(name);
  const conditions = [`${q('kind')} = ?`];
  const parameters: unknown[] = ['batch'];
  if (filters.state !== 'all') {
    conditions.push(`${q('done')} = ?`);
    parameters.push(ctx.dialect.bindable(filters.state === 'done'));
  }
  if (filters.state === 'stalled') {
    conditions.push(`${q('updated_at')} <= ?`);
    parameters.push(ctx.now - STALLED_AFTER_MS);
  } else if (filters.state === 'running') {
    conditions.push(`${q('updated_at')} > ?`);
    parameters.push(ctx.now - STALLED_AFTER_MS);
  }
  if (filters.q !== '') {
    conditions.push(`${q('name')} LIKE ? ESCAPE '!'`);
    parameters.push(containsPattern(filters.q));
  }
  if (filters.after !== null) {
    conditions.push(`${q('name')} > ?`);
    parameters.push(filters.after);
  }
  const rows = await read(ctx, (query) =>
    query(
      `SELECT ${q('name')}, ${q('done')}, ${q('batches')}, ${q('items')}, ${q('started_at')}, ${q('updated_at')}, ${q('finished_at')}, ` +
        `SUBSTR(${q('cursor')}, 1, ${CURSOR_CHARS + 1}) AS ${q('cursor_text')} FROM ${q('checkpoint_jobs')} ` +
        `WHERE ${conditions.join(' AND ')} ORDER BY ${q('name')} LIMIT ?`,
      [...parameters, filters.limit + 1],
    ),
  );
  const page = keysetPage(rows, filters.limit, (row) => String(row.name));
  const items = page.items.map((row): JobView => {
    const done = toBoolean(row.done);
    const items = toNumber(row.items);
    const startedAt = toNumber(row.started_at);
    const lastCommitAt = toNumber(row.updated_at);
    const finishedAt = toNullableNumber(row.finished_at);
    const elapsed = (finishedAt ?? lastCommitAt) - startedAt;
    const cursor = row.cursor_text === null || row.cursor_text === undefined ? null : String(row.cursor_text);
    return {
      name: String(row.name),
      done,
      stalled: isStalled(done, lastCommitAt, ctx.now),
      batches: toNumber(row.batches),
      items,
      startedAt,
      lastCommitAt,
      finishedAt,
      rate: items > 0 && elapsed > 0 ? (items * 1000) / elapsed : null,
      cursor: cursor !== null && cursor.length > CURSOR_CHARS ? cursor.slice(0, CURSOR_CHARS) : cursor,
      cursorTruncated: cursor !== null && cursor.length > CURSOR_CHARS,
    };
  });
  return { page: 'jobs', filters, items, next: page.next, partitioned: await loadPartitionedJobs(ctx) };
}

export function jobState(job: { done: boolean; stalled: boolean }): Html {
  if (job.done) return html`<span class="state state-done">done</span>`;
  return job.stalled ? html`<span class="state state-bad">stalled</span>` : html`<span class="state state-running">running</span>`;
}

/** The "Reset…" link to the confirmation page (only where writes are allowed). */
export function resetLink(view: View, name: string): Html {
  return view.canWrite ? html`<a class="action" href="${href(view, 'jobs/reset', { name })}">Reset…</a>` : html``;
}

export function stateTabs(view: View, states: readonly string[], current: string, counts?: Record<string, number>): Html {
  return html`<nav class="subtabs">${states.map(
    (state) =>
      html`<a href="${withQuery(view, { state, after: null })}"${state === current ? html` aria-current="page"` : ''}>${state}${
        counts && counts[state] !== undefined ? html` <span class="count">${formatCount(counts[state])}</span>` : ''
      }</a>`,
  )}</nav>`;
}

export function searchForm(view: View, hidden: Record<string, string>, value: string, label: string): Html {
  return html`<form class="search" method="get" action="${view.base}${view.path}">${Object.entries(hidden).map(
    ([name, v]) => html`<input type="hidden" name="${name}" value="${v}">`,
  )}<input type="search" name="q" value="${value}" placeholder="${label}" aria-label="${label}"><button type="submit">Search</button></form>`;
}

export function renderJobs(data: JobsData, view: View): Html {
  const rows = data.items.map(
    (job) => html`<tr>
<td class="name">${job.name}</td>
<td>${jobState(job)}</td>
<td class="num">${formatCount(job.items)}</td>
<td class="num">${formatCount(job.batches)}</td>
<td class="num">${formatRate(job.rate)}</td>
<td>${formatTime(job.lastCommitAt)}</td>
<td>${formatTime(job.finishedAt)}</td>
<td><code class="json">${job.cursor ?? '—'}${job.cursorTruncated ? '…' : ''}</code></td>
<td>${resetLink(view, job.name)}</td>
</tr>`,
  );
  return layout(
    view,
    'Batch jobs',
    html`${stateTabs(view, JOB_STATES, data.filters.state)}
${searchForm(view, { state: data.filters.state }, data.filters.q, 'Job name contains…')}
${renderPartitionedJobs(data.partitioned, view)}
<table class="list">
<thead><tr><th>Name</th><th>State</th><th>Items</th><th>Batches</th><th>Rate</th><th>Last commit</th><th>Finished</th><th>Cursor</th><th></th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="9" class="empty">No batch jobs.</td></tr>`}</tbody>
</table>
${pager(view, data.next)}`,
  );
}
