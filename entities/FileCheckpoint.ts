import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';
import { epochMsDate } from './epoch-ms-date';

/** Where a file is in its life: `failed` with no retries left is a dead letter. */
export type FileStatus = 'pending' | 'processing' | 'completed' | 'failed';

/**
 * One file of a multi-worker queue, identified by its URL (never a local path). Times are stored as
 * epoch milliseconds; `claimToken` fences stale workers, `leaseExpiresAt` frees crashed ones.
 */
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

@Entity('file_checkpoints')
@Index('IDX_file_checkpoints_open_status', ['status'], { where: OPEN_STATUS_INDEX_PREDICATE })
@Index('IDX_file_checkpoints_claim_order', ['createdAt', 'urlHash'], { where: claimableIndexPredicate() })
@Index('IDX_file_checkpoints_completed', ['completedAt'], { where: COMPLETED_INDEX_PREDICATE })
export class FileCheckpoint {
  /**
   * The key: SHA-256 of the URL's UTF-8 bytes in lowercase hex. Long URLs exceed what MySQL (3,072
   * bytes) and PostgreSQL (2,704-byte btree entries) can index; reads compare the URL too.
   */
  @PrimaryColumn({ name: 'url_hash', type: 'varchar', length: 64 })
  urlHash?: string;

  @Column({ name: 'file_url', type: 'varchar', length: 4096 })
  fileUrl!: string;

  @Column({ name: 'file_type', type: 'varchar', length: 255 })
  fileType!: string;

  @Column({ name: 'file_timestamp', type: 'bigint', transformer: epochMsDate })
  fileTimestamp!: Date;

  @Column({ type: 'varchar', length: 16, default: 'pending' })
  status!: FileStatus;

  @Column({ name: 'records_total', type: 'bigint', default: 0, transformer: bigintNumber })
  recordsTotal!: number;

  @Column({ name: 'records_filtered', type: 'bigint', default: 0, transformer: bigintNumber })
  recordsFiltered!: number;

  @Column({ name: 'records_persisted', type: 'bigint', default: 0, transformer: bigintNumber })
  recordsPersisted!: number;

  @Column({ name: 'processing_time_ms', type: 'bigint', default: 0, transformer: bigintNumber })
  processingTimeMs!: number;

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

  @Column({ name: 'lease_expires_at', type: 'bigint', nullable: true, transformer: epochMsDate })
  leaseExpiresAt!: Date | null;

  @Column({ name: 'started_at', type: 'bigint', nullable: true, transformer: epochMsDate })
  startedAt!: Date | null;

  @Column({ name: 'completed_at', type: 'bigint', nullable: true, transformer: epochMsDate })
  completedAt!: Date | null;

  @Column({ name: 'created_at', type: 'bigint', transformer: epochMsDate })
  createdAt!: Date;
}
