import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/** One batch job (`eachBatch`), memoised step (`step`) or partitioned job (`eachPartition`), keyed by its name. */
@Entity('checkpoint_jobs')
@Index('IDX_checkpoint_jobs_kind_done_updated_at', ['kind', 'done', 'updatedAt'])
export class CheckpointJob {
  /** The job's name, as passed to `eachBatch`, `step` or `eachPartition` (up to 512 characters). */
  @PrimaryColumn({ type: 'varchar', length: 512 })
  name!: string;

  /** `'batch'`, `'step'` or `'partitioned'` (an `eachPartition` job; its ranges are {@link CheckpointPartition} rows). */
  @Column({ type: 'varchar', length: 16 })
  kind!: string;

  /** True once the job has finished (a batch job's source is exhausted, a step's value is recorded). */
  @Column({ type: 'boolean', default: false })
  done!: boolean;

  /** JSON text of the last committed cursor (batch jobs). */
  @Column({ type: 'text', nullable: true })
  cursor!: string | null;

  /** JSON text of the recorded result (steps). */
  @Column({ type: 'text', nullable: true })
  value!: string | null;

  /** The fingerprint the job was started with; a resume with a different one throws `FINGERPRINT_MISMATCH`. */
  @Column({ type: 'varchar', length: 512, nullable: true })
  fingerprint!: string | null;

  /** Batches committed so far, over every run. */
  @Column({ type: 'bigint', default: 0, transformer: bigintNumber })
  batches!: number;

  /** Items committed so far, over every run. */
  @Column({ type: 'bigint', default: 0, transformer: bigintNumber })
  items!: number;

  /** Milliseconds since the Unix epoch. */
  @Column({ name: 'started_at', type: 'bigint', transformer: bigintNumber })
  startedAt!: number;

  /** Time of the latest commit (epoch ms). */
  @Column({ name: 'updated_at', type: 'bigint', transformer: bigintNumber })
  updatedAt!: number;

  /** When the job finished (epoch ms); null while it is not done. */
  @Column({ name: 'finished_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  finishedAt!: number | null;

  /** `'active'`, `'paused'` or `'cancelled'` (batch and partitioned jobs; see `pause`, `resume`, `cancel`); `done` says finished. */
  @Column({ type: 'varchar', length: 16, default: 'active' })
  state!: string;

  /** Milliseconds the job's loops spent waiting on a `throttle`, over every run. */
  @Column({ name: 'throttled_ms', type: 'bigint', default: 0, transformer: bigintNumber })
  throttledMs!: number;

  /** While a loop of the job waits on its throttle (a wait over a second), when the wait ends (epoch ms); null otherwise. */
  @Column({ name: 'throttled_until', type: 'bigint', nullable: true, transformer: bigintNumber })
  throttledUntil!: number | null;

  /** Rows the job will visit: its source's estimate while it runs (`totalEstimated`), its item count once done; null when unknown. */
  @Column({ type: 'bigint', nullable: true, transformer: bigintNumber })
  total!: number | null;

  /** True while `total` is the source's estimate, false once the job ended (then it is the item count). */
  @Column({ name: 'total_estimated', type: 'boolean', default: false })
  totalEstimated!: boolean;
}
