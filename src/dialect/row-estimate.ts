import type { TableRef } from './dialect';

/**
 * The query whose rows a job will visit, as `Dialect.estimateRows` reads it: `SELECT … FROM
 * quotedTable WHERE condition` (no ORDER BY, no LIMIT), `parameters` bound to `condition`'s
 * placeholders, numbered from 1.
 */
export interface RowCountQuery {
  /** The table as the catalogue found it. */
  table: TableRef;
  /** The table reference to put in SQL, already quoted. */
  quotedTable: string;
  /** The source's whole condition: its keys not NULL, and its `where`. */
  condition: string;
  /** Values for the condition's placeholders. */
  parameters: unknown[];
  /** What the statement is for, in an error's message. */
  what: string;
}
