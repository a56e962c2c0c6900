import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata';
import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

const TABLE = 'checkpoint_jobs';

// How many rows a batch or partitioned job will visit: the source's estimate, written once when
// the job starts (or resumes without one), and its item count once it ends. The boolean is spelled
// as the driver spells the entity's (see CheckpointJobs1764460800000), so `schema:log` sees no change.
const columns = (queryRunner: QueryRunner) => {
  const driver = queryRunner.connection.driver;
  return [
    new TableColumn({ name: 'total', type: 'bigint', isNullable: true }),
    new TableColumn({
      name: 'total_estimated',
      type: driver.normalizeType({ type: 'boolean' }),
      isNullable: false,
      default: driver.normalizeDefault({ default: false, type: 'boolean' } as ColumnMetadata),
    }),
  ];
};

/** A job's total (`total`) and whether it is an estimate (`total_estimated`) on `checkpoint_jobs`. Safe to run twice. */
export class JobTotals1765584000000 implements MigrationInterface {
  name = 'JobTotals1765584000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    const missing = columns(queryRunner).filter((column) => !table?.findColumnByName(column.name));
    if (table && missing.length > 0) await queryRunner.addColumns(TABLE, missing);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    const present = columns(queryRunner).filter((column) => table?.findColumnByName(column.name));
    if (table && present.length > 0) await queryRunner.dropColumns(TABLE, present);
  }
}
