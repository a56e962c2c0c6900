import { type MigrationInterface, type QueryRunner, TableIndex } from 'typeorm';

// The dashboard's queries answered from indexes: stalled jobs and counts by kind/state from
// checkpoint_jobs, files completed in the last hour (throughput) from file_checkpoints.
const INDEXES: [table: string, index: TableIndex][] = [
  ['checkpoint_jobs', new TableIndex({ name: 'IDX_checkpoint_jobs_kind_done_updated_at', columnNames: ['kind', 'done', 'updated_at'] })],
  ['file_checkpoints', new TableIndex({ name: 'IDX_file_checkpoints_completed_at', columnNames: ['completed_at'] })],
];

/** Indexes for the dashboard. Safe to run twice. */
export class DashboardIndexes1764892800000 implements MigrationInterface {
  name = 'DashboardIndexes1764892800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const [tableName, index] of INDEXES) {
      const table = await queryRunner.getTable(tableName);
      if (table && !table.indices.some((existing) => existing.name === index.name)) await queryRunner.createIndex(tableName, index);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const [tableName, index] of INDEXES) {
      const table = await queryRunner.getTable(tableName);
      if (table?.indices.some((existing) => existing.name === index.name)) await queryRunner.dropIndex(tableName, index.name!);
    }
  }
}
