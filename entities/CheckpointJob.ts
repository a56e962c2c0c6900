import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/** One batch job (`eachBatch`) or memoised step (`step`), keyed by its name. */
@Entity('checkpoint_jobs')
@Index('IDX_checkpoint_jobs_kind_done_updated_at', ['kind', 'done', 'updatedAt'])
export class CheckpointJob {
  @PrimaryColumn({ type: 'varchar', length: 512 })
  name!: string;

  /** 'batch' or 'step'. */
  @Column({ type: 'varchar', length: 16 })
  kind!: string;

  @Column({ type: 'boolean', default: false })
  done!: boolean;

  /** JSON text of the last committed cursor (batch jobs). */
  @Column({ type: 'text', nullable: true })
  cursor!: string | null;

  /** JSON text of the recorded result (steps). */
  @Column({ type: 'text', nullable: true })
  value!: string | null;

  @Column({ type: 'varchar', length: 512, nullable: true })
  fingerprint!: string | null;

  @Column({ type: 'bigint', default: 0, transformer: bigintNumber })
  batches!: number;

  @Column({ type: 'bigint', default: 0, transformer: bigintNumber })
  items!: number;

  /** Milliseconds since the Unix epoch. */
  @Column({ name: 'started_at', type: 'bigint', transformer: bigintNumber })
  startedAt!: number;

  @Column({ name: 'updated_at', type: 'bigint', transformer: bigintNumber })
  updatedAt!: number;

  @Column({ name: 'finished_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  finishedAt!: number | null;
}
