import { type MigrationInterface, type QueryRunner, TableColumn } from 'typeorm';

const TABLES = ['checkpoint_jobs', 'checkpoint_imports'];

// Until when a loop of the job (or import batch) waits on its throttle: written when a wait of
// more than a second begins, cleared when the wait's time is recorded; the dashboard's "throttled".
const column = () => new TableColumn({ name: 'throttled_until', type: 'bigint', isNullable: true });

/** `throttled_until` on `checkpoint_jobs` and `checkpoint_imports`. Safe to run twice. */
export class ThrottledUntil1765756800000 implements MigrationInterface {
  name = 'ThrottledUntil1765756800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const name of TABLES) {
      const table = await queryRunner.getTable(name);
      if (table && !table.findColumnByName('throttled_until')) await queryRunner.addColumn(name, column());
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const name of TABLES) {
      const table = await queryRunner.getTable(name);
      if (table?.findColumnByName('throttled_until')) await queryRunner.dropColumn(name, 'throttled_until');
    }
  }
}
