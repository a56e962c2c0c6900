import type { QueryRunner, TableColumnOptions } from 'typeorm';
import { dialectOf } from '../src/dialect';

/**
 * Gives text columns the collation under which the database compares text exactly (MySQL/MariaDB:
 * binary, NO PAD), so names, URLs and ids that differ only in case, accents or trailing spaces are
 * different keys, as they are on PostgreSQL and SQLite. Elsewhere columns pass through unchanged.
 * TypeORM's schema diff ignores collations, so `schema:log` stays empty.
 */
export async function exactTextColumns(queryRunner: QueryRunner): Promise<(column: TableColumnOptions) => TableColumnOptions> {
  const collation = await dialectOf(queryRunner.connection).exactTextCollation(queryRunner);
  return (column) => (collation === undefined ? column : { ...column, collation });
}
