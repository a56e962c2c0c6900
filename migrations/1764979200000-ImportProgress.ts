import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

const TABLE = 'checkpoint_imports';
// Nullable without a default: a row from before this migration keeps NULL (its counts were never
// kept), and `x = x + ?` leaves NULL as NULL, so such a batch shows "—" rather than a wrong count.
const COLUMNS = ['written_rows', 'skipped_rows', 'chunks', 'started_at'].map(
  (name) => new TableColumn({ name, type: 'bigint', isNullable: true }),
);

/** What `checkpoint_imports` counts per batch for the CLI and the dashboard: rows written, rows skipped, chunks, start time. Safe to run twice. */
export class ImportProgress1764979200000 implements MigrationInterface {
  name = 'ImportProgress1764979200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    const missing = COLUMNS.filter((column) => !table?.findColumnByName(column.name));
    if (table && missing.length > 0) await queryRunner.addColumns(TABLE, missing);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    const present = COLUMNS.filter((column) => table?.findColumnByName(column.name));
    if (table && present.length > 0) await queryRunner.dropColumns(TABLE, present);
  }
}
