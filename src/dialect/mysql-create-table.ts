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

const MYSQL_TYPES: Record<Exclude<InferredKind, 'numeric' | 'text'>, string> = {
  integer: 'INT',
  bigint: 'BIGINT',
  double: 'DOUBLE',
  boolean: 'BOOLEAN',
  date: 'DATE',
  // DATETIME, not TIMESTAMP: no session time zone, years 1000 to 9999; a zoned value is stored as its UTC wall time.
  timestamp: 'DATETIME(6)',
  timestamptz: 'DATETIME(6)',
  // MariaDB makes it LONGTEXT with CHECK (json_valid(…)), which recordColumns reads back as json.
  json: 'JSON',
};
// Bytes a key part takes in InnoDB's index (DECIMAL apart); a utf8mb4 VARCHAR counts 4 bytes a character.
const KEY_PART_BYTES: Partial<Record<InferredKind, number>> = {
  integer: 4,
  bigint: 8,
  double: 8,
  boolean: 1,
  date: 3,
  timestamp: 8,
  timestamptz: 8,
};
// InnoDB's longest index key (DYNAMIC rows, the default since MySQL 5.7 and MariaDB 10.2): 768 utf8mb4 characters.
const KEY_BYTES = 3072;
const UTF8MB4_BYTES = 4;
// A text key short enough gets room for longer keys of a later file into the same table.
const ROOMY_KEY_LENGTH = 255;
const DEFAULT_KEY_COLLATION = 'utf8mb4_bin';
const COLLATION = /^utf8mb4_[a-z0-9_]+$/i;
// DECIMAL packs 9 digits in 4 bytes; the bytes of 0 to 8 leftover digits.
const LEFTOVER_DIGIT_BYTES = [0, 1, 1, 2, 2, 3, 3, 4, 4];

function decimalBytes(digits: number): number {
  return Math.floor(digits / 9) * 4 + LEFTOVER_DIGIT_BYTES[digits % 9];
}

/** TEXT types hold bytes (65,535, 16,777,215, 4 GiB): the smallest that holds the longest text at 4 bytes a character. */
function textType(maxLength: number): string {
  const bytes = maxLength * UTF8MB4_BYTES;
  return bytes <= 65535 ? 'TEXT' : bytes <= 16777215 ? 'MEDIUMTEXT' : 'LONGTEXT';
}

/**
 * The VARCHAR lengths of the key's text columns: room for 255 characters where the key's 3,072
 * bytes allow it, else each column's longest text; INVALID_INPUT when even those do not fit.
 */
function keyTextLengths(key: InferredColumn[]): Map<string, number> {
  let fixedBytes = 0;
  const texts: InferredColumn[] = [];
  for (const column of key) {
    if (column.kind === 'json') {
      throw new InvalidInputError(
        `The key field "${column.name}" holds JSON objects or arrays, which MySQL/MariaDB cannot index.`,
        undefined,
        { field: column.name },
      );
    }
    if (column.kind === 'text') texts.push(column);
    else if (column.kind === 'numeric') {
      const [precision, scale] = precisionAndScale(column, 65, 30);
      fixedBytes += decimalBytes(precision - scale) + decimalBytes(scale);
    } else fixedBytes += KEY_PART_BYTES[column.kind] ?? 0;
  }
  const exact = texts.map((column) => Math.max(1, column.maxLength));
  const roomy = exact.map((length) => Math.max(length, ROOMY_KEY_LENGTH));
  const fits = (lengths: number[]) => fixedBytes + lengths.reduce((sum, length) => sum + length * UTF8MB4_BYTES, 0) <= KEY_BYTES;
  const lengths = fits(roomy) ? roomy : exact;
  if (!fits(lengths)) {
    const fields = texts.map((column) => `"${column.name}" (${column.maxLength} characters)`).join(', ');
    throw new InvalidInputError(
      `The key's texts are too long for a MySQL/MariaDB key (${KEY_BYTES} bytes, 4 a character): ${fields}.`,
      undefined,
      texts.length === 1 ? { field: texts[0].name } : undefined,
    );
  }
  return new Map(texts.map((column, i) => [column.name, lengths[i]]));
}

// A name: at most 64 characters of the Basic Multilingual Plane but U+0000, not ending with a space.
const MYSQL_NAME_LENGTH = 64;
const NOT_IN_NAMES = /[\u0000\uD800-\uDFFF]/;

/** Why MySQL/MariaDB would refuse `name` as a table or column name, or null. */
function nameProblem(name: string): string | null {
  if (name.length > MYSQL_NAME_LENGTH) return `is longer than MySQL/MariaDB's ${MYSQL_NAME_LENGTH} characters for a name`;
  if (NOT_IN_NAMES.test(name)) return 'has a character MySQL/MariaDB names cannot hold (U+0000, or beyond U+FFFF such as an emoji)';
  if (name.endsWith(' ')) return 'ends with a space, which MySQL/MariaDB names cannot';
  return null;
}

/**
 * MySQL/MariaDB's CREATE TABLE for inferred columns (`Dialect.createTable`), in utf8mb4 whatever
 * the database's default: a key's text is VARCHAR (TEXT cannot be a key) in an exact collation.
 */
export function mysqlCreateTable(
  table: TableRef,
  columns: InferredColumn[],
  primaryKey: string[],
  quote: (identifier: string) => string,
  options: CreateTableOptions = {},
): string {
  const collation = options.textKeyCollation ?? DEFAULT_KEY_COLLATION;
  if (!COLLATION.test(collation)) throw new InvalidArgumentError(`createTable: "${collation}" is no utf8mb4 collation name.`);
  for (const name of [table.name, ...(table.schema === undefined ? [] : [table.schema])]) {
    const problem = nameProblem(name);
    if (problem) throw new InvalidArgumentError(`createTable: "${name}" ${problem}.`);
  }
  for (const { name } of columns) {
    const problem = nameProblem(name);
    if (problem) throw new InvalidInputError(`The field "${name}" ${problem}.`, undefined, { field: name });
  }
  const key = keyColumnsOf(columns, primaryKey);
  const keyLengths = keyTextLengths(key);
  const definitions = columns.map((column) => {
    switch (column.kind) {
      case 'numeric': {
        const [precision, scale] = precisionAndScale(column, 65, 30);
        return { column, type: `DECIMAL(${precision}, ${scale})` };
      }
      case 'text': {
        const length = keyLengths.get(column.name);
        const type = length === undefined ? textType(column.maxLength) : `VARCHAR(${length}) CHARACTER SET utf8mb4 COLLATE ${collation}`;
        return { column, type };
      }
      default:
        return { column, type: MYSQL_TYPES[column.kind] };
    }
  });
  return createTableSql(table, definitions, key, quote, options, ' DEFAULT CHARACTER SET utf8mb4');
}
