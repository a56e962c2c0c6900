import type { PageContext } from './dashboard-sql';
import type { ImportView } from './imports-page';

/** One row an import in records mode set aside (issue 12's `checkpoint_import_rejects`). */
export interface ImportReject {
  rowIndex: number;
  reason: string;
  raw: string;
}

/**
 * Where records-mode imports (issue 12) add their skipped/invalid counts and rejected rows to the
 * imports page. Until that feature is merged its table does not exist and the views stay as they
 * are (`skipped`/`invalid` null, no rejects).
 */
export async function addImportRejects(_ctx: PageContext, _imports: ImportView[]): Promise<void> {}
