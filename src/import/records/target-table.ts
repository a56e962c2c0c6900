import type { EntityManager, EntityTarget } from 'typeorm';
import { InvalidArgumentError } from '../../core/errors';
import { dataSourceOf } from '../../core/transaction';
import { dialectOf, entityTable, firstExisting, type RecordColumn, type TableRef, tablesNamed } from '../../dialect';

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
 * Resolves `into` (an entity class, schema or name, or a table name) against `manager`'s
 * DataSource. Types come from the database catalogue (what the table really holds); an entity adds
 * its property names, and the enum values, json, boolean and uuid types a catalogue cannot tell
 * (SQLite, MariaDB's JSON as longtext, a uuid as varchar).
 */
export async function targetTable(manager: EntityManager, into: EntityTarget<unknown> | string): Promise<TargetTable> {
  const found = await findTargetTable(manager, into);
  if (found) return found;
  const metadata = dataSourceOf(manager).hasMetadata(into) ? dataSourceOf(manager).getMetadata(into) : null;
  throw new InvalidArgumentError(`importFile: the table "${metadata ? metadata.tablePath : String(into)}" does not exist.`);
}

/** The table `into` names when it is to be created: an entity's, or the name as written (`schema.table` when it has one dot). */
export function tableToCreate(manager: EntityManager, into: EntityTarget<unknown> | string): TableRef {
  const dataSource = dataSourceOf(manager);
  if (dataSource.hasMetadata(into)) return entityTable(dataSource.getMetadata(into));
  if (typeof into !== 'string') throw new InvalidArgumentError('importFile: into must be an entity of the DataSource or a table name.');
  const candidates = tablesNamed(into);
  return candidates[candidates.length - 1];
}

/** `targetTable`, or null when the table does not exist. */
export async function findTargetTable(manager: EntityManager, into: EntityTarget<unknown> | string): Promise<TargetTable | null> {
  const dataSource = dataSourceOf(manager);
  const metadata = dataSource.hasMetadata(into) ? dataSource.getMetadata(into) : null;
  if (!metadata && typeof into !== 'string')
    throw new InvalidArgumentError('importFile: into must be an entity of the DataSource or a table name.');
  const candidates = metadata ? [entityTable(metadata)] : tablesNamed(into as string);
  const existing = await firstExisting(candidates, (table) => dialectOf(dataSource).recordColumns(manager, table));
  if (!existing) return null;
  const { table, found: columns } = existing;
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
      // SQLite (and MySQL before MariaDB 10.7) store an entity's uuid as varchar: only the entity says it is one.
      else if (entityColumn.type === 'uuid') columns[at] = { ...column, kind: 'uuid' };
    }
  }
  for (const [name, at] of position) if (!fieldColumns.has(name)) fieldColumns.set(name, at);
  const primaryKey = columns
    .filter((c) => c.primary > 0)
    .sort((a, b) => a.primary - b.primary)
    .map((c) => c.name);
  return { table, columns, fieldColumns, primaryKey };
}
