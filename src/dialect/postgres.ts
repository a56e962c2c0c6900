import type { EventEmitter } from 'node:events';
import type { ColumnInfo, Dialect } from './dialect';
import type { WireType } from './copy-binary';
import { copyFromStdin } from './copy-pipeline';
import { pgCreateTable } from './pg-create-table';
import { executePrepared, ignoreClientError } from './pg-client';
import { ASYNCHRONOUS_COMMIT_EXPRESSION, pgPipelinedCommit } from './pg-commit';
import { listenOnPostgres } from './pg-listen';
import { pgReplicaLagMs } from './pg-replica-lag';
import { pgEstimateRows } from './pg-row-estimate';
import { integerRange, type RecordColumn } from './record-columns';
import {
  affectedRows,
  defaultCollationIsExact,
  doubleQuote,
  groupKeys,
  onConflictDoNothing,
  onConflictRecords,
  onConflictUpdateWhere,
  questionMarks,
  qualifiedTable,
  rowValueKeyset,
} from './shared-sql';

const PG_INTEGER_BYTES: Record<string, 2 | 4 | 8> = { int2: 2, int4: 4, int8: 8 };
const PG_TEXT = new Set(['text', 'varchar', 'bpchar', 'citext', 'name']);
// Text types whose binary input is the text's bytes (the length limit and padding applied as to text).
const PG_BINARY_TEXT = new Set(['text', 'varchar', 'bpchar']);

interface PgCatalogueColumn {
  name: string;
  udt: string;
  length: number | null;
  precision: number | null;
  scale: number | null;
  fractionDigits: number | null;
  nullable: boolean;
  hasDefault: boolean;
  primary: number;
  values: string[] | null;
}

function pgRecordColumn(c: PgCatalogueColumn): RecordColumn {
  const base = { name: c.name, nullable: c.nullable, hasDefault: c.hasDefault, primary: Number(c.primary) };
  const bytes = PG_INTEGER_BYTES[c.udt];
  if (bytes) return { ...base, kind: 'integer', ...integerRange(bytes), wire: c.udt as WireType };
  // An enum's binary input is its label's text.
  if (c.values) return { ...base, kind: 'enum', values: c.values, wire: 'text' };
  switch (c.udt) {
    case 'numeric':
      return { ...base, kind: 'numeric', precision: c.precision, scale: c.precision === null ? null : c.scale, wire: 'numeric' };
    case 'float4':
    case 'float8':
      return { ...base, kind: 'float', single: c.udt === 'float4' };
    case 'bool':
      return { ...base, kind: 'boolean', wire: 'bool' };
    case 'date':
      return { ...base, kind: 'date', wire: 'date' };
    case 'timestamp':
    case 'timestamptz':
      return { ...base, kind: c.udt, fractionDigits: c.fractionDigits ?? 6, wire: c.udt };
    case 'uuid':
      return { ...base, kind: 'uuid', wire: 'uuid' };
    case 'json':
    case 'jsonb':
      return { ...base, kind: 'json' };
    default:
      if (PG_BINARY_TEXT.has(c.udt)) return { ...base, kind: 'text', length: c.length, wire: 'text' };
      return PG_TEXT.has(c.udt) ? { ...base, kind: 'text', length: c.length } : { ...base, kind: 'other' };
  }
}

export const postgres: Dialect = {
  name: 'postgres',
  exactTextCollation: defaultCollationIsExact,
  prepare(dataSource) {
    // pg-pool hands out a new client from inside the socket read that completed its connection; an
    // error message in that same read (the connection killed right then) is emitted before TypeORM
    // attaches its listener, and an 'error' event nobody listens to crashes the whole process. A
    // listener on every new client leaves such a client merely unusable: its first query fails
    // (DATABASE_ERROR) and the pool drops it.
    const driver = dataSource.driver as unknown as { master?: EventEmitter; slaves?: EventEmitter[] };
    if (!driver.master) return false;
    for (const pool of [driver.master, ...(driver.slaves ?? [])]) {
      pool.on('connect', (client: EventEmitter) => client.on('error', ignoreClientError));
    }
    return true;
  },
  wakeups: {
    notify: "SELECT pg_notify($1, '')",
    // The CASE calls pg_notify only when a row went in; the notification goes out when the statement commits.
    insertNotifying: (insert, channel) =>
      `WITH inserted AS (${insert} RETURNING 1) SELECT n AS inserted, CASE WHEN n > 0 THEN pg_notify(${channel}, '') END AS notified ` +
      'FROM (SELECT COUNT(*) AS n FROM inserted) counted',
    listen: listenOnPostgres,
  },
  replicaLagMs: pgReplicaLagMs,
  supportsSkipLocked: true,
  singleConnection: false,
  pipelinedCommit: pgPipelinedCommit,
  stateClock: {
    now: 'FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint',
    before: (column) => `${column} < EXTRACT(EPOCH FROM transaction_timestamp()) * 1000`,
  },
  quote: doubleQuote,
  execute: executePrepared,
  sql(text) {
    let n = 0;
    return text.replace(questionMarks, (found) => (found === '?' ? `$${++n}` : found));
  },
  placeholder: (n) => `$${n}`,
  bindable: (value) => value,
  lexicon: { backslashEscapes: 'e-prefix', dollarQuotes: true },
  insertIgnore(table, columns, conflictColumns) {
    const cols = columns.map(doubleQuote).join(', ');
    const marks = columns.map(() => '?').join(', ');
    return this.sql(
      `INSERT INTO ${doubleQuote(table)} (${cols}) VALUES (${marks}) ON CONFLICT (${conflictColumns.map(doubleQuote).join(', ')}) DO NOTHING`,
    );
  },
  lockRow(table, keyColumn) {
    return { select: this.sql(`SELECT * FROM ${doubleQuote(table)} WHERE ${doubleQuote(keyColumn)} = ? FOR UPDATE`) };
  },
  skipLockedSuffix: ' FOR UPDATE SKIP LOCKED',
  supportsReturning: true,
  copyRows: copyFromStdin,
  asynchronousCommit: 'SET LOCAL synchronous_commit = off',
  asynchronousCommitExpression: ASYNCHRONOUS_COMMIT_EXPRESSION,
  insertIgnoreRows(table, columns, conflictColumns, rows) {
    return this.sql(onConflictDoNothing(table, columns, conflictColumns, rows));
  },
  insertMissingRows(runner, table, columns, conflictColumns, parameters, rows) {
    return affectedRows(runner, this.insertIgnoreRows(table, columns, conflictColumns, rows), parameters);
  },
  proposed: (column) => `EXCLUDED.${doubleQuote(column)}`,
  conditionalUpsert(table, columns, conflictColumn, assignments, condition) {
    return this.sql(onConflictUpdateWhere(table, columns, conflictColumn, assignments, condition));
  },
  async applyConditionalUpsert(runner, table, columns, conflictColumn, assignments, condition, parameters) {
    return (await affectedRows(runner, this.conditionalUpsert(table, columns, conflictColumn, assignments, condition), parameters)) > 0;
  },
  estimateRows: pgEstimateRows,
  async tableInfo(manager, table) {
    const regclass = table.schema ? "to_regclass(quote_ident($1) || '.' || quote_ident($2))" : 'to_regclass(quote_ident($1))';
    const args = table.schema ? [table.schema, table.name] : [table.name];
    const found: { oid: string | null; ref: string | null; estimate: number | null }[] = await manager.query(
      `SELECT ${regclass}::oid AS oid, ${regclass}::text AS ref, (SELECT reltuples::float8 FROM pg_class WHERE oid = ${regclass}) AS estimate`,
      args,
    );
    const oid = found[0]?.oid;
    if (!oid) return null;
    const columns: { attname: string; attnum: number; typname: string; format: string }[] = await manager.query(
      `SELECT a.attname, a.attnum, t.typname, format_type(a.atttypid, a.atttypmod) AS format
         FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
        WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
      [oid],
    );
    // One row per key column of each usable unique index (the primary key among them), in index order.
    const parts: { index: string; attname: string }[] = await manager.query(
      `SELECT i.indexrelid::text AS index, a.attname FROM pg_index i
         CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, position)
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
        WHERE i.indrelid = $1 AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
          AND i.indexprs IS NULL AND k.position <= i.indnkeyatts
        ORDER BY i.indexrelid, k.position`,
      [oid],
    );
    const keyTypes: Record<string, ColumnInfo['keyType']> = {
      int2: 'integer',
      int4: 'integer',
      int8: 'bigint',
      text: 'text',
      varchar: 'text',
      bpchar: 'text',
      uuid: 'uuid',
      timestamp: 'timestamp',
      timestamptz: 'timestamptz',
      date: 'date',
    };
    return {
      columns: columns.map((c) => ({ name: c.attname, keyType: keyTypes[c.typname] ?? null, declaredType: c.format })),
      uniqueKeys: groupKeys(parts),
      quotedTable: qualifiedTable(table, doubleQuote),
      // -1 (PostgreSQL 14+) or 0: never analysed, no estimate.
      ...(Number(found[0].estimate) > 0 ? { estimatedRows: Number(found[0].estimate) } : {}),
    };
  },
  storable: { floatSpecials: true, textHoldsNul: false },
  async recordColumns(manager, table) {
    const columns: PgCatalogueColumn[] = await manager.query(
      `SELECT c.column_name AS name, c.udt_name AS udt, c.character_maximum_length AS length,
              c.numeric_precision AS precision, c.numeric_scale AS scale, c.datetime_precision AS "fractionDigits",
              c.is_nullable = 'YES' AS nullable,
              (c.column_default IS NOT NULL OR c.is_identity = 'YES' OR c.is_generated <> 'NEVER') AS "hasDefault",
              COALESCE((SELECT array_position(k.conkey, c.ordinal_position::int2) FROM pg_constraint k
                         WHERE k.conrelid = (quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))::regclass
                           AND k.contype = 'p'), 0) AS primary,
              (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e
                 JOIN pg_type t ON t.oid = e.enumtypid JOIN pg_namespace n ON n.oid = t.typnamespace
                WHERE t.typname = c.udt_name AND n.nspname = c.udt_schema) AS values
         FROM information_schema.columns c
        WHERE c.table_schema = COALESCE($2, current_schema()) AND c.table_name = $1
        ORDER BY c.ordinal_position`,
      [table.name, table.schema ?? null],
    );
    return columns.length === 0 ? null : columns.map(pgRecordColumn);
  },
  async isView(manager, table) {
    const found: unknown[] = await manager.query(
      'SELECT 1 FROM information_schema.views WHERE table_schema = COALESCE($2, current_schema()) AND table_name = $1',
      [table.name, table.schema ?? null],
    );
    return found.length > 0;
  },
  createTable: pgCreateTable,
  insertRecords(table, columns, rows, conflict) {
    return this.sql(onConflictRecords(table, columns, rows, conflict));
  },
  keyRead(column, keyType) {
    // to_char keeps every microsecond digit; AT TIME ZONE 'UTC' makes timestamptz text independent of the session's zone.
    if (keyType === 'timestamp') return `to_char(${column}, 'YYYY-MM-DD HH24:MI:SS.US')`;
    if (keyType === 'timestamptz') return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
    if (keyType === 'date') return `to_char(${column}, 'YYYY-MM-DD')`;
    return column;
  },
  keyBound(placeholder, keyType) {
    return keyType === 'timestamp' || keyType === 'timestamptz' || keyType === 'date' ? `${placeholder}::${keyType}` : placeholder;
  },
  keysetCondition: rowValueKeyset,
  sampleClause: (percent, unit) => `TABLESAMPLE ${unit === 'pages' ? 'SYSTEM' : 'BERNOULLI'} (${percent})`,
};
