import type { QueryRunner, TableColumn } from 'typeorm';

/** Adds those of `columns` that `table` lacks (nothing when the table does not exist): a migration safe to run twice. */
export async function addMissingColumns(queryRunner: QueryRunner, table: string, columns: TableColumn[]): Promise<void> {
  const found = await queryRunner.getTable(table);
  const missing = columns.filter((column) => !found?.findColumnByName(column.name));
  if (found && missing.length > 0) await queryRunner.addColumns(table, missing);
}

/** Drops those of `columns` that `table` has: the `down` of `addMissingColumns`. */
export async function dropPresentColumns(queryRunner: QueryRunner, table: string, columns: TableColumn[]): Promise<void> {
  const found = await queryRunner.getTable(table);
  const present = columns.filter((column) => found?.findColumnByName(column.name));
  if (found && present.length > 0) await queryRunner.dropColumns(table, present);
}
