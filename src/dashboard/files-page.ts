import { DatabaseClaimStore } from '../claims/database-claim-store';
import { keysetPage, type PageContext, read, toNullableNumber, toNumber } from './dashboard-sql';
import { Conditions, type ListFilters, listFilters } from './list-query';
import { type Html, html } from './html';
import {
  backPath,
  CURRENT_PAGE,
  ERROR_CHARS,
  formatCount,
  formatDuration,
  formatTime,
  href,
  layout,
  NO_VALUE,
  pager,
  type View,
} from './layout';
import { searchForm } from './jobs-page';
import { loadPausedTypes } from './control-page';
import { type Throughput, throughputChart } from './throughput-chart';
import { loadThroughput } from './throughput-sql';
import { urlSearch } from './url-search';

export const FILE_STATUSES = ['all', 'pending', 'processing', 'completed', 'failed', 'dead'] as const;
export type FileTab = (typeof FILE_STATUSES)[number];
/** file_checkpoints' URLs, where the URL search's index lives (PostgreSQL). */
const URLS_TABLE = 'file_checkpoint_urls';

/**
 * Where a count stops: a count that reaches it is shown as "10,000+" and listed in
 * {@link FileCounts.capped}. Counting a million completed files took 240 ms on PostgreSQL; a count
 * that stops reads at most this many index entries, so the pages stay flat as the table grows.
 */
export const COUNT_CAP = 10_000;

/** A count as the pages show it: "10,000+" when it stopped at {@link COUNT_CAP}. */
export function cappedCount(n: number, capped: boolean): string {
  return capped ? `${formatCount(n)}+` : formatCount(n);
}

/** The names of {@link FileCounts}' numbers. */
type FileCountName = Exclude<keyof FileCounts, 'capped'>;

/**
 * Counts by status; `failed` includes the dead letters, `dead` is that subset (as `summary()`).
 * Each count stops at 10,000: a count that reached it is at least that (and named in `capped`).
 */
export interface FileCounts {
  /** Every file. */
  all: number;
  /** Files waiting for a claim. */
  pending: number;
  /** Files claimed and not finished. */
  processing: number;
  /** Files completed. */
  completed: number;
  /** Files whose latest attempt failed, dead letters included. */
  failed: number;
  /** Dead letters: failed with no retries left. */
  dead: number;
  /** Files `processing` whose lease has expired (their worker is presumably gone). */
  expiredLeases: number;
  /**
   * The counts that stopped at 10,000: the true number is at least the one given (pages show
   * "10,000+"). `all` is the sum of the statuses, and capped when one of them is.
   */
  capped: Exclude<keyof FileCounts, 'capped'>[];
}

/** One file claim as the files page lists it. Times are epoch milliseconds. */
export interface FileView {
  /** The file's URL. */
  url: string;
  /** The file's type. */
  type: string;
  /** The stored status (see {@link FileStatus}). */
  status: string;
  /** Failed with no retries left: only `requeue` makes it claimable again. */
  dead: boolean;
  /** Re-claims so far. */
  retryCount: number;
  /** Retries allowed after the first attempt. */
  maxRetries: number;
  /** The last error, cut at 500 characters. */
  error: string | null;
  /** The worker id of the latest claim. */
  processedBy: string | null;
  /** When the current claim's lease runs out. */
  leaseExpiresAt: number | null;
  /** When the latest claim started. */
  startedAt: number | null;
  /** When the file was completed. */
  completedAt: number | null;
  /** Records the handler reported reading. */
  recordsTotal: number;
  /** Records the handler reported persisting. */
  recordsPersisted: number;
  /** How long the completed attempt took, in milliseconds. */
  processingTimeMs: number;
}

/** The files page's data (`api/files`). */
export interface FilesData {
  /** Which page this data is for. */
  page: 'files';
  /** The filters read from the URL: status tab, URL search, page size and position. */
  filters: Omit<ListFilters<FileTab>, 'state'> & {
    /** The selected status tab. */
    status: FileTab;
  };
  /** Every file by status. */
  counts: FileCounts;
  /** Completed files per minute over the last hour. */
  throughput: Throughput;
  /** The paused file types, sorted (`'*'`: every type); empty when none is paused. */
  pausedTypes: string[];
  /** The files of this page, in the order of their URL hash. */
  items: FileView[];
  /** The `after` value of the next page; null on the last page. */
  next: string | null;
}

/**
 * Counts by status, dead letters and expired leases in one statement, each from an index and each
 * stopping after {@link COUNT_CAP} + 1 entries: open files from the partial status index, completed
 * ones from the completed index (migration 1765238400000), dead letters from the last attempts'
 * index (1765497600000). The conditions repeat the indexes' predicates word for word (`<> 'completed'`),
 * which SQLite's planner needs to use a partial index.
 */
export async function loadFileCounts(ctx: PageContext): Promise<FileCounts> {
  const q = (name: string) => ctx.dialect.quote(name);
  const open = `${q('status')} <> 'completed' AND ${q('status')}`;
  const branches: [name: Exclude<FileCountName, 'all'> | 'cancelled', condition: string][] = [
    ['pending', `${open} = 'pending'`],
    ['processing', `${open} = 'processing'`],
    ['failed', `${open} = 'failed'`],
    // Cancelled files have no tab: they count in `all` only.
    ['cancelled', `${open} = 'cancelled'`],
    ['completed', `${q('status')} = 'completed'`],
    ['dead', deadLetterCondition(ctx)],
    ['expiredLeases', `${open} = 'processing' AND ${q('lease_expires_at')} <= ?`],
  ];
  const text = branches
    .map(
      ([name, condition], i) =>
        `SELECT '${name}' AS ${q('name')}, COUNT(*) AS ${q('n')} FROM ` +
        `(SELECT 1 AS ${q('x')} FROM ${q('file_checkpoints')} WHERE ${condition} LIMIT ${COUNT_CAP + 1}) ${q(`c${i}`)}`,
    )
    .join(' UNION ALL ');
  const rows = await read(ctx, (query) => query(text, [ctx.now]));
  const counts: FileCounts = { all: 0, pending: 0, processing: 0, completed: 0, failed: 0, dead: 0, expiredLeases: 0, capped: [] };
  let allCapped = false;
  for (const row of rows) {
    const name = String(row.name) as Exclude<FileCountName, 'all'> | 'cancelled';
    const n = Math.min(toNumber(row.n), COUNT_CAP);
    const capped = toNumber(row.n) > COUNT_CAP;
    // dead and expiredLeases are subsets of failed and processing.
    if (name !== 'dead' && name !== 'expiredLeases') {
      counts.all += n;
      allCapped ||= capped;
    }
    if (name === 'cancelled') continue;
    counts[name] = n;
    if (capped) counts.capped.push(name);
  }
  if (allCapped) counts.capped.unshift('all');
  return counts;
}

/** Dead letters, as the last attempts' index (migration 1765497600000) holds them: SQLite sees it applies. */
export function deadLetterCondition(ctx: PageContext): string {
  const q = (name: string) => ctx.dialect.quote(name);
  return `${q('status')} = 'failed' AND ${q('retry_count')} >= ${q('max_retries')}`;
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
  // Each tab's condition repeats an index's predicate (SQLite's planner uses a partial index only then):
  // dead letters walk the last attempts' index in key order, open statuses the open status index.
  if (filters.status === 'dead') conditions.add(deadLetterCondition(ctx));
  else if (filters.status === 'completed') conditions.add(`${q('status')} = 'completed'`);
  else if (filters.status !== 'all') conditions.add(`${q('status')} <> 'completed' AND ${q('status')} = ?`, filters.status);
  // Keyset by the primary key, the URL's hash: a URL may be too long for an index of its own
  // (migration 1764720000000), so the list is in hash order and `after` is the last row's hash.
  let key = q('url_hash');
  if (filters.q !== '' && (await searchesUrlsTable(ctx))) {
    // PostgreSQL (migration 1765238400000): the URLs' trigram index is on the table of URLs,
    // written once per file, so that claims and completions add no entries to it.
    const [search, parameters] = await urlSearch(ctx, URLS_TABLE, filters.q);
    conditions.add(`${q('url_hash')} IN (SELECT ${q('url_hash')} FROM ${q(URLS_TABLE)} WHERE ${search})`, ...parameters);
    conditions.searchAndAfter(ctx, 'file_url', 'url_hash', { q: '', after: filters.after });
  } else if (filters.q !== '') {
    // Elsewhere the search reads file_checkpoints itself. Walking the key to the first matches
    // visits the rows in random order (18.8 s at 1M rows on SQLite when few match); ordering by an
    // expression of the key reads them in storage order and keeps the first matches (150–200 ms).
    key = `SUBSTR(${q('url_hash')}, 1)`;
    conditions.searchAndAfter(ctx, 'file_url', 'url_hash', { q: filters.q, after: null });
    if (filters.after !== null) conditions.add(`${key} > ?`, filters.after);
  } else conditions.searchAndAfter(ctx, 'file_url', 'url_hash', filters);
  const columns = [
    'url_hash',
    'file_url',
    'file_type',
    'status',
    'retry_count',
    'max_retries',
    'processed_by',
    'lease_expires_at',
    'started_at',
    'completed_at',
    'records_total',
    'records_persisted',
    'processing_time_ms',
  ];
  const rows = await read(ctx, (query) =>
    query(
      `SELECT ${columns.map(q).join(', ')}, SUBSTR(${q('error_message')}, 1, ${ERROR_CHARS}) AS ${q('error_text')} ` +
        `FROM ${q('file_checkpoints')}${conditions.where()} ORDER BY ${key} LIMIT ?`,
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
  const [counts, throughput, pausedTypes] = [await loadFileCounts(ctx), await loadThroughput(ctx), await loadPausedTypes(ctx)];
  return { page: 'files', filters, counts, throughput, pausedTypes, items, next: page.next };
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
<p class="summary">${cappedCount(data.counts.expiredLeases, data.counts.capped.includes('expiredLeases'))} expired leases</p>
${pausedTypes(view, data)}
${throughputChart(data.throughput)}
${searchForm(view, { status: data.filters.status }, data.filters.q, 'URL contains…')}
${requeueAllLink(view, data)}
${
  anyRequeueable
    ? html`<form method="post" action="${view.base}files/requeue" class="requeue"><input type="hidden" name="back" value="${backPath(view)}">${table}<p><button type="submit" name="selected" value="1">Requeue selected</button></p></form>`
    : table
}
${pager(view, data.next)}`,
  );
}

const PAUSED = html`<span class="state state-warn">paused</span>`;

/** The paused types, each with its Resume (where writes are allowed), and a form to pause a type. */
function pausedTypes(view: View, data: FilesData): Html {
  const form = (action: 'pause' | 'resume', type: string | null, label: string) =>
    html`<form method="post" action="${view.base}files/${action}" class="inline"><input type="hidden" name="back" value="${backPath(view)}">${
      type === null
        ? html`<input type="text" name="type" placeholder="file type (empty: every type)" aria-label="File type to pause">`
        : html`<input type="hidden" name="type" value="${type}">`
    }<button type="submit">${label}</button></form>`;
  const paused = data.pausedTypes.map(
    (type) =>
      html` <span class="paused-type"><code>${type === '*' ? 'every type' : type}</code> ${PAUSED}${
        view.canWrite ? form('resume', type, 'Resume') : ''
      }</span>`,
  );
  return html`<p class="summary paused-types">${paused.length > 0 ? html`Paused:${paused}` : 'No file type is paused.'}${
    view.canWrite ? form('pause', null, 'Pause type') : ''
  }</p>`;
}

/** On the dead letters tab, where writes are allowed: the link to requeue every dead letter the search matches. */
function requeueAllLink(view: View, data: FilesData): Html | string {
  if (!view.canWrite || data.filters.status !== 'dead' || data.counts.dead === 0) return '';
  const n = data.filters.q === '' ? `${cappedCount(data.counts.dead, data.counts.capped.includes('dead'))} ` : '';
  return html`<p><a class="action" href="${href(view, 'files/requeue-all', { q: data.filters.q })}">Requeue all ${n}matching this filter&hellip;</a></p>`;
}

function fileTabs(view: View, data: FilesData): Html {
  const current = data.filters.status;
  const base = Object.fromEntries(view.query.entries());
  return html`<nav class="subtabs">${FILE_STATUSES.map((status) => {
    const link = new URLSearchParams({ ...base, status });
    link.delete('after');
    return html`<a href="${view.base}files?${link.toString()}"${status === current ? CURRENT_PAGE : ''}>${status === 'dead' ? 'dead letters' : status} <span class="count">${cappedCount(data.counts[status], data.counts.capped.includes(status))}</span></a>`;
  })}</nav>`;
}
