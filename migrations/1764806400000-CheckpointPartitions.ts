import { type MigrationInterface, type QueryRunner, Table } from 'typeorm';
import { exactTextColumns } from './exact-text-columns';

/** `checkpoint_partitions`: the frozen plan and claim state of partitioned jobs' ranges. Safe to run twice. */
export class CheckpointPartitions1764806400000 implements MigrationInterface {
  name = 'CheckpointPartitions1764806400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = await exactTextColumns(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'checkpoint_partitions',
        columns: [
          text({ name: 'job_name', type: 'varchar', length: '512', isPrimary: true }),
          { name: 'partition_index', type: 'integer', isPrimary: true },
          text({ name: 'lower_key', type: 'text', isNullable: true }),
          text({ name: 'upper_key', type: 'text', isNullable: true }),
          text({ name: 'cursor', type: 'text', isNullable: true }),
          text({ name: 'status', type: 'varchar', length: '16', default: "'pending'" }),
          { name: 'retry_count', type: 'integer', default: 0 },
          { name: 'max_retries', type: 'integer', default: 3 },
          { name: 'claim_token', type: 'bigint', default: 0 },
          text({ name: 'processed_by', type: 'varchar', length: '255', isNullable: true }),
          { name: 'started_at', type: 'bigint', isNullable: true },
          { name: 'lease_expires_at', type: 'bigint', isNullable: true },
          text({ name: 'error_message', type: 'text', isNullable: true }),
          { name: 'batches', type: 'bigint', default: 0 },
          { name: 'items', type: 'bigint', default: 0 },
          { name: 'updated_at', type: 'bigint' },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('checkpoint_partitions', true);
  }
}
