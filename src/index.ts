export { checkpointEntities, CheckpointJob, ImportItem, ImportJob } from '../entities';
export { checkpointMigrations } from '../migrations';
export * from './errors';
export type { Json } from './json';
export { canonicalJson } from './json';
export type { Progress } from './progress';
export {
  type Db,
  currentManager,
  runInTransaction,
  setDefaultDataSource,
} from './transaction';
export { eachBatch, type EachBatchOptions, type EachBatchResult, type Page, type Source } from './each-batch';
export { sqlSource, type SqlSourceOptions } from './sql-source';
export { list, type ListFilter, reset, status, type Status } from './status';
export { step } from './step';
export { dataSourceOptionsFromUrl, DEFAULT_DATABASE_URL } from './data-source-options';
