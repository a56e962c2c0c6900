/**
 * Crash-safe, exactly-once long-running work for TypeORM: batch jobs that resume where they
 * stopped ({@link eachBatch}, {@link eachPartition}), memoised steps ({@link step},
 * {@link Checkpointed}), digest-guarded imports ({@link importFile}), file claims across workers
 * ({@link CheckpointManager}) and a dashboard ({@link createDashboard}). Add
 * {@link checkpointEntities} and {@link checkpointMigrations} to your DataSource first. Every error
 * is a {@link CheckpointError} with a stable `code`.
 *
 * @module typeorm-checkpoint
 */
export {
  checkpointEntities,
  CheckpointFileType,
  CheckpointJob,
  CheckpointLease,
  CheckpointPartition,
  FileCheckpoint,
  type FileStatus,
  ImportItem,
  ImportJob,
} from '../entities';
export { checkpointMigrations } from '../migrations';
export * from './core/errors';
export type { Json } from './core/json';
export { canonicalJson } from './core/json';
export type { Progress } from './core/progress';
export { type Db, currentManager, getDefaultDataSource, runInTransaction, setDefaultDataSource } from './core/transaction';
export { eachBatch, type EachBatchOptions, type EachBatchResult, type Page, type Source } from './jobs/each-batch';
export { type Partitioning, type PartitionableSource, sqlSource, type SqlSourceOptions } from './jobs/sql-source';
export { eachPartition, type EachPartitionOptions, type EachPartitionResult, listPartitions, retryDead } from './jobs/partitions';
export type { PartitionInfo, RangeState } from './jobs/partition-store';
export { list, type ListFilter, reset, status, type Status } from './jobs/status';
export { step } from './jobs/step';
export { cancel, pause, resume } from './control/pause';
export type { ControlState, StopReason } from './control/job-state';
export type { ControlOptions } from './control/loop-control';
export { rowsPerSecond, type Throttle, type ThrottleInfo } from './control/throttle';
export { replicaLag, type ReplicaLagOptions } from './control/replica-lag';
export {
  DEFAULT_PRUNE_KINDS,
  prune,
  PRUNE_BATCH_ROWS,
  PRUNE_KINDS,
  type PruneKind,
  type PruneOptions,
  type PruneResult,
} from './control/prune';
export { Checkpointed, type CheckpointedOptions } from './checkpointed';
export { type CheckpointRepository, type CheckpointRepositoryMethods, getCheckpointRepository } from './repository';
export { dataSourceOptionsFromUrl, DEFAULT_DATABASE_URL } from './data-source-options';
export type { Row } from './import/row';
export { parseRows } from './import/parse-rows';
export { fileDigest, sourceDigest } from './import/source-digest';
export { begin } from './import/begin';
export { applyChunk } from './import/apply-chunk';
export { checkpoint, values } from './import/import-state';
export { importAll, type ImportAllOptions } from './import/import-all';
export { type ImportFileOptions, type ImportFileResult, type ImportFormat, importFile } from './import/import-file';
export { replaceImport } from './import/replace-import';
export { ImportReject } from '../entities';
export type { RecordsOptions } from './import/records/import-records';
export type { RowError, RowErrorGroup } from './import/records/error-summary';
export type { CsvOptions } from './import/records/record-readers';
export {
  CheckpointManager,
  type CheckpointManagerOptions,
  type ClaimDb,
  type HandlerStats,
  type ProcessFileResult,
} from './claims/checkpoint-manager';
export type { ClaimSummary, FileRef, FileTypeOptions, ProcessingStats } from './claims/claim-store';
export type { FileHandler, FileHandlerContext, Worker, WorkerSummary, WorkOptions } from './claims/worker';
export * from './dashboard';
