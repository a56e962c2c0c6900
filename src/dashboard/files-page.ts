import { DatabaseClaimStore } from '../claims/database-claim-store';
import { containsPattern, keysetPage, type PageContext, read, toNullableNumber, toNumber } from './dashboard-sql';
import { Conditions, type ListFilters, listFilters } from './list-query';
import { type Html, html } from './html';
import { backPath, CURRENT_PAGE, ERROR_CHARS, formatCount, formatDuration, formatTime, layout, NO_VALUE, pager, type View } from './layout';
import { searchForm } from './jobs-page';
import { type Throughput, throughputChart } from './throughput-chart';

export const FILE_STATUSES = ['all', 'pending', 'processing', 'completed', 'failed', 'dead'] as const;
export type FileTab = (typeof FILE_STATUSES)[number];
const MINUTE = 60_000;
const HOUR_BUCKETS = 60;
/** file_checkpoints' URLs, where the URL search's index lives (PostgreSQL). */
const URLS_TABLE = 'file_checkpoint_urls';

/** Counts by status; `failed` includes the dead letters, `dead` is that subset (as `summary()`). */
export interface FileCounts {
  all: number;
  pending: number;
  processing: number;
  completed: number;
  failed: number;
  dead: number;
  /** Files `processing` whose lease has expired (their worker is presumably gone). */
  expiredLeases: number;
}

export interface FileView {
  url: string;
  type: string;
  status: string;
  /** Failed with no retries left: only `requeue` makes it claimable again. */
  dead: boolean;
  retryCount: number;
  maxRetries: number;
  /** The last error, cut at 500 characters. */
  error: string | null;
  processedBy: string | null;
  leaseExpiresAt: number | null;
  startedAt: number | null;
  completedAt: number | null;
  recordsTotal: number;
  recordsPersisted: number;
  processingTimeMs: number;
}

export interface FilesData {
  page: 'files';
  filters: Omit<ListFilters<FileTab>, 'state'> & { status: FileTab };
  counts: FileCounts;
  throughput: Throughput;
  items: FileView[];
  next: string | null;
}

/**
 * Counts by status, dead letters and expired leases, each from an index: open files from the
 * partial status index, completed ones from the completed index (migration 1765238400000).
 */
export async function loadFileCounts(ctx: PageContext): Promise<FileCounts> {
  const q = (name: string) => ctx.dialect.quote(name);
  return read(ctx, async (query) => {
    const open = await query(
      `SELECT ${q('status')}, COUNT(*) AS ${q('n')} FROM ${q('file_checkpoints')} WHERE ${q('status')} <> 'completed' GROUP BY ${q('status')}`,
      [],
    );
    const completed = await query(`SELECT COUNT(*) AS ${q('n')} FROM ${q('file_checkpoints')} WHERE ${q('status')} = 'completed'`, []);
    const byStatus = [...open, { status: 'completed', n: completed[0]?.n }];
    const dead = await query(
      `SELECT COUNT(*) AS ${q('n')} FROM ${q('file_checkpoints')} WHERE ${q('status')} = ? AND ${q('retry_count')} >= ${q('max_retries')}`,
      ['failed'],
    );
    const expired = await query(
      `SELECT COUNT(*) AS ${q('n')} FROM ${q('file_checkpoints')} WHERE ${q('status')} = ? AND ${q('lease_expires_at')} <= ?`,
      ['processing', ctx.now],
    );
    const counts: FileCounts = { all: 0, pending: 0, processing: 0, completed: 0, failed: 0, dead: toNumber(dead[0]?.n), expiredLeases: toNumber(expired[0]?.n) };
    for (const row of byStatus) {
      const n = toNumber(row.n);
      counts.all += n;
      const status = String(row.status);
      if (status === 'pending' || status === 'processing' || status === 'completed' || status === 'failed') counts[status] += n;
    }
    return counts;
  });
}

export async function loadThroughput(ctx: PageContext): Promise<Throughput> {
  const q = (name: string) => ctx.dialect.quote(name);
  const from = ctx.now - HOUR_BUCKETS * MINUTE;
  // Bucket start offsets by subtraction and modulo: integer arithmetic that means the same on every database.
  const bucket = `${q('o')} - (${q('o')} % ${MINUTE})`;
  const rows = await read(ctx, (query) =>
    query(
      `SELECT ${bucket} AS ${q('bucket')}, COUNT(*) AS ${q('n')} FROM ` +
        `(SELECT ${q('completed_at')} - ? AS ${q('o')} FROM ${q('file_checkpoints')} WHERE ${q('status')} = 'completed' AND ${q('completed_at')} >= ?) ${q('recent')} GROUP BY ${bucket}`,
      [from, from],
    ),
  );
  const completed = new Array<number>(HOUR_BUCKETS).fill(0);
  for (const row of rows) {
    const index = Math.floor(toNumber(row.bucket) / MINUTE);
    if (index >= 0 && index < HOUR_BUCKETS) completed[index] += toNumber(row.n);
  }
  return { bucketMs: MINUTE, from, completed };
}

/** DataSources seen with file_checkpoint_urls (a catalogue query per search would cost more than the search). */
const withUrlsTable = new WeakSet<object>();

async function searchesUrlsTable(ctx: PageContext): Promise<boolean> {
  // Only PostgreSQL's migration makes it: elsewhere no catalogue query per search.
  if (ctx.dialect.name !== 'postgres') return false;
  if (withUrlsTable.has(ctx.dataSource)) return true;
  const found = await read(ctx, (_, manager) => manager().queryRunner!.hasTable(URLS_TABLE));
  if (found) withUrlsTable.add(ctx.dataSource);
  return found;
}

/** A lease that expired on the file's last attempt makes it a dead letter before the page shows it (as the store's readers do). */
export function expireLeases(ctx: PageContext): Promise<void> {
  return new DatabaseClaimStore(ctx.db).expireLeases(ctx.now);
}

export async function loadFiles(ctx: PageContext, query: URLSearchParams): Promise<FilesData> {
  await expireLeases(ctx);
  const { state: status, ...rest } = listFilters(query, 'status', FILE_STATUSES, 'all');
  const filters = { status, ...rest };
  const q = (name: string) => ctx.dialect.quote(name);
  const conditions = new Conditions();
  if (filters.status !== 'all') conditions.add(`${q('status')} = ?`, filters.status === 'dead' ? 'failed' : filters.status);
  if (filters.status === 'dead') conditions.add(`${q('retry_count')} >= ${q('max_retries')}`);
  // Keyset by the primary key, the URL's hash: a URL may be too long for an index of its own
  // (migration 1764720000000), so the list is in hash order and `after` is the last row's hash.
  if (filters.q !== '' && (await searchesUrlsTable(ctx))) {
    // PostgreSQL (migration 1765238400000): the URLs' trigram index is on the table of URLs,
    // written once per file, so that claims and completions add no entries to it.
    conditions.add(
      `${q('url_hash')} IN (SELECT ${q('url_hash')} FROM ${q(URLS_TABLE)} WHERE ${q('file_url')} LIKE ? ESCAPE '!')`,
      containsPattern(filters.q),
    );
    conditions.searchAndAfter(ctx, 'file_url', 'url_hash', { q: '', after: filters.after });
  } else conditions.searchAndAfter(ctx, 'file_url', 'url_hash', filters);
  const columns = ['url_hash', 'file_url', 'file_type', 'status', 'retry_count', 'max_retries', 'processed_by', 'lease_expires_at', 'started_at', 'completed_at', 'records_total', 'records_persisted', 'processing_time_ms'];
  const rows = await read(ctx, (query) =>
    query(
      `SELECT ${columns.map(q).join(', ')}, SUBSTR(${q('error_message')}, 1, ${ERROR_CHARS}) AS ${q('error_text')} ` +
        `FROM ${q('file_checkpoints')}${conditions.where()} ORDER BY ${q('url_hash')} LIMIT ?`,
      [...conditions.parameters, filters.limit + 1],
    ),
  );
  const page = keysetPage(rows, filters.limit, (row) => String(row.url_hash));
  const items = page.items.map((row): FileView => {
    const status = String(row.status);
    const retryCount = toNumber(row.retry_count);
    const maxRetries = toNumber(row.max_retries);
    return {
      url: String(row.file_url),
      type: String(row.file_type),
      status,
      dead: status === 'failed' && retryCount >= maxRetries,
      retryCount,
      maxRetries,
      error: row.error_text === null || row.error_text === undefined ? null : String(row.error_text),
      processedBy: row.processed_by === null || row.processed_by === undefined ? null : String(row.processed_by),
      leaseExpiresAt: toNullableNumber(row.lease_expires_at),
      startedAt: toNullableNumber(row.started_at),
      completedAt: toNullableNumber(row.completed_at),
      recordsTotal: toNumber(row.records_total),
      recordsPersisted: toNumber(row.records_persisted),
      processingTimeMs: toNumber(row.processing_time_ms),
    };
  });
  const [counts, throughput] = [await loadFileCounts(ctx), await loadThroughput(ctx)];
  return { page: 'files', filters, counts, throughput, items, next: page.next };
}

const DEAD_LETTER = html`<span class="state state-bad">dead letter</span>`;

function statusBadge(file: FileView): Html {
  if (file.dead) return DEAD_LETTER;
  const tone = file.status === 'completed' ? 'done' : file.status === 'failed' ? 'warn' : 'running';
  return html`<span class="state state-${tone}">${file.status}</span>`;
}

export function renderFiles(data: FilesData, view: View): Html {
  const requeueable = (file: FileView) => view.canWrite && file.status === 'failed';
  const anyRequeueable = data.items.some(requeueable);
  const rows = data.items.map(
    (file) => html`<tr>
<td>${requeueable(file) ? html`<input type="checkbox" name="url" value="${file.url}" aria-label="Select ${file.url}">` : ''}</td>
<td class="name">${file.url}</td>
<td>${file.type}</td>
<td>${statusBadge(file)}</td>
<td class="num">${file.retryCount} / ${file.maxRetries}</td>
<td class="num">${formatCount(file.recordsPersisted)} / ${formatCount(file.recordsTotal)}</td>
<td>${file.status === 'processing' ? html`lease until ${formatTime(file.leaseExpiresAt)}` : formatTime(file.completedAt)}</td>
<td class="num">${file.status === 'completed' ? formatDuration(file.processingTimeMs) : NO_VALUE}</td>
<td class="error">${file.error ?? ''}</td>
<td>${requeueable(file) ? html`<button type="submit" name="one" value="${file.url}">Requeue</button>` : ''}</td>
</tr>`,
  );
  const table = html`<table class="list">
<thead><tr><th></th><th>URL</th><th>Type</th><th>Status</th><th>Retries</th><th>Rows</th><th>When</th><th>Took</th><th>Error</th><th></th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="10" class="empty">No files.</td></tr>`}</tbody>
</table>`;
  return layout(
    view,
    'File claims',
    html`${fileTabs(view, data)}
<p class="summary">${formatCount(data.counts.expiredLeases)} expired leases</p>
${throughputChart(data.throughput)}
${searchForm(view, { status: data.filters.status }, data.filters.q, 'URL contains…')}
${
  anyRequeueable
    ? html`<form method="post" action="${view.base}files/requeue" class="requeue"><input type="hidden" name="back" value="${backPath(view)}">${table}<p><button type="submit" name="selected" value="1">Requeue selected</button></p></form>`
    : table
}
${pager(view, data.next)}`,
  );
}

function fileTabs(view: View, data: FilesData): Html {
  const counts: Record<FileTab, number> = { ...data.counts };
  const current = data.filters.status;
  const base = Object.fromEntries(view.query.entries());
  return html`<nav class="subtabs">${FILE_STATUSES.map((status) => {
    const link = new URLSearchParams({ ...base, status });
    link.delete('after');
    return html`<a href="${view.base}files?${link.toString()}"${status === current ? CURRENT_PAGE : ''}>${status === 'dead' ? 'dead letters' : status} <span class="count">${formatCount(counts[status])}</span></a>`;
  })}</nav>`;
}
