import type { EntityManager } from 'typeorm';
import type { ColumnInfo, Dialect, TableRef } from './dialect';
import { mysqlPipelinedCommit } from './mysql-commit';
import { mysqlCreateTable } from './mysql-create-table';
import { mysqlReplicaLagMs } from './mysql-replica-lag';
import { mysqlEstimateRows } from './mysql-row-estimate';
import { integerRange, type RecordColumn } from './record-columns';
import { affectedRows, executeThroughRunner, groupKeys, qualifiedTable, ready, valueRows } from './shared-sql';

const MYSQL_INTEGER_BYTES: Record<string, 1 | 2 | 3 | 4 | 8> = { tinyint: 1, smallint: 2, mediumint: 3, int: 4, integer: 4, bigint: 8 };

interface MysqlCatalogueColumn {
  name: string;
  dataType: string;
  columnType: string;
  length: number | string | null;
  /** Bytes at most (CHARACTER_OCTET_LENGTH), and the column's character set. */
  octets: number | string | null;
  charset: string | null;
  numPrecision: number | string | null;
  numScale: number | string | null;
  fractionDigits: number | string | null;
  isNullable: string;
  columnDefault: string | null;
  extra: string;
  columnKey: string;
}

/**
 * MariaDB's JSON is LONGTEXT with a CHECK (json_valid(`column`)) constraint. MySQL reports JSON as
 * its own type and has no TABLE_NAME in CHECK_CONSTRAINTS: there the lookup fails and finds none.
 */
async function mariadbJsonColumns(manager: EntityManager, table: TableRef): Promise<Set<string>> {
  let checks: { clause: string }[];
  try {
    checks = await manager.query(
      `SELECT CHECK_CLAUSE AS clause FROM information_schema.CHECK_CONSTRAINTS
        WHERE CONSTRAINT_SCHEMA = ${table.schema ? '?' : 'DATABASE()'} AND TABLE_NAME = ?`,
      table.schema ? [table.schema, table.name] : [table.name],
    );
  } catch {
    return new Set();
  }
  return new Set(
    checks.flatMap((check) => [...check.clause.matchAll(/json_valid\(`((?:[^`]|``)+)`\)/gi)].map((m) => m[1].replace(/``/g, '`'))),
  );
}

const numberOrNull = (value: number | string | null) => (value === null ? null : Number(value));

function mysqlRecordColumn(c: MysqlCatalogueColumn, primary: number): RecordColumn {
  const nullable = c.isNullable === 'YES';
  const base = {
    name: c.name,
    nullable,
    hasDefault: (c.columnDefault !== null && !(nullable && c.columnDefault === 'NULL')) || /auto_increment|generated/i.test(c.extra),
    primary,
  };
  const type = c.dataType.toLowerCase();
  const columnType = c.columnType.toLowerCase();
  // TypeORM's boolean is tinyint(1) (MariaDB shows the width; MySQL 8 may not).
  if (columnType === 'tinyint(1)' || type === 'boolean' || type === 'bool') return { ...base, kind: 'boolean' };
  const bytes = MYSQL_INTEGER_BYTES[type];
  if (bytes) return { ...base, kind: 'integer', ...integerRange(bytes, columnType.includes('unsigned')) };
  switch (type) {
    case 'decimal':
    case 'numeric':
      return { ...base, kind: 'numeric', precision: numberOrNull(c.numPrecision), scale: numberOrNull(c.numScale) };
    case 'float':
    case 'double':
    case 'real':
      return { ...base, kind: 'float', single: type === 'float' };
    case 'date':
      return { ...base, kind: 'date' };
    case 'datetime':
    case 'timestamp':
      return { ...base, kind: 'timestamp', fractionDigits: numberOrNull(c.fractionDigits) ?? 0 };
    case 'uuid':
      return { ...base, kind: 'uuid' };
    case 'json':
      return { ...base, kind: 'json' };
    case 'enum': {
      // The labels as declared (the lowercased type is for matching type names only).
      const values = [...c.columnType.slice(5, -1).matchAll(/'((?:[^']|'')*)'/g)].map((m) => m[1].replace(/''/g, "'"));
      return { ...base, kind: 'enum', values };
    }
    case 'char':
    case 'varchar':
      return { ...base, kind: 'text', length: numberOrNull(c.length) };
    case 'tinytext':
    case 'text':
    case 'mediumtext':
    case 'longtext':
      // Limited in bytes (255, 65,535, 16,777,215, 4 GiB): UTF-8's bytes in utf8mb3/utf8mb4; other sets are taken as
      // one byte a character (the single-byte ones; a wider one's excess is left to the database, as before).
      return /^utf8/i.test(c.charset ?? '')
        ? { ...base, kind: 'text', length: null, bytes: numberOrNull(c.octets) }
        : { ...base, kind: 'text', length: numberOrNull(c.octets) };
    default:
      return { ...base, kind: 'other' };
  }
}

function backtick(identifier: string): string {
  return `\`${identifier.replace(/`/g, '``')}\``;
}

export const mysql: Dialect = {
  name: 'mysql',
  async exactTextCollation(runner) {
    // The usual defaults (utf8mb4_general_ci, …_0900_ai_ci) ignore case and accents, and PAD SPACE
    // collations (utf8mb4_bin too) trailing spaces. Binary and NO PAD: MySQL 8 utf8mb4_0900_bin,
    // MariaDB utf8mb4_nopad_bin; older servers have only utf8mb4_bin.
    const found = (await runner.query(
      "SELECT COLLATION_NAME AS name FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN ('utf8mb4_0900_bin', 'utf8mb4_nopad_bin') ORDER BY COLLATION_NAME",
    )) as { name: string }[];
    return found[0]?.name ?? 'utf8mb4_bin';
  },
  prepare: ready,
  supportsSkipLocked: true,
  singleConnection: false,
  // InnoDB's default REPEATABLE READ locks every row an UPDATE scans, and the gaps between them, so
  // concurrent claims and completions deadlock; READ COMMITTED locks only matching rows, as PostgreSQL.
  ownTransactionIsolation: 'READ COMMITTED',
  pipelinedCommit: mysqlPipelinedCommit,
  replicaLagMs: mysqlReplicaLagMs,
  quote: backtick,
  execute: executeThroughRunner,
  sql: (text) => text,
  placeholder: () => '?',
  bindable: (value) => value,
  lexicon: { backslashEscapes: 'always', dollarQuotes: false },
  insertIgnore(table, columns, conflictColumns) {
    const cols = columns.map(backtick).join(', ');
    // ON DUPLICATE KEY UPDATE of the key to itself: unlike INSERT IGNORE it hides no other error.
    const k = backtick(conflictColumns[0]);
    return `INSERT INTO ${backtick(table)} (${cols}) VALUES (${columns.map(() => '?').join(', ')}) ON DUPLICATE KEY UPDATE ${k} = ${k}`;
  },
  lockRow(table, keyColumn) {
    return { select: `SELECT * FROM ${backtick(table)} WHERE ${backtick(keyColumn)} = ? FOR UPDATE` };
  },
  skipLockedSuffix: ' FOR UPDATE SKIP LOCKED',
  supportsReturning: false,
  insertIgnoreRows(table, columns, conflictColumns, rows) {
    const k = backtick(conflictColumns[0]);
    return `INSERT INTO ${backtick(table)} (${columns.map(backtick).join(', ')}) VALUES ${valueRows(columns.length, rows)} ON DUPLICATE KEY UPDATE ${k} = ${k}`;
  },
  async insertMissingRows(runner, table, columns, conflictColumns, parameters, rows) {
    // With the found-rows flag (mysql2's default) a skipped row counts as affected, so the
    // statement counts its skips itself, in a session variable of this transaction's connection.
    const k = backtick(conflictColumns[0]);
    await runner.query('SET @checkpoint_skipped = 0');
    await runner.query(
      `INSERT INTO ${backtick(table)} (${columns.map(backtick).join(', ')}) VALUES ${valueRows(columns.length, rows)} ` +
        `ON DUPLICATE KEY UPDATE ${k} = IF((@checkpoint_skipped := @checkpoint_skipped + 1) > 0, ${k}, ${k})`,
      parameters,
    );
    const counted = (await runner.query('SELECT @checkpoint_skipped AS skipped')) as { skipped: number | string }[];
    return rows - Number(counted[0].skipped);
  },
  proposed: (column) => `VALUES(${backtick(column)})`,
  conditionalUpsert(table, columns, _conflictColumn, assignments, condition) {
    // MySQL applies assignments left to right, so the condition is evaluated once, up front (never
    // NULL, so that NULL afterwards means "not evaluated": the row was inserted).
    const updates = assignments.map(([column, value], i) => {
      const test = i === 0 ? `@checkpoint_upsert := COALESCE((${condition}), 0)` : '@checkpoint_upsert';
      return `${backtick(column)} = IF(${test}, ${value}, ${backtick(table)}.${backtick(column)})`;
    });
    return `INSERT INTO ${backtick(table)} (${columns.map(backtick).join(', ')}) VALUES ${valueRows(columns.length, 1)} ON DUPLICATE KEY UPDATE ${updates.join(', ')}`;
  },
  async applyConditionalUpsert(runner, table, columns, conflictColumn, assignments, condition, parameters) {
    // With the found-rows flag (mysql2's default) an existing row that failed the condition still
    // counts as affected; the condition's value, kept in a session variable, tells instead.
    await runner.query('SET @checkpoint_upsert = NULL');
    const affected = await affectedRows(runner, this.conditionalUpsert(table, columns, conflictColumn, assignments, condition), parameters);
    const outcome = (await runner.query('SELECT @checkpoint_upsert AS applied')) as { applied: number | string | null }[];
    const applied = outcome[0].applied;
    return applied === null ? affected > 0 : Number(applied) === 1;
  },
  estimateRows: mysqlEstimateRows,
  async tableInfo(manager, table) {
    const schemaExpr = table.schema ? '?' : 'DATABASE()';
    const args = table.schema ? [table.schema, table.name] : [table.name];
    const columns: { name: string; dataType: string; columnType: string }[] = await manager.query(
      `SELECT COLUMN_NAME AS name, DATA_TYPE AS dataType, COLUMN_TYPE AS columnType FROM information_schema.COLUMNS
        WHERE TABLE_SCHEMA = ${schemaExpr} AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
      args,
    );
    if (columns.length === 0) return null;
    const parts: { indexName: string; columnName: string | null; subPart: number | null }[] = await manager.query(
      `SELECT INDEX_NAME AS indexName, COLUMN_NAME AS columnName, SUB_PART AS subPart FROM information_schema.STATISTICS
        WHERE TABLE_SCHEMA = ${schemaExpr} AND TABLE_NAME = ? AND NON_UNIQUE = 0
        ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
      args,
    );
    // A prefix index (SUB_PART) or a functional one (no COLUMN_NAME) does not make its columns unique.
    const unusable = new Set(parts.filter((p) => p.columnName === null || p.subPart !== null).map((p) => p.indexName));
    const usable = parts.filter((p) => !unusable.has(p.indexName)).map((p) => ({ index: p.indexName, attname: p.columnName as string }));
    // MySQL TIMESTAMP is shown in the session's zone (ambiguous across DST changes): not a key; DATETIME(6) is.
    const keyTypes: Record<string, ColumnInfo['keyType']> = {
      tinyint: 'integer',
      smallint: 'integer',
      mediumint: 'integer',
      int: 'integer',
      bigint: 'bigint',
      varchar: 'text',
      char: 'text',
      text: 'text',
      uuid: 'uuid',
      datetime: 'timestamp',
      date: 'date',
    };
    return {
      columns: columns.map((c) => ({ name: c.name, declaredType: c.columnType, keyType: keyTypes[c.dataType] ?? null })),
      uniqueKeys: groupKeys(usable),
      quotedTable: qualifiedTable(table, backtick),
    };
  },
  storable: { floatSpecials: false, textHoldsNul: true },
  async isView(manager, table) {
    const found: unknown[] = await manager.query(
      `SELECT 1 FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ${table.schema ? '?' : 'DATABASE()'} AND TABLE_NAME = ?`,
      table.schema ? [table.schema, table.name] : [table.name],
    );
    return found.length > 0;
  },
  async recordColumns(manager, table) {
    const columns: MysqlCatalogueColumn[] = await manager.query(
      `SELECT COLUMN_NAME AS name, DATA_TYPE AS dataType, COLUMN_TYPE AS columnType, CHARACTER_MAXIMUM_LENGTH AS length,
              CHARACTER_OCTET_LENGTH AS octets, CHARACTER_SET_NAME AS charset,
              NUMERIC_PRECISION AS numPrecision, NUMERIC_SCALE AS numScale, DATETIME_PRECISION AS fractionDigits,
              IS_NULLABLE AS isNullable, COLUMN_DEFAULT AS columnDefault, EXTRA AS extra, COLUMN_KEY AS columnKey
         FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ${table.schema ? '?' : 'DATABASE()'} AND TABLE_NAME = ?
        ORDER BY ORDINAL_POSITION`,
      table.schema ? [table.schema, table.name] : [table.name],
    );
    if (columns.length === 0) return null;
    const json = columns.some((c) => c.dataType === 'longtext') ? await mariadbJsonColumns(manager, table) : new Set<string>();
    let position = 0;
    return columns.map((c) => {
      const column = mysqlRecordColumn(c, c.columnKey === 'PRI' ? ++position : 0);
      return json.has(c.name) ? { ...column, kind: 'json' as const } : column;
    });
  },
  createTable: (table, columns, primaryKey, options) => mysqlCreateTable(table, columns, primaryKey, backtick, options),
  insertRecords(table, columns, rows, conflict) {
    const insert = `INSERT INTO ${qualifiedTable(table, backtick)} (${columns.map(backtick).join(', ')}) VALUES ${valueRows(columns.length, rows)}`;
    if (!conflict) return insert;
    // A no-op update for skip: unlike INSERT IGNORE it hides no other error.
    const k = backtick(conflict.keyColumns[0]);
    const updates =
      conflict.mode === 'update' && conflict.update.length > 0
        ? conflict.update.map((c) => `${backtick(c)} = VALUES(${backtick(c)})`).join(', ')
        : `${k} = ${k}`;
    return `${insert} ON DUPLICATE KEY UPDATE ${updates}`;
  },
  keyRead(column, keyType) {
    if (keyType === 'timestamp') return `DATE_FORMAT(${column}, '%Y-%m-%d %H:%i:%s.%f')`;
    if (keyType === 'date') return `DATE_FORMAT(${column}, '%Y-%m-%d')`;
    return column;
  },
  keyBound(placeholder, keyType) {
    if (keyType === 'timestamp') return `CAST(${placeholder} AS DATETIME(6))`;
    if (keyType === 'date') return `CAST(${placeholder} AS DATE)`;
    return placeholder;
  },
  keysetCondition(columns, op, bound) {
    // MariaDB does not turn row values into index ranges: a lexicographic OR chain does, with
    // the redundant bound on the leading column giving the range itself.
    if (columns.length === 1) return `${columns[0]} ${op} ${bound(0)}`;
    const strict = op === '>' ? '>' : '<';
    const leading = `${columns[0]} ${op === '>' ? '>=' : '<='} ${bound(0)}`;
    const alternatives = columns.map((column, k) => {
      const equal = columns.slice(0, k).map((previous, j) => `${previous} = ${bound(j)}`);
      return `(${[...equal, `${column} ${k === columns.length - 1 ? op : strict} ${bound(k)}`].join(' AND ')})`;
    });
    return `${leading} AND (${alternatives.join(' OR ')})`;
  },
};
