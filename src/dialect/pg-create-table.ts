import { InvalidArgumentError, InvalidInputError } from '../core/errors';
import {
  type CreateTableOptions,
  createTableSql,
  type InferredColumn,
  type InferredKind,
  keyColumnsOf,
  precisionAndScale,
} from './create-table';
import type { TableRef } from './dialect';
import { doubleQuote } from './shared-sql';

const PG_TYPES: Record<Exclude<InferredKind, 'numeric'>, string> = {
  integer: 'integer',
  bigint: 'bigint',
  double: 'double precision',
  boolean: 'boolean',
  date: 'date',
  timestamp: 'timestamp(6)',
  timestamptz: 'timestamptz(6)',
  json: 'json',
  text: 'text',
};
// NAMEDATALEN - 1: a longer identifier is cut with a mere NOTICE, and the columns read back would no longer match the fields.
const PG_IDENTIFIER_BYTES = 63;

/**
 * PostgreSQL's CREATE TABLE for inferred columns (`Dialect.createTable`). Objects and arrays are `json` (the text as the file
 * gives it), but `jsonb` in the key: `json` has no equality, so no index; a text key is indexable as it is.
 */
export function pgCreateTable(table: TableRef, columns: InferredColumn[], primaryKey: string[], options?: CreateTableOptions): string {
  for (const name of [table.name, ...(table.schema === undefined ? [] : [table.schema])]) {
    if (Buffer.byteLength(name) > PG_IDENTIFIER_BYTES)
      throw new InvalidArgumentError(`createTable: "${name}" is longer than PostgreSQL's ${PG_IDENTIFIER_BYTES} bytes for a name.`);
  }
  for (const { name } of columns) {
    if (Buffer.byteLength(name) > PG_IDENTIFIER_BYTES) {
      throw new InvalidInputError(
        `The field "${name}" is longer than PostgreSQL's ${PG_IDENTIFIER_BYTES} bytes for a column name.`,
        undefined,
        {
          field: name,
        },
      );
    }
  }
  const key = keyColumnsOf(columns, primaryKey);
  const definitions = columns.map((column) => {
    if (column.kind === 'json' && key.includes(column)) return { column, type: 'jsonb' };
    if (column.kind !== 'numeric') return { column, type: PG_TYPES[column.kind] };
    const [precision, scale] = precisionAndScale(column, 1000, 1000);
    return { column, type: `numeric(${precision}, ${scale})` };
  });
  return createTableSql(table, definitions, key, doubleQuote, options);
}
