import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata';
import { type MigrationInterface, type QueryRunner, Table, type TableColumnOptions } from 'typeorm';
import { exactTextColumns } from './exact-text-columns';

/**
 * A `boolean` column defaulting to `false`, with type and default spelled the way the driver
 * spells the entity's `@Column({ type: 'boolean', default: false })` (MySQL `tinyint` and `0`,
 * SQLite `0`, PostgreSQL `false`): the Table API writes both verbatim, and any other spelling is
 * a difference for `schema:log` (e.g. MariaDB's `tinyint(1)` for `boolean`, to TypeORM 0.3).
 */
function falseByDefault(queryRunner: QueryRunner, name: string): TableColumnOptions {
  const driver = queryRunner.connection.driver;
  return {
    name,
    type: driver.normalizeType({ type: 'boolean' }),
    default: driver.normalizeDefault({ default: false, type: 'boolean' } as ColumnMetadata),
  };
}

/** `checkpoint_jobs` (batch jobs and steps) and the digest-guarded import tables. Safe to run twice. */
export class CheckpointJobs1764460800000 implements MigrationInterface {
  name = 'CheckpointJobs1764460800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = await exactTextColumns(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'checkpoint_jobs',
        columns: [
          text({ name: 'name', type: 'varchar', length: '512', isPrimary: true }),
          text({ name: 'kind', type: 'varchar', length: '16' }),
          falseByDefault(queryRunner, 'done'),
          text({ name: 'cursor', type: 'text', isNullable: true }),
          text({ name: 'value', type: 'text', isNullable: true }),
          text({ name: 'fingerprint', type: 'varchar', length: '512', isNullable: true }),
          { name: 'batches', type: 'bigint', default: 0 },
          { name: 'items', type: 'bigint', default: 0 },
          { name: 'started_at', type: 'bigint' },
          { name: 'updated_at', type: 'bigint' },
          { name: 'finished_at', type: 'bigint', isNullable: true },
        ],
      }),
      true,
    );
    await queryRunner.createTable(
      new Table({
        name: 'checkpoint_imports',
        columns: [
          text({ name: 'id', type: 'varchar', length: '255', isPrimary: true }),
          text({ name: 'digest', type: 'varchar', length: '64' }),
          { name: 'next_index', type: 'bigint' },
          { name: 'total_rows', type: 'bigint', isNullable: true },
          { name: 'updated_at', type: 'bigint', isNullable: true },
        ],
      }),
      true,
    );
    await queryRunner.createTable(
      new Table({
        name: 'checkpoint_import_items',
        columns: [
          text({ name: 'batch', type: 'varchar', length: '255', isPrimary: true }),
          text({ name: 'id', type: 'varchar', length: '512', isPrimary: true }),
          { name: 'value', type: 'bigint' },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('checkpoint_import_items', true);
    await queryRunner.dropTable('checkpoint_imports', true);
    await queryRunner.dropTable('checkpoint_jobs', true);
  }
}
