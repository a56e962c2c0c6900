import { containsPattern, keysetPage, type PageContext, pageSize, read, toNullableNumber, toNumber } from './dashboard-sql';
import { type ControlState, controlStateOf } from '../control/job-state';
import { controlBadge, controlButtons, isThrottled, throttledBadge } from './control-page';
import { type Html, html } from './html';
import {
  countCell,
  formatCount,
  formatDuration,
  href,
  layout,
  NO_VALUE,
  pager,
  progressBar,
  rateCell,
  timeCell,
  type View,
} from './layout';
import { searchForm } from './jobs-page';
import { invalidRowsColumn } from './import-rejects-hook';

/** One import batch as the imports page lists it. Times are epoch milliseconds. */
export interface ImportView {
  /** The import batch id. */
  batch: string;
  /** SHA-256 hex of the source bytes the batch is bound to. */
  digest: string;
  /** Source rows done so far (the checkpoint): written, skipped and invalid alike. */
  rows: number;
  /** Rows in the source once validated (streaming imports); null when unknown. */
  total: number | null;
  /** True once every source row is committed (known only where `total` is). */
  done: boolean;
  /** The time of the last committed chunk; null for imports started by `begin` without one. */
  lastCommitAt: number | null;
  // The counts below are null for a batch made before they were kept.
  /** Rows written (built-in rows, records written or handed to a handler). */
  written: number | null;
  /** Source rows `map` skipped. */
  skipped: number | null;
  /** Invalid rows recorded in `checkpoint_import_rejects` (listed at `imports/rejects?batch=…`). */
  invalid: number;
  /** Chunks committed; null for a batch made before it was kept. */
  chunks: number | null;
  /** When the import began; null for a batch made before it was kept. */
  startedAt: number | null;
  /** Source rows per second over the import's life so far; null before the first chunk. */
  rate: number | null;
  /** Milliseconds left at that rate, where a total is known and the import is neither done, paused nor cancelled. */
  etaMs: number | null;
  /** What an operator asked: `'active'`, `'paused'` or `'cancelled'` (see `pause`, `resume`, `cancel`). */
  state: ControlState;
  /** A loop of the import waits on its throttle now (a wait of more than a second). */
  throttled: boolean;
}

/** The imports page's data (`api/imports`). */
export interface ImportsData {
  /** Which page this data is for. */
  page: 'imports';
  /** The filters read from the URL. */
  filters: {
    /** The search text, matched as a substring of the batch id; empty for none. */
    q: string;
    /** Rows per page, 1 to 500 (default 50). */
    limit: number;
    /** The page starts after this batch id; null for the first page. */
    after: string | null;
  };
  /** The import batches of this page, in batch id order. */
  items: ImportView[];
  /** The `after` value of the next page; null on the last page. */
  next: string | null;
}

export async function loadImports(ctx: PageContext, query: URLSearchParams): Promise<ImportsData> {
  const filters = { q: query.get('q') ?? '', limit: pageSize(query.get('limit')), after: query.get('after') || null };
  const q = (name: string) => ctx.dialect.quote(name);
  const conditions: string[] = [];
  const parameters: unknown[] = [];
  if (filters.q !== '') {
    conditions.push(`${q('id')} LIKE ? ESCAPE '!'`);
    parameters.push(containsPattern(filters.q));
  }
  if (filters.after !== null) {
    conditions.push(`${q('id')} > ?`);
    parameters.push(filters.after);
  }
  const where = conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : '';
  const rows = await read(ctx, (query) =>
    query(
      `SELECT ${q('id')}, ${q('digest')}, ${q('next_index')}, ${q('total_rows')}, ${q('updated_at')}, ` +
        `${q('written_rows')}, ${q('skipped_rows')}, ${q('chunks')}, ${q('started_at')}, ${q('state')}, ${q('throttled_until')}, ${invalidRowsColumn(ctx, 'invalid')} ` +
        `FROM ${q('checkpoint_imports')}${where} ` +
        `ORDER BY ${q('id')} LIMIT ?`,
      [...parameters, filters.limit + 1],
    ),
  );
  const page = keysetPage(rows, filters.limit, (row) => String(row.id));
  const items = page.items.map((row): ImportView => {
    const rows = toNumber(row.next_index);
    const total = toNullableNumber(row.total_rows);
    const done = total !== null && rows >= total;
    const state = controlStateOf(row.state);
    const startedAt = toNullableNumber(row.started_at);
    const lastCommitAt = toNullableNumber(row.updated_at);
    const elapsed = startedAt === null || lastCommitAt === null ? 0 : lastCommitAt - startedAt;
    const rate = rows > 0 && elapsed > 0 ? (rows * 1000) / elapsed : null;
    return {
      batch: String(row.id),
      digest: String(row.digest),
      rows,
      total,
      done,
      lastCommitAt,
      written: toNullableNumber(row.written_rows),
      skipped: toNullableNumber(row.skipped_rows),
      invalid: toNumber(row.invalid),
      chunks: toNullableNumber(row.chunks),
      startedAt,
      rate,
      etaMs: done || state !== 'active' || total === null || rate === null ? null : ((total - rows) * 1000) / rate,
      state,
      throttled: !done && isThrottled(row.throttled_until, ctx.now),
    };
  });
  return { page: 'imports', filters, items, next: page.next };
}

const DONE = html`<span class="state state-done">done</span>`;
const IN_PROGRESS = html`<span class="state state-running">in progress</span>`;

export function renderImports(data: ImportsData, view: View): Html {
  const rows = data.items.map(
    (item) => html`<tr>
<td class="name">${item.batch}</td>
<td>${item.done ? DONE : (controlBadge(item.state) ?? IN_PROGRESS)}${item.done ? '' : throttledBadge(item.throttled)}</td>
<td class="num">${countCell(item.rows)}${item.total !== null ? html` / ${countCell(item.total)}` : ''}</td>
<td>${progressBar(item.rows, item.total)}</td>
<td class="num">${countCell(item.written)}</td>
<td class="num">${countCell(item.chunks)}</td>
<td class="num">${rateCell(item.rate)}</td>
<td>${item.etaMs === null ? NO_VALUE : formatDuration(item.etaMs)}</td>
<td class="num">${countCell(item.skipped)}</td>
<td class="num">${item.invalid > 0 ? html`<a href="${href(view, 'imports/rejects', { batch: item.batch })}">${formatCount(item.invalid)}</a>` : '0'}</td>
<td>${timeCell(item.lastCommitAt)}</td>
<td><code title="${item.digest}">${item.digest.slice(0, 12)}</code></td>
<td>${controlButtons(view, item.batch, item.state, item.done, 'imports')}</td>
</tr>`,
  );
  return layout(
    view,
    'Imports',
    html`${searchForm(view, {}, data.filters.q, 'Batch id contains…')}
<table class="list">
<thead><tr><th>Batch</th><th>State</th><th>Rows</th><th>Progress</th><th>Written</th><th>Chunks</th><th>Rate</th><th>ETA</th><th>Skipped</th><th>Invalid</th><th>Last commit</th><th>Digest</th><th></th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="13" class="empty">No imports.</td></tr>`}</tbody>
</table>
${pager(view, data.next)}`,
  );
}
