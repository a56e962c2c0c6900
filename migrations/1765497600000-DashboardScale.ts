import { type MigrationInterface, type QueryRunner, TableIndex } from 'typeorm';
import { LAST_ATTEMPTS_INDEX_PREDICATE } from '../entities/FileCheckpoint';

const TABLE = 'file_checkpoints';
// The dead-letter list in key order, its count, and the leases that expire on a last attempt,
// without reading the table: a partial index of last attempts (PostgreSQL, SQLite), which claims
// and completions with retries left never enter. MySQL/MariaDB has no partial indexes and gets a
// plain one on the key (never updated: url_hash does not change), so that its schema matches the
// entity; there the status index, which InnoDB extends with the primary key, answers the list.
const INDEX = new TableIndex({
  name: 'IDX_file_checkpoints_last_attempts',
  columnNames: ['url_hash'],
  where: LAST_ATTEMPTS_INDEX_PREDICATE,
});

/** The index that keeps the dashboard's pages flat as file_checkpoints grows (dead letters, expiring last attempts). Safe to run twice. */
export class DashboardScale1765497600000 implements MigrationInterface {
  name = 'DashboardScale1765497600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    if (table && !table.indices.some((index) => index.name === INDEX.name)) await queryRunner.createIndex(TABLE, INDEX.clone());
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    if (table?.indices.some((index) => index.name === INDEX.name)) await queryRunner.dropIndex(TABLE, INDEX.name!);
  }
}
