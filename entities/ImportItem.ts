import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/** A row imported into the built-in table, keyed by (batch, id). */
@Entity('checkpoint_import_items')
export class ImportItem {
  @PrimaryColumn({ type: 'varchar', length: 255 })
  batch!: string;

  @PrimaryColumn({ type: 'varchar', length: 512 })
  id!: string;

  @Column({ type: 'bigint', transformer: bigintNumber })
  value!: number;
}
