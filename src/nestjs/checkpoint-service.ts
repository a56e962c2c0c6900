import type { OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { DataSource, EntityManager, EntityTarget } from 'typeorm';
import { CheckpointManager, type CheckpointManagerOptions } from '../claims/checkpoint-manager';
import { eachBatch, type EachBatchOptions, type EachBatchResult, type Source } from '../jobs/each-batch';
import { applyChunk } from '../import/apply-chunk';
import { begin } from '../import/begin';
import { importAll, type ImportAllOptions } from '../import/import-all';
import { importFile, type ImportFileOptions, type ImportFileResult } from '../import/import-file';
import { checkpoint, values } from '../import/import-state';
import { replaceImport } from '../import/replace-import';
import type { Row } from '../import/row';
import type { Json } from '../core/json';
import { type CheckpointRepository, getCheckpointRepository } from '../repository';
import { type PartitionableSource, sqlSource, type SqlSourceOptions } from '../jobs/sql-source';
import { list, type ListFilter, reset, status, type Status } from '../jobs/status';
import { step } from '../jobs/step';
import { eachPartition, type EachPartitionOptions, type EachPartitionResult, listPartitions, retryDead } from '../jobs/partitions';
import type { PartitionInfo } from '../jobs/partition-store';
import { currentManager, getDefaultDataSource, runInTransaction, setDefaultDataSource } from '../core/transaction';
import type { CheckpointServiceOptions } from './checkpoint-module-options';
import { prune, type PruneOptions, type PruneResult } from '../control/prune';
import { cancel, pause, resume } from '../control/pause';

/**
 * The package's functions bound to the module's DataSource, for injection into Nest providers. A
 * thin shell: every method delegates to the plain function of the same name, so it joins the
 * transaction active in the async context (`runInTransaction`) exactly as that function does.
 */
export class CheckpointService implements OnModuleInit, OnModuleDestroy {
  constructor(
    /** The DataSource injected from `TypeOrmModule` (public, so `@Checkpointed` finds it here too). */
    readonly dataSource: DataSource,
    private readonly options: CheckpointServiceOptions = {},
  ) {}

  /** With `setDefaultDataSource`, makes this DataSource the package default. */
  onModuleInit(): void {
    if (this.options.setDefaultDataSource) setDefaultDataSource(this.dataSource);
  }

  /** Clears the package default if this module set it and it is still this DataSource. */
  onModuleDestroy(): void {
    // Only undo what this module did: another module may have set its own default since.
    if (this.options.setDefaultDataSource && getDefaultDataSource() === this.dataSource) setDefaultDataSource(null);
  }

  /** {@link prune} on the module's DataSource. */
  prune(options: PruneOptions): Promise<PruneResult> {
    return prune(this.dataSource, options);
  }

  /** {@link step} on the module's DataSource. */
  step<T extends Json>(name: string, f: (tx: EntityManager) => Promise<T> | T): Promise<T> {
    return step(this.dataSource, name, f);
  }

  /** {@link eachBatch} on the module's DataSource. */
  eachBatch<T>(
    name: string,
    source: Source<T>,
    limit: number,
    handler: (items: T[], tx: EntityManager) => unknown,
    options?: EachBatchOptions,
  ): Promise<EachBatchResult> {
    return eachBatch(this.dataSource, name, source, limit, handler, options);
  }

  /** {@link eachPartition} on the module's DataSource: one job split into ranges across every process that calls it (never inside a transaction). */
  eachPartition<T>(
    name: string,
    source: PartitionableSource<T>,
    limit: number,
    handler: (items: T[], tx: EntityManager) => unknown,
    options?: EachPartitionOptions,
  ): Promise<EachPartitionResult> {
    return eachPartition(this.dataSource, name, source, limit, handler, options);
  }

  /** {@link retryDead} on the module's DataSource. */
  retryDead(name: string): Promise<number> {
    return retryDead(this.dataSource, name);
  }

  /** {@link listPartitions} on the module's DataSource. */
  listPartitions(name: string): Promise<PartitionInfo[]> {
    return listPartitions(this.dataSource, name);
  }

  /** {@link sqlSource} on the module's DataSource. */
  sqlSource(
    table: string | EntityTarget<unknown>,
    key: string | string[],
    options?: SqlSourceOptions,
  ): Promise<PartitionableSource<Record<string, unknown>>> {
    return sqlSource(this.dataSource, table, key, options);
  }

  /** {@link status} on the module's DataSource. */
  status(name: string): Promise<Status | null> {
    return status(this.dataSource, name);
  }

  /** {@link reset} on the module's DataSource. */
  reset(name: string): Promise<boolean> {
    return reset(this.dataSource, name);
  }

  /** {@link pause} on the module's DataSource. */
  pause(name: string): Promise<boolean> {
    return pause(this.dataSource, name);
  }

  /** {@link resume} on the module's DataSource. */
  resume(name: string): Promise<boolean> {
    return resume(this.dataSource, name);
  }

  /** {@link cancel} on the module's DataSource. */
  cancel(name: string): Promise<boolean> {
    return cancel(this.dataSource, name);
  }

  /** {@link list} on the module's DataSource. */
  list(filter?: ListFilter): Promise<Status[]> {
    return list(this.dataSource, filter);
  }

  /** {@link importFile} on the module's DataSource. */
  importFile(batch: string, path: string, options?: ImportFileOptions): Promise<ImportFileResult> {
    return importFile(this.dataSource, batch, path, options);
  }

  /** {@link importAll} on the module's DataSource. */
  importAll(batch: string, raw: Uint8Array | string, options?: ImportAllOptions): Promise<number> {
    return importAll(this.dataSource, batch, raw, options);
  }

  /** {@link begin} on the module's DataSource. */
  begin(batch: string, digest: string): Promise<number> {
    return begin(this.dataSource, batch, digest);
  }

  /** {@link applyChunk} on the module's DataSource. */
  applyChunk(batch: string, start: number, rows: Row[], fault?: (index: number) => void): Promise<number> {
    return applyChunk(this.dataSource, batch, start, rows, fault);
  }

  /** {@link checkpoint} on the module's DataSource. */
  checkpoint(batch: string): Promise<number | null> {
    return checkpoint(this.dataSource, batch);
  }

  /** {@link values} on the module's DataSource. */
  values(batch: string): Promise<[string, number][]> {
    return values(this.dataSource, batch);
  }

  /** {@link replaceImport} on the module's DataSource. */
  replaceImport(batch: string, digest: string): Promise<void> {
    return replaceImport(this.dataSource, batch, digest);
  }

  /** A `CheckpointManager` for file claims on this DataSource; `options` override the module's `manager` defaults. */
  createManager(options?: CheckpointManagerOptions): CheckpointManager {
    return new CheckpointManager(this.dataSource, { ...this.options.manager, ...options });
  }

  /** `checkpoint_jobs`' repository with the job and step functions bound to it. */
  repository(): CheckpointRepository {
    return getCheckpointRepository(this.dataSource);
  }

  /** {@link runInTransaction} on the module's DataSource. */
  runInTransaction<T>(fn: (tx: EntityManager) => Promise<T>): Promise<T> {
    return runInTransaction(this.dataSource, fn);
  }

  /** The active transaction's manager in this async context, else the DataSource's. */
  currentManager(): EntityManager {
    return currentManager(this.dataSource);
  }
}
