import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/** A row imported into the built-in table, keyed by (batch, id). */
@Entity('checkpoint_import_items')
export class ImportItem {
  /** The import batch id the row belongs to. */
  @PrimaryColumn({ type: 'varchar', length: 255 })
  batch!: string;

  /** The row's id, unique within its batch. */
  @PrimaryColumn({ type: 'varchar', length: 512 })
  id!: string;

  /** The row's value (a safe integer). */
  @Column({ type: 'bigint', transformer: bigintNumber })
  value!: number;
}
