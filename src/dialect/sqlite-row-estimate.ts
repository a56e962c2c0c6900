import type { EntityManager } from 'typeorm';
import { run } from '../core/run-statement';
import type { RowCountQuery } from './row-estimate';

/** Tables of up to this many rows are counted exactly (one bounded read of at most this many rows). */
export const EXACT_COUNT_ROWS = 1_000_000;
/** Beyond: the condition is counted in this many rowid windows spread over the table… */
const SAMPLE_WINDOWS = 64;
/** …of this many rowids each (about 128,000 rowids read, each window one range of the rowid b-tree). */
const WINDOW_ROWIDS = 2_000;

/**
 * SQLite has no planner estimate to ask: a table of up to 1M rows gets an exact count of the rows
 * meeting the condition (a rowid span of up to 1M says so at once; otherwise one statement reads at
 * most 1M + 1 rows to tell). A bigger one gets an
 * estimate from a stratified sample: the condition counted in 64 rowid windows, one at a random
 * place in each 64th of the rowid span, scaled by the span (deleted rowids thin the windows as
 * much as the table). A table WITHOUT ROWID beyond 1M rows has no such windows: null.
 */
export async function sqliteEstimateRows(manager: EntityManager, query: RowCountQuery): Promise<number | null> {
  const { quotedTable, condition, parameters, what } = query;
  const [listed] = await run<{ type: string; wr: number }[]>(
    manager,
    `SELECT type, wr FROM pragma_table_list WHERE name = ? AND schema = ?`,
    [query.table.name, query.table.schema ?? 'main'],
    what,
  );
  // A table with rowids (not a view, not WITHOUT ROWID).
  const rowids = listed !== undefined && listed.type === 'table' && Number(listed.wr) !== 1;
  // Two b-tree descents: a rowid span of up to 1M holds at most 1M rows, counted at once (no bounded read).
  const span = rowids
    ? (
        await run<{ lo: number | null; hi: number | null }[]>(
          manager,
          `SELECT (SELECT MIN(rowid) FROM ${quotedTable}) AS lo, (SELECT MAX(rowid) FROM ${quotedTable}) AS hi`,
          [],
          what,
        )
      )[0]
    : undefined;
  if (span !== undefined && (span.lo === null || Number(span.hi) - Number(span.lo) < EXACT_COUNT_ROWS)) {
    const [counted] = await run<{ exact: number }[]>(
      manager,
      `SELECT COUNT(*) AS exact FROM ${quotedTable} WHERE ${condition}`,
      parameters,
      what,
    );
    return Number(counted.exact);
  }
  const [bounded] = await run<{ seen: number; matched: number | null }[]>(
    manager,
    `SELECT COUNT(*) AS seen, SUM(matched) AS matched FROM (SELECT (${condition}) AS matched FROM ${quotedTable} LIMIT ?)`,
    [...parameters, EXACT_COUNT_ROWS + 1],
    what,
  );
  if (Number(bounded.seen) <= EXACT_COUNT_ROWS) return Number(bounded.matched ?? 0);
  if (span === undefined) return null;
  const lo = Number(span.lo);
  const width = Number(span.hi) - lo + 1;
  const stratum = width / SAMPLE_WINDOWS;
  const size = Math.min(WINDOW_ROWIDS, Math.floor(stratum));
  const bounds: number[] = [];
  for (let i = 0; i < SAMPLE_WINDOWS; i++) {
    const start = lo + Math.floor(i * stratum + Math.random() * (stratum - size));
    bounds.push(start, start + size - 1);
  }
  // Each window a range of the rowid b-tree (SQLite's MULTI-INDEX OR), never a scan of the table.
  const windows = Array.from({ length: SAMPLE_WINDOWS }, () => 'rowid BETWEEN ? AND ?').join(' OR ');
  const [sampled] = await run<{ matched: number }[]>(
    manager,
    `SELECT COUNT(*) AS matched FROM ${quotedTable} WHERE (${windows}) AND (${condition})`,
    [...bounds, ...parameters],
    what,
  );
  return Math.round((Number(sampled.matched) * width) / (size * SAMPLE_WINDOWS));
}
