import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';
import { epochMsDate } from './epoch-ms-date';

/**
 * Where a file is in its life: `failed` with no retries left is a dead letter; `cancelled` (by
 * `cancel`) is never claimed again until `requeue`.
 */
export type FileStatus = 'pending' | 'processing' | 'completed' | 'failed' | 'cancelled';

/**
 * The rows a claim may pick: pending, or failed/processing with retries left (claimNext's condition
 * implies it, and repeats it word for word so SQLite's planner sees the partial index applies).
 */
export function claimableIndexPredicate(quote: (column: string) => string = (column) => `"${column}"`): string {
  return `${quote('status')} = 'pending' OR (${quote('status')} IN ('failed', 'processing') AND ${quote('retry_count')} < ${quote('max_retries')})`;
}

/** The status index holds open files only: a completion, the commonest update, adds no entry to it. */
export const OPEN_STATUS_INDEX_PREDICATE = `"status" <> 'completed'`;
/** The completed_at index holds completed files only: a claim adds no entry to it. */
export const COMPLETED_INDEX_PREDICATE = `"status" = 'completed'`;
/**
 * Files failed or in flight on their last attempt: dead letters, and the claims whose expiry makes
 * one. Only a last attempt adds an entry (a claim or completion with retries left adds none).
 * Queries repeat a branch of it word for word so that SQLite's planner sees the index applies.
 */
export const LAST_ATTEMPTS_INDEX_PREDICATE = `("status" = 'failed' OR "status" = 'processing') AND "retry_count" >= "max_retries"`;

/**
 * One file of a multi-worker queue, identified by its URL (never a local path). Times are stored as
 * epoch milliseconds; `claimToken` fences stale workers, `leaseExpiresAt` frees crashed ones.
 */
@Entity('file_checkpoints')
@Index('IDX_file_checkpoints_open_status', ['status'], { where: OPEN_STATUS_INDEX_PREDICATE })
@Index('IDX_file_checkpoints_claim_order', ['createdAt', 'urlHash'], { where: claimableIndexPredicate() })
@Index('IDX_file_checkpoints_completed', ['completedAt'], { where: COMPLETED_INDEX_PREDICATE })
@Index('IDX_file_checkpoints_last_attempts', ['urlHash'], { where: LAST_ATTEMPTS_INDEX_PREDICATE })
export class FileCheckpoint {
  /**
   * The key: SHA-256 of the URL's UTF-8 bytes in lowercase hex. Long URLs exceed what MySQL (3,072
   * bytes) and PostgreSQL (2,704-byte btree entries) can index; reads compare the URL too.
   */
  @PrimaryColumn({ name: 'url_hash', type: 'varchar', length: 64 })
  urlHash?: string;

  /** The file's URL as registered (up to 4,096 characters). */
  @Column({ name: 'file_url', type: 'varchar', length: 4096 })
  fileUrl!: string;

  /** The caller's category for the file; `claimNext` and workers can filter on it. */
  @Column({ name: 'file_type', type: 'varchar', length: 255 })
  fileType!: string;

  /** The file's own timestamp, as registered (files are claimed oldest registration first, not by this). */
  @Column({ name: 'file_timestamp', type: 'bigint', transformer: epochMsDate })
  fileTimestamp!: Date;

  /** Where the file is in its life; see {@link FileStatus}. */
  @Column({ type: 'varchar', length: 16, default: 'pending' })
  status!: FileStatus;

  /** Records the handler reported reading (set on completion). */
  @Column({ name: 'records_total', type: 'bigint', default: 0, transformer: bigintNumber })
  recordsTotal!: number;

  /** Records the handler reported filtering out (set on completion). */
  @Column({ name: 'records_filtered', type: 'bigint', default: 0, transformer: bigintNumber })
  recordsFiltered!: number;

  /** Records the handler reported persisting (set on completion). */
  @Column({ name: 'records_persisted', type: 'bigint', default: 0, transformer: bigintNumber })
  recordsPersisted!: number;

  /** How long the completed attempt took, in milliseconds. */
  @Column({ name: 'processing_time_ms', type: 'bigint', default: 0, transformer: bigintNumber })
  processingTimeMs!: number;

  /** The latest failure's message; null if the file has not failed. */
  @Column({ name: 'error_message', type: 'text', nullable: true })
  errorMessage!: string | null;

  /** Re-claims so far: a file gets at most `1 + maxRetries` attempts. */
  @Column({ name: 'retry_count', type: 'integer', default: 0 })
  retryCount!: number;

  /** Stored when the row is created, so every manager agrees on what a dead letter is. */
  @Column({ name: 'max_retries', type: 'integer', default: 3 })
  maxRetries!: number;

  /** The worker id of the latest claim (informational; the claim token is what fences). */
  @Column({ name: 'processed_by', type: 'varchar', length: 255, nullable: true })
  processedBy!: string | null;

  /** Incremented by every successful claim; completion, failure and heartbeat must present it. */
  @Column({ name: 'claim_token', type: 'bigint', default: 0, transformer: bigintNumber })
  claimToken!: number;

  /** When the current claim's lease runs out; after that another worker may claim the file. */
  @Column({ name: 'lease_expires_at', type: 'bigint', nullable: true, transformer: epochMsDate })
  leaseExpiresAt!: Date | null;

  /** When the latest claim started. */
  @Column({ name: 'started_at', type: 'bigint', nullable: true, transformer: epochMsDate })
  startedAt!: Date | null;

  /** When the file was completed; null until then. */
  @Column({ name: 'completed_at', type: 'bigint', nullable: true, transformer: epochMsDate })
  completedAt!: Date | null;

  /** When the file was registered; claims take the oldest first. */
  @Column({ name: 'created_at', type: 'bigint', transformer: epochMsDate })
  createdAt!: Date;
}
