import { type MigrationInterface, type QueryRunner, TableIndex } from 'typeorm';
import { COMPLETED_INDEX_PREDICATE, OPEN_STATUS_INDEX_PREDICATE } from '../entities/FileCheckpoint';
import { DashboardSearchIndexes1765065600000 } from './1765065600000-DashboardSearchIndexes';

const TABLE = 'file_checkpoints';
/** The URLs of file_checkpoints, one row per file written once at register (PostgreSQL). */
const URLS = 'file_checkpoint_urls';
const OLD_TRIGRAMS = 'IDX_file_checkpoints_file_url_trgm';
const URL_TRIGRAMS = 'IDX_file_checkpoint_urls_file_url_trgm';

// No update of a file is HOT (claim and completion both change the indexed status), so every index
// takes a new entry on each. Partial indexes take one only where the new row version belongs:
// the status index holds open files (a completion adds nothing), completed_at completed ones (a claim adds nothing).
const REPLACED: [old: TableIndex, replacement: TableIndex][] = [
  [
    new TableIndex({ name: 'IDX_file_checkpoints_status', columnNames: ['status'] }),
    new TableIndex({ name: 'IDX_file_checkpoints_open_status', columnNames: ['status'], where: OPEN_STATUS_INDEX_PREDICATE }),
  ],
  [
    new TableIndex({ name: 'IDX_file_checkpoints_completed_at', columnNames: ['completed_at'] }),
    new TableIndex({ name: 'IDX_file_checkpoints_completed', columnNames: ['completed_at'], where: COMPLETED_INDEX_PREDICATE }),
  ],
];

// The URL trigram index (a GIN entry per trigram) moves to a row written once per file: triggers
// keep file_checkpoint_urls in step with inserts, deletes and truncates of file_checkpoints, from
// every writer (the library, the SQL functions, the user's own statements).
const POSTGRES_URL_TABLE = [
  `CREATE TABLE IF NOT EXISTS "${URLS}" ("url_hash" varchar(64) PRIMARY KEY, "file_url" varchar(4096) NOT NULL)`,
  `CREATE OR REPLACE FUNCTION file_checkpoint_urls_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "${URLS}" ("url_hash", "file_url") SELECT "url_hash", "file_url" FROM inserted ON CONFLICT ("url_hash") DO NOTHING;
  RETURN NULL;
END
$$`,
  `CREATE OR REPLACE FUNCTION file_checkpoint_urls_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM "${URLS}" u USING deleted d WHERE u."url_hash" = d."url_hash";
  RETURN NULL;
END
$$`,
  `CREATE OR REPLACE FUNCTION file_checkpoint_urls_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE "${URLS}";
  RETURN NULL;
END
$$`,
  `DROP TRIGGER IF EXISTS file_checkpoint_urls_insert ON "${TABLE}"`,
  `CREATE TRIGGER file_checkpoint_urls_insert AFTER INSERT ON "${TABLE}" REFERENCING NEW TABLE AS inserted
   FOR EACH STATEMENT EXECUTE FUNCTION file_checkpoint_urls_insert()`,
  `DROP TRIGGER IF EXISTS file_checkpoint_urls_delete ON "${TABLE}"`,
  `CREATE TRIGGER file_checkpoint_urls_delete AFTER DELETE ON "${TABLE}" REFERENCING OLD TABLE AS deleted
   FOR EACH STATEMENT EXECUTE FUNCTION file_checkpoint_urls_delete()`,
  `DROP TRIGGER IF EXISTS file_checkpoint_urls_truncate ON "${TABLE}"`,
  `CREATE TRIGGER file_checkpoint_urls_truncate AFTER TRUNCATE ON "${TABLE}" FOR EACH STATEMENT EXECUTE FUNCTION file_checkpoint_urls_truncate()`,
  `INSERT INTO "${URLS}" ("url_hash", "file_url") SELECT "url_hash", "file_url" FROM "${TABLE}" ON CONFLICT ("url_hash") DO NOTHING`,
];

const POSTGRES_URL_TABLE_DOWN = [
  `DROP TRIGGER IF EXISTS file_checkpoint_urls_insert ON "${TABLE}"`,
  `DROP TRIGGER IF EXISTS file_checkpoint_urls_delete ON "${TABLE}"`,
  `DROP TRIGGER IF EXISTS file_checkpoint_urls_truncate ON "${TABLE}"`,
  'DROP FUNCTION IF EXISTS file_checkpoint_urls_insert()',
  'DROP FUNCTION IF EXISTS file_checkpoint_urls_delete()',
  'DROP FUNCTION IF EXISTS file_checkpoint_urls_truncate()',
  `DROP TABLE IF EXISTS "${URLS}"`,
];

/**
 * Cheaper claims and completions: `file_checkpoints`' status and completed_at indexes become
 * partial (open files; completed files), and on PostgreSQL the URL trigram index moves to
 * `file_checkpoint_urls`, which the dashboard's search joins. Every dashboard query still reads
 * an index. Rows kept; safe to run twice.
 */
export class CheaperFileUpdates1765238400000 implements MigrationInterface {
  name = 'CheaperFileUpdates1765238400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    if (!table) return;
    for (const [old, replacement] of REPLACED) {
      if (!table.indices.some((index) => index.name === replacement.name)) await queryRunner.createIndex(TABLE, replacement.clone());
      if (table.indices.some((index) => index.name === old.name)) await queryRunner.dropIndex(TABLE, old.name!);
    }
    if (queryRunner.connection.options.type !== 'postgres') return;
    for (const statement of POSTGRES_URL_TABLE) await queryRunner.query(statement);
    await queryRunner.query(`DROP INDEX IF EXISTS "${OLD_TRIGRAMS}"`);
    // pg_trgm as the earlier migration found it: installed, or installable by this user.
    const [trigrams] = (await queryRunner.query(
      `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') AS installed,
              EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm')
              AND (has_database_privilege(current_database(), 'CREATE') OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) AS creatable`,
    )) as { installed: boolean; creatable: boolean }[];
    if (!trigrams.installed && !trigrams.creatable) return;
    if (!trigrams.installed) await queryRunner.query('CREATE EXTENSION IF NOT EXISTS pg_trgm');
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS "${URL_TRIGRAMS}" ON "${URLS}" USING gin ("file_url" gin_trgm_ops)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    if (!table) return;
    if (queryRunner.connection.options.type === 'postgres') {
      for (const statement of POSTGRES_URL_TABLE_DOWN) await queryRunner.query(statement);
      // The trigram index back on file_checkpoints, where the earlier migration makes it.
      await new DashboardSearchIndexes1765065600000().up(queryRunner);
    }
    for (const [old, replacement] of REPLACED) {
      if (!table.indices.some((index) => index.name === old.name)) await queryRunner.createIndex(TABLE, old.clone());
      if (table.indices.some((index) => index.name === replacement.name)) await queryRunner.dropIndex(TABLE, replacement.name!);
    }
  }
}
