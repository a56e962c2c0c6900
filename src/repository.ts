import type { EntityManager, Repository } from 'typeorm';
import { CheckpointJob } from '../entities';
import { eachBatch, type EachBatchOptions, type EachBatchResult, type Source } from './jobs/each-batch';
import { InvalidArgumentError } from './core/errors';
import type { Json } from './core/json';
import { list, type ListFilter, reset, status, type Status } from './jobs/status';
import { step } from './jobs/step';
import { eachPartition, type EachPartitionOptions, type EachPartitionResult, listPartitions, retryDead } from './jobs/partitions';
import type { PartitionInfo } from './jobs/partition-store';
import type { PartitionableSource } from './jobs/sql-source';
import { dataSourceOf, type Db, isEntityManager } from './core/transaction';

/** The package's functions with the `Db` argument bound to the repository's manager. */
export interface CheckpointRepositoryMethods {
  /** {@link eachBatch} on the repository's manager. */
  eachBatch<T>(
    name: string,
    source: Source<T>,
    limit: number,
    handler: (items: T[], tx: EntityManager) => unknown,
    options?: EachBatchOptions,
  ): Promise<EachBatchResult>;
  /** {@link eachPartition} on the repository's manager; it never joins a transaction, so from a transaction's repository it throws `INVALID_ARGUMENT`. */
  eachPartition<T>(
    name: string,
    source: PartitionableSource<T>,
    limit: number,
    handler: (items: T[], tx: EntityManager) => unknown,
    options?: EachPartitionOptions,
  ): Promise<EachPartitionResult>;
  /** {@link retryDead} on the repository's manager. */
  retryDead(name: string): Promise<number>;
  /** {@link listPartitions} on the repository's manager. */
  listPartitions(name: string): Promise<PartitionInfo[]>;
  /** {@link step} on the repository's manager. */
  step<T extends Json>(name: string, f: (tx: EntityManager) => Promise<T> | T): Promise<T>;
  /** {@link status} on the repository's manager. */
  status(name: string): Promise<Status | null>;
  /** {@link reset} on the repository's manager. */
  reset(name: string): Promise<boolean>;
  /** {@link list} on the repository's manager. */
  list(filter?: ListFilter): Promise<Status[]>;
}

/** What {@link getCheckpointRepository} returns: TypeORM's repository of {@link CheckpointJob} plus {@link CheckpointRepositoryMethods}. */
export type CheckpointRepository = Repository<CheckpointJob> & CheckpointRepositoryMethods;

/**
 * TypeORM's repository of `checkpoint_jobs`, extended with the job and step functions, for
 * services that inject repositories. From a transaction's manager, every call joins that transaction.
 * Throws `INVALID_ARGUMENT` if the DataSource's entities lack {@link checkpointEntities}.
 */
export function getCheckpointRepository(db: Db): CheckpointRepository {
  const dataSource = dataSourceOf(db);
  if (!dataSource.hasMetadata(CheckpointJob)) {
    throw new InvalidArgumentError(
      'getCheckpointRepository: this DataSource does not know CheckpointJob; add checkpointEntities to its entities.',
    );
  }
  const manager = isEntityManager(db) ? db : dataSource.manager;
  // `this.manager`, not the closure's: a repository TypeORM re-binds (e.g. withRepository) keeps working.
  return manager.getRepository(CheckpointJob).extend<CheckpointRepositoryMethods>({
    eachBatch(name, source, limit, handler, options) {
      return eachBatch(this.manager, name, source, limit, handler, options);
    },
    eachPartition(name, source, limit, handler, options) {
      return eachPartition(this.manager, name, source, limit, handler, options);
    },
    retryDead(name) {
      return retryDead(this.manager, name);
    },
    listPartitions(name) {
      return listPartitions(this.manager, name);
    },
    step(name, f) {
      return step(this.manager, name, f);
    },
    status(name) {
      return status(this.manager, name);
    },
    reset(name) {
      return reset(this.manager, name);
    },
    list(filter) {
      return list(this.manager, filter);
    },
  });
}
