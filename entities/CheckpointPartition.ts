import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/**
 * One range of a partitioned job (`eachPartition`): keys after `lowerKey` up to `upperKey`, both
 * JSON text in the cursor's form (null = unbounded). Claimed with the file claims' rules: `status`,
 * `retryCount`/`maxRetries`, the fencing `claimToken` and `leaseExpiresAt` (epoch ms).
 */
@Entity('checkpoint_partitions')
@Index('IDX_checkpoint_partitions_status', ['status'])
export class CheckpointPartition {
  /** The partitioned job's name (its {@link CheckpointJob} row). */
  @PrimaryColumn({ name: 'job_name', type: 'varchar', length: 512 })
  jobName!: string;

  /** The range's place in key order, from 0. */
  @PrimaryColumn({ name: 'partition_index', type: 'integer' })
  partitionIndex!: number;

  /** JSON text of the key the range starts after (exclusive); null = from the first key. */
  @Column({ name: 'lower_key', type: 'text', nullable: true })
  lowerKey!: string | null;

  /** JSON text of the last key of the range (inclusive); null = to the last key. */
  @Column({ name: 'upper_key', type: 'text', nullable: true })
  upperKey!: string | null;

  /** JSON text of the range's last committed cursor; null before its first batch. */
  @Column({ type: 'text', nullable: true })
  cursor!: string | null;

  /** 'pending' | 'processing' | 'completed' | 'failed' (with no retries left: dead). */
  @Column({ type: 'varchar', length: 16, default: 'pending' })
  status!: string;

  /** Re-claims so far: a range gets at most `1 + maxRetries` attempts. */
  @Column({ name: 'retry_count', type: 'integer', default: 0 })
  retryCount!: number;

  /** Retries allowed after the first attempt (stored when the plan is made; default 3). */
  @Column({ name: 'max_retries', type: 'integer', default: 3 })
  maxRetries!: number;

  /** Incremented by every claim; the range's commits must present it (fences a stalled worker). */
  @Column({ name: 'claim_token', type: 'bigint', default: 0, transformer: bigintNumber })
  claimToken!: number;

  /** The worker id of the latest claim (informational). */
  @Column({ name: 'processed_by', type: 'varchar', length: 255, nullable: true })
  processedBy!: string | null;

  /** When the latest claim started (epoch ms); null before the first claim. */
  @Column({ name: 'started_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  startedAt!: number | null;

  /** When the current claim's lease runs out (epoch ms); after that another worker may take the range over. */
  @Column({ name: 'lease_expires_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  leaseExpiresAt!: number | null;

  /** The latest failure's message; null if the range has not failed. */
  @Column({ name: 'error_message', type: 'text', nullable: true })
  errorMessage!: string | null;

  /** Batches committed in this range, over every attempt. */
  @Column({ type: 'bigint', default: 0, transformer: bigintNumber })
  batches!: number;

  /** Items committed in this range, over every attempt. */
  @Column({ type: 'bigint', default: 0, transformer: bigintNumber })
  items!: number;

  /** Time of the range's latest change (epoch ms). */
  @Column({ name: 'updated_at', type: 'bigint', transformer: bigintNumber })
  updatedAt!: number;
}
