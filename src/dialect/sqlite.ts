import type { EntityManager } from 'typeorm';
import { integerRange, type RecordColumn, typeArguments } from './record-columns';
import type { Dialect, KeyType, TableRef } from './dialect';
import { sqliteCreateTable } from './sqlite-create-table';
import { isKnocked, knocking, yieldTo } from './sqlite-knock';
import { sqliteFileOf } from './sqlite-file';
import { readRowsDirectly } from './sqlite-read-rows';
import { sqliteEstimateRows } from './sqlite-row-estimate';
import {
  affectedRows,
  defaultCollationIsExact,
  doubleQuote,
  executeThroughRunner,
  onConflictDoNothing,
  onConflictRecords,
  onConflictUpdateWhere,
  ready,
  qualifiedTable,
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
  sharedFile: sqliteFileOf,
  // A waiting writer's busy handler retries after 1, 2, 5, 10… ms: a gap this long between prune's
  // deletes is one such a retry can land in, where a loop that begins again at once would starve it.
  writerHandoverMs: 2,
  // The loops of batches leave no gap unless an operator's write knocks.
  writerKnock: { knocking, isKnocked, yieldTo },
  quote: doubleQuote,
  execute: executeThroughRunner,
  readRows: readRowsDirectly,
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
    // processes can never both read the same cursor. Any write statement takes the lock, whether or
    // not it matches a row: this one matches none, so it changes no page (setting the key to itself
    // would rewrite its index entry: one more WAL page per batch, and more checkpoints).
    return { before: `UPDATE ${t} SET ${k} = ${k} WHERE ${k} = ? AND 0`, select: `SELECT * FROM ${t} WHERE ${k} = ?` };
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
  estimateRows: sqliteEstimateRows,
  async tableInfo(manager, table) {
    if (!(await schemaExists(manager, table))) return null;
    const columns: { cid: number; name: string; type: string; pk: number }[] = await manager.query(
      `SELECT cid, name, type, pk FROM pragma_table_info(${pragmaArguments(table)})`,
      pragmaValues(table, table.name),
    );
    if (columns.length === 0) return null;
    const uniqueKeys: string[][] = [];
    const pk = columns.filter((c) => c.pk > 0).sort((x, y) => x.pk - y.pk);
    if (pk.length > 0) uniqueKeys.push(pk.map((c) => c.name));
    const indexes: { name: string; unique: number; partial: number; origin: string }[] = await manager.query(
      `SELECT name, "unique", partial, origin FROM pragma_index_list(${pragmaArguments(table)})`,
      pragmaValues(table, table.name),
    );
    for (const index of indexes) {
      if (!index.unique || index.partial || index.origin === 'pk') continue;
      const parts: { seqno: number; cid: number; name: string | null }[] = await manager.query(
        `SELECT seqno, cid, name FROM pragma_index_info(${pragmaArguments(table)}) ORDER BY seqno`,
        pragmaValues(table, index.name),
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
      quotedTable: qualifiedTable(table, doubleQuote),
    };
  },
  storable: { floatSpecials: false, textHoldsNul: true },
  async isView(manager, table) {
    if (!(await schemaExists(manager, table))) return false;
    const master = `${table.schema ? `${doubleQuote(table.schema)}.` : ''}sqlite_master`;
    const found: unknown[] = await manager.query(`SELECT 1 FROM ${master} WHERE type = 'view' AND name = ?`, [table.name]);
    return found.length > 0;
  },
  async recordColumns(manager, table) {
    if (!(await schemaExists(manager, table))) return null;
    const columns: { name: string; type: string; notnull: number; dflt_value: string | null; pk: number }[] = await manager.query(
      `SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(${pragmaArguments(table)})`,
      pragmaValues(table, table.name),
    );
    if (columns.length === 0) return null;
    // An INTEGER PRIMARY KEY is the rowid: SQLite fills it.
    const keys = columns.filter((c) => c.pk > 0);
    return columns.map((c) => sqliteRecordColumn(c, keys.length === 1 && c.pk > 0 && c.type.toLowerCase() === 'integer'));
  },
  createTable: sqliteCreateTable,
  insertRecords: onConflictRecords,
  // SQLite stores dates and times as the text it was given: that text is the key, compared as text.
  keyRead: (column) => column,
  keyBound: (placeholder) => placeholder,
  keysetCondition: rowValueKeyset,
};

/** A table-valued pragma's arguments: the object's name, then the schema (an attached database) where the table has one. */
const pragmaArguments = (table: TableRef) => (table.schema ? '?, ?' : '?');
const pragmaValues = (table: TableRef, name: string) => (table.schema ? [name, table.schema] : [name]);

/** Whether the table's schema is attached (a pragma naming an unknown one fails); true without one. */
async function schemaExists(manager: EntityManager, table: TableRef): Promise<boolean> {
  if (!table.schema) return true;
  const found = (await manager.query('SELECT 1 AS found FROM pragma_database_list WHERE name = ?', [table.schema])) as unknown[];
  return found.length > 0;
}

/** Records mode's column kind for a declared SQLite type (its affinity alone says too little). */
function sqliteRecordColumn(
  column: { name: string; type: string; notnull: number; dflt_value: string | null; pk: number },
  rowid: boolean,
): RecordColumn {
  const declared = column.type.toLowerCase();
  const base: Pick<RecordColumn, 'name' | 'nullable' | 'hasDefault' | 'primary'> = {
    name: column.name,
    // A primary key column other than the rowid may hold NULL in SQLite, but no application means that.
    nullable: column.notnull === 0 && column.pk === 0,
    hasDefault: column.dflt_value !== null || rowid,
    primary: column.pk,
  };
  const [first, second] = typeArguments(declared);
  if (/^bool/.test(declared)) return { ...base, kind: 'boolean' };
  if (/int/.test(declared)) {
    const bytes = /^tinyint/.test(declared) ? 1 : /^(smallint|int2)/.test(declared) ? 2 : /^mediumint/.test(declared) ? 3 : 8;
    return { ...base, kind: 'integer', ...integerRange(bytes, /unsigned/.test(declared)) };
  }
  if (/^(decimal|numeric)/.test(declared))
    return { ...base, kind: 'numeric', precision: first ?? null, scale: first === undefined ? null : (second ?? 0) };
  if (/^(real|double|float)/.test(declared)) return { ...base, kind: 'float' };
  if (declared === 'date') return { ...base, kind: 'date' };
  if (/^(datetime|timestamp)/.test(declared)) return { ...base, kind: 'timestamp', fractionDigits: 6 };
  if (declared === 'uuid') return { ...base, kind: 'uuid' };
  if (/^json/.test(declared)) return { ...base, kind: 'json' };
  if (SQLITE_TEXT.test(declared) || declared === '') return { ...base, kind: 'text', length: first ?? null };
  return { ...base, kind: 'other' };
}

function sqliteKeyType(declared: string): KeyType | null {
  if (SQLITE_INTEGER.test(declared)) return 'integer';
  if (SQLITE_TEXT.test(declared)) return 'text';
  if (SQLITE_DATE.test(declared)) return 'timestamp';
  return null;
}
