import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

const TABLES = ['checkpoint_jobs', 'checkpoint_imports'];
// A job or import batch is 'active', 'paused' or 'cancelled' (its `done` says finished): what a
// running loop reads in the statement it runs before each batch. Time spent throttled is kept beside it.
const columns = () => [
  new TableColumn({ name: 'state', type: 'varchar', length: '16', isNullable: false, default: "'active'" }),
  new TableColumn({ name: 'throttled_ms', type: 'bigint', isNullable: false, default: 0 }),
];

/** The control state (pause, resume, cancel) and throttled time of batch jobs, partitioned jobs and import batches. Safe to run twice. */
export class ControlState1765324800000 implements MigrationInterface {
  name = 'ControlState1765324800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const name of TABLES) {
      const table = await queryRunner.getTable(name);
      const missing = columns().filter((column) => !table?.findColumnByName(column.name));
      if (table && missing.length > 0) await queryRunner.addColumns(name, missing);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const name of TABLES) {
      const table = await queryRunner.getTable(name);
      const present = columns().filter((column) => table?.findColumnByName(column.name));
      if (table && present.length > 0) await queryRunner.dropColumns(name, present);
    }
  }
}
