import type { DataSource } from 'typeorm';
import { InvalidArgumentError } from '../core/errors';
import type { Dialect } from './dialect';
import { mysql } from './mysql';
import { postgres } from './postgres';
import { sqlite } from './sqlite';

export type {
  ColumnInfo,
  Dialect,
  Executed,
  FinalStatement,
  IsolationLevel,
  OpeningStatement,
  PipelinedOutcome,
  AfterCommitStatement,
  AfterCommitOutcome,
  KeyType,
  RecordConflict,
  SqlLexicon,
  TableInfo,
  TableRef,
} from './dialect';
export { binaryWire, type RecordColumn, type RecordKind } from './record-columns';
export type { CreateTableOptions, InferredColumn, InferredKind } from './create-table';
export type { CopyAround } from './copy-pipeline';
export type { BoundStatement } from './pg-pipeline';
export { AbandonedPipeline } from './pg-pipeline';
export { CopyText, type CopyRows, skipCopyRows } from './copy-text';
export { CopyBinary, type WireType } from './copy-binary';
export { entityTable, firstExisting, qualifiedTable, tablesNamed } from './shared-sql';

/** The dialect of a DataSource's driver: everything that differs between databases is behind it. */
export function dialectOf(dataSource: DataSource): Dialect {
  const type: string = dataSource.options.type;
  switch (type) {
    case 'postgres':
      return postgres;
    case 'sqlite':
    case 'better-sqlite3':
      return sqlite;
    case 'mysql':
    case 'mariadb':
      return mysql;
    default:
      throw new InvalidArgumentError(
        `typeorm-checkpoint supports postgres, mysql/mariadb, sqlite and better-sqlite3 DataSources, not "${String(type)}".`,
      );
  }
}
