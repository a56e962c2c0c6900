import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';
import { addMissingColumns, dropPresentColumns } from './column-changes';

const TABLE = 'checkpoint_imports';

// The byte offset of the next source row, committed with each chunk: a resume of a validated
// batch starts reading the file there.
const columns = () => [new TableColumn({ name: 'next_offset', type: 'bigint', isNullable: true })];

/** `next_offset` on `checkpoint_imports`. Safe to run twice. */
export class ImportOffset1765929600000 implements MigrationInterface {
  name = 'ImportOffset1765929600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await addMissingColumns(queryRunner, TABLE, columns());
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropPresentColumns(queryRunner, TABLE, columns());
  }
}
