import { type MigrationInterface, type QueryRunner, Table, TableIndex } from 'typeorm';
import { exactTextColumns } from './exact-text-columns';

// The SQL functions repeat the manager's claim rules for workers written in other languages:
// same columns, same clock unit (epoch ms, here from the database server's clock), same states.
const NOW_MS = 'floor(extract(epoch from clock_timestamp()) * 1000)::bigint';
const DEFAULT_LEASE_MS = 300000;
const DEFAULT_MAX_RETRIES = 3;

const POSTGRES_FUNCTIONS = [
  `CREATE OR REPLACE FUNCTION claim_file_token(p_file_url text, p_file_type text, p_file_timestamp timestamptz, p_worker_id text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_now bigint := ${NOW_MS};
  v_token bigint;
BEGIN
  -- A lease that expired on the last allowed attempt makes a dead letter, never a row stuck in processing.
  UPDATE file_checkpoints SET status = 'failed', error_message = 'lease expired', lease_expires_at = NULL
   WHERE file_url = p_file_url AND status = 'processing' AND lease_expires_at <= v_now AND retry_count >= max_retries;
  INSERT INTO file_checkpoints AS f (file_url, file_type, file_timestamp, status, records_total, records_filtered,
      records_persisted, processing_time_ms, retry_count, max_retries, processed_by, claim_token, started_at,
      lease_expires_at, created_at)
  VALUES (p_file_url, p_file_type, floor(extract(epoch from p_file_timestamp) * 1000)::bigint, 'processing', 0, 0,
      0, 0, 0, ${DEFAULT_MAX_RETRIES}, p_worker_id, 1, v_now, v_now + ${DEFAULT_LEASE_MS}, v_now)
  ON CONFLICT (file_url) DO UPDATE SET
    retry_count = f.retry_count + CASE WHEN f.status = 'pending' THEN 0 ELSE 1 END,
    claim_token = f.claim_token + 1,
    processed_by = EXCLUDED.processed_by,
    started_at = EXCLUDED.started_at,
    lease_expires_at = EXCLUDED.lease_expires_at,
    status = 'processing'
  WHERE f.status = 'pending'
     OR (f.status = 'failed' AND f.retry_count < f.max_retries)
     OR (f.status = 'processing' AND f.lease_expires_at <= v_now AND f.retry_count < f.max_retries)
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
   WHERE file_url = p_file_url AND status = 'processing';
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
   WHERE file_url = p_file_url AND claim_token = p_claim_token AND status = 'processing';
  RETURN FOUND;
END
$$`,
  `CREATE OR REPLACE FUNCTION fail_file(p_file_url text, p_claim_token bigint, p_error_message text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE file_checkpoints SET status = 'failed', error_message = p_error_message, lease_expires_at = NULL
   WHERE file_url = p_file_url AND claim_token = p_claim_token AND status = 'processing';
  RETURN FOUND;
END
$$`,
  `CREATE OR REPLACE FUNCTION heartbeat_file(p_file_url text, p_claim_token bigint, p_lease_ms integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE file_checkpoints SET lease_expires_at = ${NOW_MS} + p_lease_ms
   WHERE file_url = p_file_url AND claim_token = p_claim_token AND status = 'processing';
  RETURN FOUND;
END
$$`,
];

// claim_file calls claim_file_token, so it is dropped first.
const POSTGRES_SIGNATURES = [
  'claim_file(text, text, timestamptz, text)',
  'claim_file_token(text, text, timestamptz, text)',
  'complete_file(text, integer, integer, integer, integer)',
  'complete_file(text, bigint, integer, integer, integer, integer)',
  'fail_file(text, bigint, text)',
  'heartbeat_file(text, bigint, integer)',
];

/**
 * `file_checkpoints` (file claims across workers) and, on PostgreSQL, the claim functions for
 * workers in other languages. Safe to run twice.
 */
export class FileCheckpoints1764547200000 implements MigrationInterface {
  name = 'FileCheckpoints1764547200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const text = await exactTextColumns(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'file_checkpoints',
        columns: [
          text({ name: 'file_url', type: 'varchar', length: '768', isPrimary: true }),
          text({ name: 'file_type', type: 'varchar', length: '255' }),
          { name: 'file_timestamp', type: 'bigint' },
          text({ name: 'status', type: 'varchar', length: '16', default: "'pending'" }),
          { name: 'records_total', type: 'bigint', default: 0 },
          { name: 'records_filtered', type: 'bigint', default: 0 },
          { name: 'records_persisted', type: 'bigint', default: 0 },
          { name: 'processing_time_ms', type: 'bigint', default: 0 },
          text({ name: 'error_message', type: 'text', isNullable: true }),
          { name: 'retry_count', type: 'integer', default: 0 },
          { name: 'max_retries', type: 'integer', default: DEFAULT_MAX_RETRIES },
          text({ name: 'processed_by', type: 'varchar', length: '255', isNullable: true }),
          { name: 'claim_token', type: 'bigint', default: 0 },
          { name: 'lease_expires_at', type: 'bigint', isNullable: true },
          { name: 'started_at', type: 'bigint', isNullable: true },
          { name: 'completed_at', type: 'bigint', isNullable: true },
          { name: 'created_at', type: 'bigint' },
        ],
        indices: [new TableIndex({ name: 'IDX_file_checkpoints_status', columnNames: ['status'] })],
      }),
      true,
    );
    if (queryRunner.connection.options.type === 'postgres') {
      for (const statement of POSTGRES_FUNCTIONS) await queryRunner.query(statement);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type === 'postgres') {
      for (const signature of POSTGRES_SIGNATURES) await queryRunner.query(`DROP FUNCTION IF EXISTS ${signature}`);
    }
    await queryRunner.dropTable('file_checkpoints', true);
  }
}
