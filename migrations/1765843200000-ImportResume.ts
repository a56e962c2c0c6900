import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

const TABLE = 'checkpoint_imports';

// The options hash of the pass 1 that validated a batch: a resume of the same file with the same
// options skips validation (pass 1 is then only the file's SHA-256).
const columns = () => [new TableColumn({ name: 'validated_options', type: 'varchar', length: '64', isNullable: true })];

/** `validated_options` on `checkpoint_imports`. Safe to run twice. */
export class ImportResume1765843200000 implements MigrationInterface {
  name = 'ImportResume1765843200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    const missing = columns().filter((column) => !table?.findColumnByName(column.name));
    if (table && missing.length > 0) await queryRunner.addColumns(TABLE, missing);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    const present = columns().filter((column) => table?.findColumnByName(column.name));
    if (table && present.length > 0) await queryRunner.dropColumns(TABLE, present);
  }
}
