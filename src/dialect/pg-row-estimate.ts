import type { EntityManager } from 'typeorm';
import { run } from '../core/run-statement';
import type { RowCountQuery } from './row-estimate';

/** The planner's row estimate (the top plan node's `Plan Rows`) for the query, with its parameters' values; nothing runs. */
export async function pgEstimateRows(manager: EntityManager, query: RowCountQuery): Promise<number | null> {
  const rows = await run<{ 'QUERY PLAN': { Plan: { 'Plan Rows': number } }[] }[]>(
    manager,
    `EXPLAIN (FORMAT JSON) SELECT 1 FROM ${query.quotedTable} WHERE ${query.condition}`,
    query.parameters,
    query.what,
  );
  const planned = rows[0]?.['QUERY PLAN']?.[0]?.Plan?.['Plan Rows'];
  return typeof planned === 'number' && Number.isFinite(planned) ? Math.round(planned) : null;
}
