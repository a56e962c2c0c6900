import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/** A digest-guarded import: which source bytes it is bound to and how far it has committed. */
@Entity('checkpoint_imports')
export class ImportJob {
  @PrimaryColumn({ type: 'varchar', length: 255 })
  id!: string;

  /** SHA-256 hex of the source bytes. */
  @Column({ type: 'varchar', length: 64 })
  digest!: string;

  @Column({ name: 'next_index', type: 'bigint', transformer: bigintNumber })
  nextIndex!: number;

  /** Rows in the source once validated (streaming imports), else null. */
  @Column({ name: 'total_rows', type: 'bigint', nullable: true, transformer: bigintNumber })
  totalRows!: number | null;

  @Column({ name: 'updated_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  updatedAt!: number | null;

  // The counts below are null for a batch made before they were kept (migration 1764979200000).

  /** Rows written (built-in rows, records written `into` a table or handed to a handler), over every run. */
  @Column({ name: 'written_rows', type: 'bigint', nullable: true, transformer: bigintNumber })
  writtenRows!: number | null;

  /** Source rows `map` skipped, over every run. */
  @Column({ name: 'skipped_rows', type: 'bigint', nullable: true, transformer: bigintNumber })
  skippedRows!: number | null;

  /** Chunks committed, over every run. */
  @Column({ type: 'bigint', nullable: true, transformer: bigintNumber })
  chunks!: number | null;

  @Column({ name: 'started_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  startedAt!: number | null;
}
