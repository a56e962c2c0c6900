import { InvalidArgumentError } from '../core/errors';
import { keysetPage, type PageContext, pageSize, read, toNumber } from './dashboard-sql';
import { type Html, html } from './html';
import { formatCount, href, layout, pager, type View } from './layout';

const REJECTS = 'checkpoint_import_rejects';

/** One row a records import set aside (`checkpoint_import_rejects`). */
export interface ImportReject {
  rowIndex: number;
  reason: string;
  /** The row's source text, at most 4,096 UTF-8 bytes. */
  raw: string;
}

export interface ImportRejectsData {
  page: 'imports/rejects';
  filters: { batch: string; limit: number; after: number | null };
  items: ImportReject[];
  /** The `after` value (a row index) of the next page; null on the last page. */
  next: string | null;
}

/** Reads the keyset cursor of the rejects list: a row index. */
function rowIndexAfter(value: string | null): number | null {
  if (value === null || value === '') return null;
  if (!/^[0-9]{1,15}$/.test(value)) throw new InvalidArgumentError(`after must be a row index (a non-negative integer), got "${value}".`);
  return Number(value);
}

/** The rejects of one import batch in row order, keyset-paginated by row index. */
export async function loadImportRejects(ctx: PageContext, query: URLSearchParams): Promise<ImportRejectsData> {
  const batch = query.get('batch') ?? '';
  if (batch === '') throw new InvalidArgumentError('batch is required: the import batch whose rejects to list.');
  const filters = { batch, limit: pageSize(query.get('limit')), after: rowIndexAfter(query.get('after')) };
  const q = (name: string) => ctx.dialect.quote(name);
  const after = filters.after === null ? '' : ` AND ${q('row_index')} > ?`;
  const rows = await read(ctx, (query) =>
    query(
      `SELECT ${q('row_index')}, ${q('reason')}, ${q('raw')} FROM ${q(REJECTS)} WHERE ${q('batch')} = ?${after} ORDER BY ${q('row_index')} LIMIT ?`,
      [batch, ...(filters.after === null ? [] : [filters.after]), filters.limit + 1],
    ),
  );
  const page = keysetPage(rows, filters.limit, (row) => String(toNumber(row.row_index)));
  const items = page.items.map((row): ImportReject => ({
    rowIndex: toNumber(row.row_index),
    reason: String(row.reason),
    raw: String(row.raw),
  }));
  return { page: 'imports/rejects', filters, items, next: page.next };
}

export function renderImportRejects(data: ImportRejectsData, view: View): Html {
  const rows = data.items.map(
    (reject) => html`<tr>
<td class="num">${formatCount(reject.rowIndex)}</td>
<td>${reject.reason}</td>
<td><code class="raw">${reject.raw}</code></td>
</tr>`,
  );
  return layout(
    view,
    'Rejected rows',
    html`<p>Import <strong class="name">${data.filters.batch}</strong> &middot; <a href="${href(view, 'imports', { q: data.filters.batch })}">back to imports</a></p>
<table class="list">
<thead><tr><th>Row</th><th>Reason</th><th>Source text</th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="3" class="empty">No rejected rows.</td></tr>`}</tbody>
</table>
${pager(view, data.next)}`,
  );
}
