import type { Dialect, Executed } from './dialect';

/** Rows of one table that a bounded delete removes, walked in the order of `position`. */
export interface DeleteTarget {
  /** The table (unquoted). */
  table: string;
  /** The condition (quoted SQL, `?` placeholders bound by `parameters`) a row must meet to be deleted. */
  where: string;
  parameters: unknown[];
  /** A quoted SQL expression over the row, ascending in the order the rows are deleted (an indexed column where possible). */
  position: string;
}

/** One statement deleting at most `limit` rows of a target, and how to read what it did. */
export interface BoundedDelete {
  /**
   * The statement (the driver's placeholders) and its values. With `from`, only rows whose
   * position is at least `from` (the last statement's largest), so a walk never rescans the
   * index entries of rows it deleted before (PostgreSQL keeps them until vacuum).
   */
  statement(target: DeleteTarget, limit: number, from: number | undefined): { sql: string; parameters: unknown[] };
  /** The rows it deleted, and the largest position among them where the database reports it. */
  read(executed: Executed): { deleted: number; last: number | undefined };
}

const positionAlias = 'prune_position';

/**
 * PostgreSQL: the rows' ctids picked in position order (an index scan), deleted by TID, the
 * condition checked again on each row (a row changed since the pick is left alone).
 */
function postgres(dialect: Dialect): BoundedDelete {
  return {
    statement(target, limit, from) {
      const q = (identifier: string) => dialect.quote(identifier);
      const table = q(target.table);
      const lower = from === undefined ? '' : ` AND ${target.position} >= ?`;
      const sql =
        `WITH ${q('deleted')} AS (DELETE FROM ${table} WHERE ${target.where} AND ctid = ANY(ARRAY(` +
        `SELECT ctid FROM ${table} WHERE ${target.where}${lower} ORDER BY ${target.position} LIMIT ${limit}))` +
        ` RETURNING ${target.position} AS ${q(positionAlias)}) ` +
        `SELECT COUNT(*) AS ${q('deleted')}, MAX(${q(positionAlias)}) AS ${q('last')} FROM ${q('deleted')}`;
      const parameters = [...target.parameters, ...target.parameters, ...(from === undefined ? [] : [from])];
      return { sql: dialect.sql(sql), parameters };
    },
    read(executed) {
      const row = executed.rows[0] ?? {};
      const last = row.last === null || row.last === undefined ? undefined : Number(row.last);
      return { deleted: Number(row.deleted ?? 0), last };
    },
  };
}

/** MySQL/MariaDB: a single-table DELETE takes ORDER BY and LIMIT itself (and no LIMIT in an IN subquery). */
function mysql(dialect: Dialect): BoundedDelete {
  return {
    statement(target, limit) {
      const sql = `DELETE FROM ${dialect.quote(target.table)} WHERE ${target.where} ORDER BY ${target.position} LIMIT ${limit}`;
      return { sql: dialect.sql(sql), parameters: target.parameters };
    },
    read: (executed) => ({ deleted: executed.affected, last: undefined }),
  };
}

/** SQLite: rowids picked in position order; one writer at a time, so the pick cannot go stale. */
function sqlite(dialect: Dialect): BoundedDelete {
  return {
    statement(target, limit) {
      const table = dialect.quote(target.table);
      const sql =
        `DELETE FROM ${table} WHERE rowid IN (` +
        `SELECT rowid FROM ${table} WHERE ${target.where} ORDER BY ${target.position} LIMIT ${limit})`;
      return { sql: dialect.sql(sql), parameters: target.parameters };
    },
    read: (executed) => ({ deleted: executed.affected, last: undefined }),
  };
}

const BOUNDED_DELETES: Record<Dialect['name'], (dialect: Dialect) => BoundedDelete> = { postgres, mysql, sqlite };

/** The bounded delete of `dialect`'s database, chosen once per caller. */
export function boundedDeleteOf(dialect: Dialect): BoundedDelete {
  return BOUNDED_DELETES[dialect.name](dialect);
}
