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
  @PrimaryColumn({ name: 'job_name', type: 'varchar', length: 512 })
  jobName!: string;

  /** The range's place in key order, from 0. */
  @PrimaryColumn({ name: 'partition_index', type: 'integer' })
  partitionIndex!: number;

  @Column({ name: 'lower_key', type: 'text', nullable: true })
  lowerKey!: string | null;

  @Column({ name: 'upper_key', type: 'text', nullable: true })
  upperKey!: string | null;

  /** JSON text of the range's last committed cursor; null before its first batch. */
  @Column({ type: 'text', nullable: true })
  cursor!: string | null;

  /** 'pending' | 'processing' | 'completed' | 'failed' (with no retries left: dead). */
  @Column({ type: 'varchar', length: 16, default: 'pending' })
  status!: string;

  @Column({ name: 'retry_count', type: 'integer', default: 0 })
  retryCount!: number;

  @Column({ name: 'max_retries', type: 'integer', default: 3 })
  maxRetries!: number;

  @Column({ name: 'claim_token', type: 'bigint', default: 0, transformer: bigintNumber })
  claimToken!: number;

  @Column({ name: 'processed_by', type: 'varchar', length: 255, nullable: true })
  processedBy!: string | null;

  @Column({ name: 'started_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  startedAt!: number | null;

  @Column({ name: 'lease_expires_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  leaseExpiresAt!: number | null;

  @Column({ name: 'error_message', type: 'text', nullable: true })
  errorMessage!: string | null;

  @Column({ type: 'bigint', default: 0, transformer: bigintNumber })
  batches!: number;

  @Column({ type: 'bigint', default: 0, transformer: bigintNumber })
  items!: number;

  @Column({ name: 'updated_at', type: 'bigint', transformer: bigintNumber })
  updatedAt!: number;
}
