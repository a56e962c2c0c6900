import { containsPattern, keysetPage, type PageContext, pageSize, read, toNullableNumber, toNumber } from './dashboard-sql';
import { type Html, html } from './html';
import { formatCount, formatTime, layout, pager, progressBar, type View } from './layout';
import { searchForm } from './jobs-page';
import { addImportRejects, type ImportReject } from './import-rejects-hook';

export interface ImportView {
  batch: string;
  digest: string;
  /** Rows committed so far (the checkpoint). */
  rows: number;
  /** Rows in the source once validated (streaming imports); null when unknown. */
  total: number | null;
  done: boolean;
  /** The time of the last committed chunk; null for imports started by `begin` without one. */
  lastCommitAt: number | null;
  /** Filled by the records-mode hook (issue 12); null until then. */
  skipped: number | null;
  invalid: number | null;
  rejects: ImportReject[];
}

export interface ImportsData {
  page: 'imports';
  filters: { q: string; limit: number; after: string | null };
  items: ImportView[];
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
      `SELECT ${q('id')}, ${q('digest')}, ${q('next_index')}, ${q('total_rows')}, ${q('updated_at')} FROM ${q('checkpoint_imports')}${where} ` +
        `ORDER BY ${q('id')} LIMIT ?`,
      [...parameters, filters.limit + 1],
    ),
  );
  const page = keysetPage(rows, filters.limit, (row) => String(row.id));
  const items = page.items.map((row): ImportView => {
    const rows = toNumber(row.next_index);
    const total = toNullableNumber(row.total_rows);
    return {
      batch: String(row.id),
      digest: String(row.digest),
      rows,
      total,
      done: total !== null && rows >= total,
      lastCommitAt: toNullableNumber(row.updated_at),
      skipped: null,
      invalid: null,
      rejects: [],
    };
  });
  await addImportRejects(ctx, items);
  return { page: 'imports', filters, items, next: page.next };
}

const DONE = html`<span class="state state-done">done</span>`;
const IN_PROGRESS = html`<span class="state state-running">in progress</span>`;

export function renderImports(data: ImportsData, view: View): Html {
  const rows = data.items.map(
    (item) => html`<tr>
<td class="name">${item.batch}</td>
<td>${item.done ? DONE : IN_PROGRESS}</td>
<td class="num">${formatCount(item.rows)}${item.total !== null ? html` / ${formatCount(item.total)}` : ''}</td>
<td>${progressBar(item.rows, item.total)}</td>
<td>${formatTime(item.lastCommitAt)}</td>
<td class="num">${item.skipped === null ? '—' : formatCount(item.skipped)}</td>
<td class="num">${item.invalid === null ? '—' : formatCount(item.invalid)}</td>
<td><code title="${item.digest}">${item.digest.slice(0, 12)}</code></td>
</tr>${
      item.rejects.length > 0
        ? html`<tr class="rejects"><td colspan="8"><details data-key="rejects:${item.batch}"><summary>${item.rejects.length} rejected rows</summary><ul>${item.rejects.map(
            (reject) => html`<li>row ${reject.rowIndex}: ${reject.reason} <code>${reject.raw}</code></li>`,
          )}</ul></details></td></tr>`
        : ''
    }`,
  );
  return layout(
    view,
    'Imports',
    html`${searchForm(view, {}, data.filters.q, 'Batch id contains…')}
<table class="list">
<thead><tr><th>Batch</th><th>State</th><th>Rows</th><th>Progress</th><th>Last commit</th><th>Skipped</th><th>Invalid</th><th>Digest</th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="8" class="empty">No imports.</td></tr>`}</tbody>
</table>
${pager(view, data.next)}`,
  );
}
