import { type MigrationInterface, type QueryRunner, Table } from 'typeorm';
import { exactTextColumns } from './exact-text-columns';

/** `checkpoint_leases`: leases one application instance holds at a time (the NestJS retention timer). Safe to run twice. */
export class Leases1765670400000 implements MigrationInterface {
  name = 'Leases1765670400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = await exactTextColumns(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'checkpoint_leases',
        columns: [
          text({ name: 'name', type: 'varchar', length: '255', isPrimary: true }),
          text({ name: 'holder', type: 'varchar', length: '255' }),
          { name: 'expires_at', type: 'bigint' },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('checkpoint_leases', true);
  }
}
