import { createHash } from 'node:crypto';
import { type MigrationInterface, type QueryRunner, TableColumn, type TableColumnOptions } from 'typeorm';
import { FileCheckpoints1764547200000 } from './1764547200000-FileCheckpoints';
import { exactTextColumns } from './exact-text-columns';

const TABLE = 'file_checkpoints';
/** Longest file URL, in characters: S3 keys alone may be 1,024 bytes, plus scheme and bucket. */
const URL_LENGTH = '4096';
const NOW_MS = 'floor(extract(epoch from clock_timestamp()) * 1000)::bigint';
const DEFAULT_LEASE_MS = 300000;
const DEFAULT_MAX_RETRIES = 3;
/** The key of a row: the SHA-256 of its URL's UTF-8 bytes, in lowercase hex, as the library computes it. */
const PG_URL_HASH = "encode(sha256(convert_to(p_file_url, 'UTF8')), 'hex')";
const BY_URL = `url_hash = ${PG_URL_HASH} AND file_url = p_file_url`;

// The same functions as 1764547200000's, keyed by the URL's hash (the URL itself compared too).
const POSTGRES_FUNCTIONS = [
  `CREATE OR REPLACE FUNCTION claim_file_token(p_file_url text, p_file_type text, p_file_timestamp timestamptz, p_worker_id text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint := ${NOW_MS};
  v_token bigint;
BEGIN
  -- A lease that expired on the last allowed attempt makes a dead letter, never a row stuck in processing.
  UPDATE file_checkpoints SET status = 'failed', error_message = 'lease expired', lease_expires_at = NULL
   WHERE ${BY_URL} AND status = 'processing' AND lease_expires_at <= v_now AND retry_count >= max_retries;
  INSERT INTO file_checkpoints AS f (url_hash, file_url, file_type, file_timestamp, status, records_total, records_filtered,
      records_persisted, processing_time_ms, retry_count, max_retries, processed_by, claim_token, started_at,
      lease_expires_at, created_at)
  VALUES (${PG_URL_HASH}, p_file_url, p_file_type, floor(extract(epoch from p_file_timestamp) * 1000)::bigint, 'processing', 0, 0,
      0, 0, 0, ${DEFAULT_MAX_RETRIES}, p_worker_id, 1, v_now, v_now + ${DEFAULT_LEASE_MS}, v_now)
  ON CONFLICT (url_hash) DO UPDATE SET
    retry_count = f.retry_count + CASE WHEN f.status = 'pending' THEN 0 ELSE 1 END,
    claim_token = f.claim_token + 1,
    processed_by = EXCLUDED.processed_by,
    started_at = EXCLUDED.started_at,
    lease_expires_at = EXCLUDED.lease_expires_at,
    status = 'processing'
  WHERE f.file_url = EXCLUDED.file_url AND (f.status = 'pending'
     OR (f.status = 'failed' AND f.retry_count < f.max_retries)
     OR (f.status = 'processing' AND f.lease_expires_at <= v_now AND f.retry_count < f.max_retries))
  RETURNING f.claim_token INTO v_token;
  RETURN v_token;
END
$$`,
  `CREATE OR REPLACE FUNCTION claim_file(p_file_url text, p_file_type text, p_file_timestamp timestamptz, p_worker_id text)
RETURNS boolean LANGUAGE sql AS $$
  SELECT claim_file_token(p_file_url, p_file_type, p_file_timestamp, p_worker_id) IS NOT NULL
$$`,
  // Unfenced, as in the seed: completes whichever claim is current. Prefer the fenced overload.
  `CREATE OR REPLACE FUNCTION complete_file(p_file_url text, p_records_total integer, p_records_filtered integer,
    p_records_persisted integer, p_processing_time_ms integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE file_checkpoints SET status = 'completed', records_total = p_records_total, records_filtered = p_records_filtered,
      records_persisted = p_records_persisted, processing_time_ms = p_processing_time_ms, completed_at = ${NOW_MS},
      lease_expires_at = NULL
   WHERE ${BY_URL} AND status = 'processing';
  RETURN FOUND;
END
$$`,
  `CREATE OR REPLACE FUNCTION complete_file(p_file_url text, p_claim_token bigint, p_records_total integer,
    p_records_filtered integer, p_records_persisted integer, p_processing_time_ms integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE file_checkpoints SET status = 'completed', records_total = p_records_total, records_filtered = p_records_filtered,
      records_persisted = p_records_persisted, processing_time_ms = p_processing_time_ms, completed_at = ${NOW_MS},
      lease_expires_at = NULL
   WHERE ${BY_URL} AND claim_token = p_claim_token AND status = 'processing';
  RETURN FOUND;
END
$$`,
  `CREATE OR REPLACE FUNCTION fail_file(p_file_url text, p_claim_token bigint, p_error_message text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE file_checkpoints SET status = 'failed', error_message = p_error_message, lease_expires_at = NULL
   WHERE ${BY_URL} AND claim_token = p_claim_token AND status = 'processing';
  RETURN FOUND;
END
$$`,
  `CREATE OR REPLACE FUNCTION heartbeat_file(p_file_url text, p_claim_token bigint, p_lease_ms integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE file_checkpoints SET lease_expires_at = ${NOW_MS} + p_lease_ms
   WHERE ${BY_URL} AND claim_token = p_claim_token AND status = 'processing';
  RETURN FOUND;
END
$$`,
];

/** Fills `url_hash` of every row: in SQL where the database has SHA-256, else row by row here. */
async function fillUrlHashes(queryRunner: QueryRunner): Promise<void> {
  const type = queryRunner.connection.options.type;
  if (type === 'postgres') {
    await queryRunner.query(`UPDATE file_checkpoints SET url_hash = encode(sha256(convert_to(file_url, 'UTF8')), 'hex')`);
  } else if (type === 'mysql' || type === 'mariadb') {
    await queryRunner.query('UPDATE file_checkpoints SET url_hash = SHA2(file_url, 256)');
  } else {
    const rows = (await queryRunner.query('SELECT file_url FROM file_checkpoints')) as { file_url: string }[];
    for (const { file_url: url } of rows) {
      await queryRunner.query('UPDATE file_checkpoints SET url_hash = ? WHERE file_url = ?', [
        createHash('sha256').update(url, 'utf8').digest('hex'),
        url,
      ]);
    }
  }
}

/**
 * Gives `file_url` a new length in place, rows kept (TypeORM's changeColumn drops and re-adds a
 * column whose length changes on PostgreSQL and MySQL; on SQLite it copies the table).
 */
async function resizeUrl(
  queryRunner: QueryRunner,
  text: (column: TableColumnOptions) => TableColumnOptions,
  length: string,
): Promise<void> {
  const type = queryRunner.connection.options.type;
  const column = text({ name: 'file_url', type: 'varchar', length });
  if (type === 'postgres') {
    await queryRunner.query(`ALTER TABLE "${TABLE}" ALTER COLUMN "file_url" TYPE varchar(${length})`);
  } else if (type === 'mysql' || type === 'mariadb') {
    const collation = column.collation === undefined ? '' : ` COLLATE ${column.collation}`;
    await queryRunner.query(`ALTER TABLE \`${TABLE}\` MODIFY \`file_url\` varchar(${length})${collation} NOT NULL`);
  } else {
    const fileUrl = (await queryRunner.getTable(TABLE))!.findColumnByName('file_url')!;
    await queryRunner.changeColumn(TABLE, fileUrl, new TableColumn(column));
  }
}

/**
 * File URLs of up to 4,096 characters on every database: `file_checkpoints` is keyed by the
 * SHA-256 of the URL (`url_hash`), with the URL kept beside it, because MySQL/MariaDB index keys
 * stop at 3,072 bytes and PostgreSQL btree entries at 2,704. Upgrades an existing table, rows
 * kept; on PostgreSQL it re-creates the claim functions over the new key. Safe to run twice.
 */
export class LongFileUrls1764720000000 implements MigrationInterface {
  name = 'LongFileUrls1764720000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    if (table && !table.findColumnByName('url_hash')) {
      const text = await exactTextColumns(queryRunner);
      const urlHash = (isNullable: boolean) => new TableColumn(text({ name: 'url_hash', type: 'varchar', length: '64', isNullable }));
      await queryRunner.addColumn(TABLE, urlHash(true));
      await fillUrlHashes(queryRunner);
      await queryRunner.changeColumn(TABLE, 'url_hash', urlHash(false));
      await queryRunner.dropPrimaryKey(TABLE);
      await resizeUrl(queryRunner, text, URL_LENGTH);
      await queryRunner.createPrimaryKey(TABLE, ['url_hash']);
    }
    if (queryRunner.connection.options.type === 'postgres' && (await queryRunner.hasTable(TABLE))) {
      for (const statement of POSTGRES_FUNCTIONS) await queryRunner.query(statement);
    }
  }

  /** Back to URL keys (768 characters at most: a longer URL makes this fail, changing nothing on PostgreSQL). */
  async down(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    if (!table?.findColumnByName('url_hash')) return;
    const text = await exactTextColumns(queryRunner);
    await queryRunner.dropPrimaryKey(TABLE);
    await resizeUrl(queryRunner, text, '768');
    await queryRunner.dropColumn(TABLE, 'url_hash');
    await queryRunner.createPrimaryKey(TABLE, ['file_url']);
    // The earlier migration's up() leaves the table as it is and re-creates its own functions.
    await new FileCheckpoints1764547200000().up(queryRunner);
  }
}
