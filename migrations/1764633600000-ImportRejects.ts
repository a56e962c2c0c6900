import { type MigrationInterface, type QueryRunner, Table } from 'typeorm';
import { exactTextColumns } from './exact-text-columns';

/** `checkpoint_import_rejects`: the rows a records import with `invalid: 'skip'` left out. Safe to run twice. */
export class ImportRejects1764633600000 implements MigrationInterface {
  name = 'ImportRejects1764633600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = await exactTextColumns(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'checkpoint_import_rejects',
        columns: [
          text({ name: 'batch', type: 'varchar', length: '255', isPrimary: true }),
          { name: 'row_index', type: 'bigint', isPrimary: true },
          text({ name: 'reason', type: 'text' }),
          text({ name: 'raw', type: 'text' }),
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('checkpoint_import_rejects', true);
  }
}
