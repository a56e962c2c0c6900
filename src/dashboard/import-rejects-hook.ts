import { type PageContext, read, toNumber } from './dashboard-sql';
import type { ImportView } from './imports-page';

const REJECTS = 'checkpoint_import_rejects';

/**
 * Fills the invalid-row counts of the imports on a page (rows a records import with `invalid:
 * 'skip'` left out, in `checkpoint_import_rejects`): one grouped count for the whole page.
 */
export async function addImportRejects(ctx: PageContext, imports: ImportView[]): Promise<void> {
  if (imports.length === 0) return;
  const q = (name: string) => ctx.dialect.quote(name);
  const rows = await read(ctx, (query) =>
    query(
      `SELECT ${q('batch')}, COUNT(*) AS ${q('invalid')} FROM ${q(REJECTS)} WHERE ${q('batch')} IN (${imports.map(() => '?').join(', ')}) GROUP BY ${q('batch')}`,
      imports.map((item) => item.batch),
    ),
  );
  const counts = new Map(rows.map((row) => [String(row.batch), toNumber(row.invalid)]));
  for (const item of imports) item.invalid = counts.get(item.batch) ?? 0;
}
