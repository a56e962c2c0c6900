import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintNumber } from './bigint-number';

/**
 * A lease: which instance of an application holds `name` (e.g. the NestJS retention timer) until
 * `expiresAt`. Taken and renewed with one conditional UPDATE, so one instance at a time holds it.
 */
@Entity('checkpoint_leases')
export class CheckpointLease {
  /** What the lease is for (e.g. `retention`). */
  @PrimaryColumn({ type: 'varchar', length: 255 })
  name!: string;

  /** The id of the instance holding it (empty when nobody has taken it yet). */
  @Column({ type: 'varchar', length: 255 })
  holder!: string;

  /** When the lease runs out (epoch ms); after that another instance may take it. */
  @Column({ name: 'expires_at', type: 'bigint', transformer: bigintNumber })
  expiresAt!: number;
}
