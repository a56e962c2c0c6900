import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/**
 * A paused file type: `claimNext` and `work()` claim no file of it until it is resumed. The type
 * `'*'` pauses every type. Files in flight when it was paused finish.
 */
@Entity('checkpoint_file_types')
export class CheckpointFileType {
  /** The paused file type, or `'*'` for every type. */
  @PrimaryColumn({ name: 'file_type', type: 'varchar', length: 255 })
  fileType!: string;

  /** When it was paused (epoch ms). */
  @Column({ name: 'paused_at', type: 'bigint', transformer: bigintNumber })
  pausedAt!: number;
}
