import type { EntityManager, EntityTarget } from 'typeorm';
import { InvalidArgumentError } from '../../core/errors';
import { dataSourceOf } from '../../core/transaction';
import { dialectOf, type RecordColumn, type TableRef, tablesNamed } from '../../dialect';

/** The table records go `into`: its columns as the catalogue has them, and how record fields find them. */
export interface TargetTable {
  table: TableRef;
  columns: RecordColumn[];
  /** Field name → column position: property names (an entity) first, then column names. */
  fieldColumns: Map<string, number>;
  /** The primary key's columns in key order (empty when the table has none). */
  primaryKey: string[];
}

const JSON_TYPES = new Set(['json', 'jsonb', 'simple-json']);

/**
 * The first of `candidates` that exists, with its columns as the catalogue has them; a table that
 * does not exist is INVALID_ARGUMENT naming `shown`.
 */
async function existingTable(manager: EntityManager, candidates: TableRef[], shown: string): Promise<{ table: TableRef; columns: RecordColumn[] }> {
  const dialect = dialectOf(dataSourceOf(manager));
  for (const table of candidates) {
    const columns = await dialect.recordColumns(manager, table);
    if (columns) return { table, columns };
  }
  throw new InvalidArgumentError(`importFile: the table "${shown}" does not exist.`);
}

/**
 * Resolves `into` (an entity class, schema or name, or a table name) against `manager`'s
 * DataSource. Types come from the database catalogue (what the table really holds); an entity adds
 * its property names, and the enum values, json and boolean types a catalogue cannot tell (SQLite,
 * MariaDB's JSON as longtext).
 */
export async function targetTable(manager: EntityManager, into: EntityTarget<unknown> | string): Promise<TargetTable> {
  const dataSource = dataSourceOf(manager);
  const metadata = dataSource.hasMetadata(into) ? dataSource.getMetadata(into) : null;
  if (!metadata && typeof into !== 'string') throw new InvalidArgumentError('importFile: into must be an entity of the DataSource or a table name.');
  const { table, columns } = metadata
    ? await existingTable(manager, [{ name: metadata.tableName, ...(metadata.schema ? { schema: metadata.schema } : {}) }], metadata.tablePath)
    : await existingTable(manager, tablesNamed(into as string), into as string);
  const fieldColumns = new Map<string, number>();
  const position = new Map(columns.map((column, i) => [column.name, i]));
  if (metadata) {
    for (const entityColumn of metadata.columns) {
      const at = position.get(entityColumn.databaseName);
      if (at === undefined) continue;
      fieldColumns.set(entityColumn.propertyPath, at);
      const column = columns[at];
      if (entityColumn.enum) columns[at] = { ...column, kind: 'enum', values: entityColumn.enum.map(String) };
      else if (typeof entityColumn.type === 'string' && JSON_TYPES.has(entityColumn.type)) columns[at] = { ...column, kind: 'json' };
      else if (entityColumn.type === 'boolean' || entityColumn.type === Boolean) columns[at] = { ...column, kind: 'boolean' };
    }
  }
  for (const [name, at] of position) if (!fieldColumns.has(name)) fieldColumns.set(name, at);
  const primaryKey = columns.filter((c) => c.primary > 0).sort((a, b) => a.primary - b.primary).map((c) => c.name);
  return { table, columns, fieldColumns, primaryKey };
}
