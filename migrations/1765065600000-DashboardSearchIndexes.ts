import { type MigrationInterface, type QueryRunner, TableIndex } from 'typeorm';

const RANGE_STATUS = new TableIndex({ name: 'IDX_checkpoint_partitions_status', columnNames: ['status'] });
const URL_TRIGRAMS = 'IDX_file_checkpoints_file_url_trgm';

/**
 * More indexes for the dashboard. Dead ranges (overview, the jobs page's `dead` tab) from
 * `checkpoint_partitions.status`. On PostgreSQL, the file list's search by URL substring
 * (`LIKE '%…%'`) from a pg_trgm GIN index: `file_url` has no btree index since the URLs may be
 * longer than one can hold (migration 1764720000000). Where pg_trgm is not available, or the
 * database user may not create it, that index is left out and the search reads the table.
 * Safe to run twice.
 */
export class DashboardSearchIndexes1765065600000 implements MigrationInterface {
  name = 'DashboardSearchIndexes1765065600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable('checkpoint_partitions');
    if (table && !table.indices.some((index) => index.name === RANGE_STATUS.name))
      await queryRunner.createIndex('checkpoint_partitions', RANGE_STATUS);
    if (queryRunner.connection.options.type !== 'postgres' || !(await queryRunner.hasTable('file_checkpoints'))) return;
    // Asked first: a failed CREATE EXTENSION would abort the migration's transaction.
    const [trigrams] = (await queryRunner.query(
      `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') AS installed,
              EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm')
              AND (has_database_privilege(current_database(), 'CREATE') OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) AS creatable`,
    )) as { installed: boolean; creatable: boolean }[];
    if (!trigrams.installed && !trigrams.creatable) return;
    if (!trigrams.installed) await queryRunner.query('CREATE EXTENSION IF NOT EXISTS pg_trgm');
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS "${URL_TRIGRAMS}" ON "file_checkpoints" USING gin ("file_url" gin_trgm_ops)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // The extension stays: other tables may use it.
    if (queryRunner.connection.options.type === 'postgres') await queryRunner.query(`DROP INDEX IF EXISTS "${URL_TRIGRAMS}"`);
    const table = await queryRunner.getTable('checkpoint_partitions');
    if (table?.indices.some((index) => index.name === RANGE_STATUS.name))
      await queryRunner.dropIndex('checkpoint_partitions', RANGE_STATUS.name!);
  }
}
