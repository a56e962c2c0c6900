import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/** A digest-guarded import: which source bytes it is bound to and how far it has committed. */
@Entity('checkpoint_imports')
export class ImportJob {
  /** The import batch id. */
  @PrimaryColumn({ type: 'varchar', length: 255 })
  id!: string;

  /** SHA-256 hex of the source bytes. */
  @Column({ type: 'varchar', length: 64 })
  digest!: string;

  /** Index of the first source row not yet committed: where the next chunk must start. */
  @Column({ name: 'next_index', type: 'bigint', transformer: bigintNumber })
  nextIndex!: number;

  /** Rows in the source once validated (streaming imports), else null. */
  @Column({ name: 'total_rows', type: 'bigint', nullable: true, transformer: bigintNumber })
  totalRows!: number | null;

  /** Time of the latest commit (epoch ms); null for a batch made before it was kept. */
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

  /** When the import began (epoch ms); null for a batch made before it was kept. */
  @Column({ name: 'started_at', type: 'bigint', nullable: true, transformer: bigintNumber })
  startedAt!: number | null;

  /** `'active'`, `'paused'` or `'cancelled'` (see `pause`, `resume`, `cancel`). */
  @Column({ type: 'varchar', length: 16, default: 'active' })
  state!: string;

  /** Milliseconds the import spent waiting on a `throttle`, over every run. */
  @Column({ name: 'throttled_ms', type: 'bigint', default: 0, transformer: bigintNumber })
  throttledMs!: number;

  /** While a loop of the import waits on its throttle (a wait over a second), when the wait ends (epoch ms); null otherwise. */
  @Column({ name: 'throttled_until', type: 'bigint', nullable: true, transformer: bigintNumber })
  throttledUntil!: number | null;

  /**
   * The options hash of the pass 1 that validated the batch's file; a resume of the same file with
   * the same options skips validation. Null when pass 2 needs pass 1 again (or before it was kept).
   */
  @Column({ name: 'validated_options', type: 'varchar', length: 64, nullable: true })
  validatedOptions!: string | null;

  /**
   * The byte offset in the file of the next source row, committed with each chunk; null where the
   * reader does not know it (see docs/imports.md, "What a resume costs").
   */
  @Column({ name: 'next_offset', type: 'bigint', nullable: true, transformer: bigintNumber })
  nextOffset!: number | null;

  /**
   * The rows pass 1 found repeating a key, which pass 2 leaves out (records mode with invalid rows
   * skipped), kept with `validatedOptions` so that a resume skipping validation still leaves them
   * out; null when there were none (or too many to keep: a resume then validates again).
   */
  @Column({ name: 'repeated_rows', type: 'text', nullable: true })
  repeatedRows!: string | null;
}
