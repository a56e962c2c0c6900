import { type MigrationInterface, type QueryRunner, Table } from 'typeorm';
import { exactTextColumns } from './exact-text-columns';

/**
 * `checkpoint_file_types`: the paused file types (`'*'`: every type), read inside the claim
 * statement. `file_checkpoints.status` gains the value `'cancelled'` (a varchar: no change needed).
 * Safe to run twice.
 */
export class FileControl1765411200000 implements MigrationInterface {
  name = 'FileControl1765411200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = await exactTextColumns(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'checkpoint_file_types',
        columns: [text({ name: 'file_type', type: 'varchar', length: '255', isPrimary: true }), { name: 'paused_at', type: 'bigint' }],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('checkpoint_file_types', true);
  }
}
