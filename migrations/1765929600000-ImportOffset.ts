import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

const TABLE = 'checkpoint_imports';

// The byte offset of the next source row, committed with each chunk: a resume of a validated
// batch starts reading the file there.
const columns = () => [new TableColumn({ name: 'next_offset', type: 'bigint', isNullable: true })];

/** `next_offset` on `checkpoint_imports`. Safe to run twice. */
export class ImportOffset1765929600000 implements MigrationInterface {
  name = 'ImportOffset1765929600000';

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
