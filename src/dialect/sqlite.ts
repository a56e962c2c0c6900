import type { Dialect, KeyType } from './dialect';
import {
  affectedRows,
  defaultCollationIsExact,
  doubleQuote,
  executeThroughRunner,
  onConflictDoNothing,
  onConflictUpdateWhere,
  ready,
  rowValueKeyset,
} from './shared-sql';

const SQLITE_INTEGER = /INT/i;
const SQLITE_TEXT = /CHAR|CLOB|TEXT/i;
const SQLITE_DATE = /DATE|TIME/i;
/**
 * As TypeORM's SQLite drivers store a Date ('YYYY-MM-DD HH:MM:SS.SSS' in UTC) and a boolean (1/0):
 * better-sqlite3 refuses JS booleans, and TypeORM 0.3 passes them through unconverted.
 */
function sqliteBindable(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString().replace('T', ' ').replace('Z', '');
  return typeof value === 'boolean' ? Number(value) : value;
}

export const sqlite: Dialect = {
  name: 'sqlite',
  exactTextCollation: defaultCollationIsExact,
  prepare: ready,
  supportsSkipLocked: false,
  singleConnection: true,
  quote: doubleQuote,
  execute: executeThroughRunner,
  sql: (text) => text,
  placeholder: () => '?',
  bindable: sqliteBindable,
  lexicon: { backslashEscapes: 'never', dollarQuotes: false },
  insertIgnore(table, columns) {
    const cols = columns.map(doubleQuote).join(', ');
    return `INSERT OR IGNORE INTO ${doubleQuote(table)} (${cols}) VALUES (${columns.map(() => '?').join(', ')})`;
  },
  lockRow(table, keyColumn) {
    const t = doubleQuote(table);
    const k = doubleQuote(keyColumn);
    // A deferred BEGIN takes no lock; this no-op write takes the database write lock first, so two
    // processes can never both read the same cursor.
    return { before: `UPDATE ${t} SET ${k} = ${k} WHERE ${k} = ?`, select: `SELECT * FROM ${t} WHERE ${k} = ?` };
  },
  skipLockedSuffix: '',
  supportsReturning: false,
  insertIgnoreRows: onConflictDoNothing,
  insertMissingRows(runner, table, columns, conflictColumns, parameters, rows) {
    return affectedRows(runner, onConflictDoNothing(table, columns, conflictColumns, rows), parameters);
  },
  proposed: (column) => `excluded.${doubleQuote(column)}`,
  conditionalUpsert: onConflictUpdateWhere,
  async applyConditionalUpsert(runner, table, columns, conflictColumn, assignments, condition, parameters) {
    return (await affectedRows(runner, onConflictUpdateWhere(table, columns, conflictColumn, assignments, condition), parameters)) > 0;
  },
  async tableInfo(manager, table) {
    const columns: { cid: number; name: string; type: string; pk: number }[] = await manager.query(
      'SELECT cid, name, type, pk FROM pragma_table_info(?)',
      [table.name],
    );
    if (columns.length === 0) return null;
    const uniqueKeys: string[][] = [];
    const pk = columns.filter((c) => c.pk > 0).sort((x, y) => x.pk - y.pk);
    if (pk.length > 0) uniqueKeys.push(pk.map((c) => c.name));
    const indexes: { name: string; unique: number; partial: number; origin: string }[] = await manager.query(
      'SELECT name, "unique", partial, origin FROM pragma_index_list(?)',
      [table.name],
    );
    for (const index of indexes) {
      if (!index.unique || index.partial || index.origin === 'pk') continue;
      const parts: { seqno: number; cid: number; name: string | null }[] = await manager.query(
        'SELECT seqno, cid, name FROM pragma_index_info(?) ORDER BY seqno',
        [index.name],
      );
      // cid -2 is an expression, -1 the rowid: neither is a plain column.
      if (parts.length > 0 && parts.every((part) => part.cid >= 0 && part.name)) uniqueKeys.push(parts.map((part) => part.name as string));
    }
    return {
      columns: columns.map((c) => ({
        name: c.name,
        declaredType: c.type,
        keyType: sqliteKeyType(c.type),
      })),
      uniqueKeys,
      quotedTable: doubleQuote(table.name),
    };
  },
  // SQLite stores dates and times as the text it was given: that text is the key, compared as text.
  keyRead: (column) => column,
  keyBound: (placeholder) => placeholder,
  keysetCondition: rowValueKeyset,
};

function sqliteKeyType(declared: string): KeyType | null {
  if (SQLITE_INTEGER.test(declared)) return 'integer';
  if (SQLITE_TEXT.test(declared)) return 'text';
  if (SQLITE_DATE.test(declared)) return 'timestamp';
  return null;
}
