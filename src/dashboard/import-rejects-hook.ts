import type { PageContext } from './dashboard-sql';

const REJECTS = 'checkpoint_import_rejects';

/**
 * The invalid-row count of each import on the imports page (rows a records import with `invalid:
 * 'skip'` left out, in `checkpoint_import_rejects`), as a column of the page's one statement: a
 * count over the rejects' primary key (batch, row_index) per listed import.
 */
export function invalidRowsColumn(ctx: PageContext, alias: string): string {
  const q = (name: string) => ctx.dialect.quote(name);
  return `(SELECT COUNT(*) FROM ${q(REJECTS)} ${q('r')} WHERE ${q('r')}.${q('batch')} = ${q('checkpoint_imports')}.${q('id')}) AS ${q(alias)}`;
}
