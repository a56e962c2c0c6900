import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';
import { addMissingColumns, dropPresentColumns } from './column-changes';

const TABLE = 'checkpoint_imports';

// The rows pass 1 found repeating a key (records mode, invalid rows skipped), kept with the options
// hash it validated with: a resume that skips validation still leaves them out.
const columns = () => [new TableColumn({ name: 'repeated_rows', type: 'text', isNullable: true })];

/** `repeated_rows` on `checkpoint_imports`. Safe to run twice. */
export class ImportRepeats1766016000000 implements MigrationInterface {
  name = 'ImportRepeats1766016000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await addMissingColumns(queryRunner, TABLE, columns());
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropPresentColumns(queryRunner, TABLE, columns());
  }
}
