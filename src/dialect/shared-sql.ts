import type { QueryResult, QueryRunner } from 'typeorm';
import type { Executed, RecordConflict, TableRef } from './dialect';

/** SQL text shared by more than one dialect: ANSI identifier quoting and the ON CONFLICT upsert of PostgreSQL and SQLite. */

/** A `?` placeholder, or a quoted identifier or string literal to leave as it is (a column may be named "ok?"). */
export const questionMarks = /"(?:[^"]|"")*"|'(?:[^']|'')*'|\?/g;

export function doubleQuote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

export function valueRows(columnCount: number, rows: number): string {
  const row = `(${new Array<string>(columnCount).fill('?').join(', ')})`;
  return new Array<string>(rows).fill(row).join(', ');
}

/** PostgreSQL and SQLite (3.24+) share the upsert syntax; `?` placeholders. */
export function onConflictDoNothing(table: string, columns: string[], conflictColumns: string[], rows: number): string {
  return `INSERT INTO ${doubleQuote(table)} (${columns.map(doubleQuote).join(', ')}) VALUES ${valueRows(columns.length, rows)} ON CONFLICT (${conflictColumns.map(doubleQuote).join(', ')}) DO NOTHING`;
}

export function onConflictUpdateWhere(
  table: string,
  columns: string[],
  conflictColumn: string,
  assignments: [string, string][],
  condition: string,
): string {
  const updates = assignments.map(([column, value]) => `${doubleQuote(column)} = ${value}`).join(', ');
  return `INSERT INTO ${doubleQuote(table)} (${columns.map(doubleQuote).join(', ')}) VALUES ${valueRows(columns.length, 1)} ON CONFLICT (${doubleQuote(conflictColumn)}) DO UPDATE SET ${updates} WHERE ${condition}`;
}

/** Rows changed by one statement: the structured result is where every driver reports them (TypeORM 0.3 and 1.x). */
export async function affectedRows(runner: QueryRunner, sql: string, parameters: unknown[]): Promise<number> {
  const result = (await runner.query(sql, parameters, true)) as QueryResult;
  return Number(result.affected ?? 0);
}

/** Through TypeORM's runner: its structured result is where every driver reports rows and changes. */
export async function executeThroughRunner<T>(runner: QueryRunner, sql: string, parameters: unknown[]): Promise<Executed<T>> {
  const result = (await runner.query(sql, parameters, true)) as QueryResult<T>;
  return { rows: Array.isArray(result.records) ? result.records : [], affected: Number(result.affected ?? 0) };
}

/** Nothing to prepare. */
export const ready = () => true;

/** PostgreSQL's deterministic and SQLite's BINARY default collations compare text exactly. */
export const defaultCollationIsExact = () => Promise.resolve(undefined);

/**
 * The tables a name may mean: the name as it is, then, written `schema.table`, that table of that
 * schema (PostgreSQL's schema, MySQL's database, an attached SQLite database), as TypeORM reads a
 * table path. The first that exists is the one.
 */
export function tablesNamed(name: string): TableRef[] {
  const dot = name.indexOf('.');
  const qualified = dot > 0 && dot === name.lastIndexOf('.') && dot < name.length - 1;
  return qualified ? [{ name }, { schema: name.slice(0, dot), name: name.slice(dot + 1) }] : [{ name }];
}

/** The table an entity's metadata names, with its schema where it has one. */
export function entityTable(metadata: { tableName: string; schema?: string }): TableRef {
  return metadata.schema ? { name: metadata.tableName, schema: metadata.schema } : { name: metadata.tableName };
}

/** The first of `candidates` (see `tablesNamed`) that `lookup` finds, with what it found; null when none exists. */
export async function firstExisting<T>(
  candidates: TableRef[],
  lookup: (table: TableRef) => Promise<T | null>,
): Promise<{ table: TableRef; found: T } | null> {
  for (const table of candidates) {
    const found = await lookup(table);
    if (found) return { table, found };
  }
  return null;
}

/** A table reference, schema-qualified when it has one. */
export function qualifiedTable(table: TableRef, quote: (identifier: string) => string): string {
  return table.schema ? `${quote(table.schema)}.${quote(table.name)}` : quote(table.name);
}

/** Records mode's multi-row INSERT on PostgreSQL and SQLite (`?` placeholders). */
export function onConflictRecords(table: TableRef, columns: string[], rows: number, conflict?: RecordConflict): string {
  const insert = `INSERT INTO ${qualifiedTable(table, doubleQuote)} (${columns.map(doubleQuote).join(', ')}) VALUES ${valueRows(columns.length, rows)}`;
  if (!conflict) return insert;
  const target = `ON CONFLICT (${conflict.keyColumns.map(doubleQuote).join(', ')})`;
  if (conflict.mode === 'skip' || conflict.update.length === 0) return `${insert} ${target} DO NOTHING`;
  return `${insert} ${target} DO UPDATE SET ${conflict.update.map((c) => `${doubleQuote(c)} = excluded.${doubleQuote(c)}`).join(', ')}`;
}

/** PostgreSQL's and SQLite's keyset condition: one row-value comparison, an index range scan on both. */
export function rowValueKeyset(quotedColumns: string[], op: '>' | '<=', bound: (column: number) => string): string {
  if (quotedColumns.length === 1) return `${quotedColumns[0]} ${op} ${bound(0)}`;
  return `(${quotedColumns.join(', ')}) ${op} (${quotedColumns.map((_, i) => bound(i)).join(', ')})`;
}

/** Catalogue rows (one per column of a unique key, in key order) grouped into the keys' column lists. */
export function groupKeys(parts: { index: string; attname: string }[]): string[][] {
  const keys = new Map<string, string[]>();
  for (const part of parts) {
    const columns = keys.get(part.index) ?? [];
    columns.push(part.attname);
    keys.set(part.index, columns);
  }
  return [...keys.values()];
}
