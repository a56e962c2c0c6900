import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';
import { addMissingColumns, dropPresentColumns } from './column-changes';

const TABLE = 'checkpoint_imports';

// The options hash of the pass 1 that validated a batch: a resume of the same file with the same
// options skips validation (pass 1 is then only the file's SHA-256).
const columns = () => [new TableColumn({ name: 'validated_options', type: 'varchar', length: '64', isNullable: true })];

/** `validated_options` on `checkpoint_imports`. Safe to run twice. */
export class ImportResume1765843200000 implements MigrationInterface {
  name = 'ImportResume1765843200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await addMissingColumns(queryRunner, TABLE, columns());
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropPresentColumns(queryRunner, TABLE, columns());
  }
}
