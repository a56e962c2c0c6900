import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/** A source row an import with `invalid: 'skip'` left out, committed with the chunk it belongs to. */
@Entity('checkpoint_import_rejects')
export class ImportReject {
  /** The import batch id the row was rejected from. */
  @PrimaryColumn({ type: 'varchar', length: 255 })
  batch!: string;

  /** The row's position in the source, from 0. */
  @PrimaryColumn({ name: 'row_index', type: 'bigint', transformer: bigintNumber })
  rowIndex!: number;

  /** Why the row was rejected (the message an `INVALID_INPUT` error would have carried). */
  @Column({ type: 'text' })
  reason!: string;

  /** The row's source text, cut to at most 4,096 UTF-8 bytes at a character boundary. */
  @Column({ type: 'text' })
  raw!: string;
}
