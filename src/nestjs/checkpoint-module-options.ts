import type { FactoryProvider, ModuleMetadata, Type } from '@nestjs/common';
import type { CheckpointManagerOptions } from '../claims/checkpoint-manager';
import type { CheckpointDashboardOptions } from './dashboard-mount';

/** What `CheckpointService` is configured with (the part `forRootAsync`'s factory may compute). */
export interface CheckpointServiceOptions {
  /** Defaults for every `CheckpointService.createManager()` (workerId, maxRetries, leaseMs). */
  manager?: CheckpointManagerOptions;
  /**
   * Makes the injected DataSource the package default (`setDefaultDataSource`) while the module
   * lives, so `@Checkpointed` also works on classes without a `dataSource`/`manager` property.
   */
  setDefaultDataSource?: boolean;
}

/** Which data source and scope the module binds to: fixed when the module is defined. */
export interface CheckpointModuleScope {
  /** The `name` given to `TypeOrmModule.forRoot`; omit for the default data source. */
  dataSource?: string;
  /** Registers the module globally, so every module can inject `CheckpointService`. */
  isGlobal?: boolean;
}

export interface CheckpointModuleOptions extends CheckpointServiceOptions, CheckpointModuleScope {
  /** Serves the dashboard at `path` (after the application's global prefix) on the HTTP adapter. */
  dashboard?: CheckpointDashboardOptions;
}

/** Implemented by a class given as `useClass`/`useExisting` to `CheckpointModule.forRootAsync`. */
export interface CheckpointOptionsFactory {
  createCheckpointOptions(): CheckpointServiceOptions | Promise<CheckpointServiceOptions>;
}

export interface CheckpointModuleAsyncOptions extends CheckpointModuleScope, Pick<ModuleMetadata, 'imports'> {
  /** Serves the dashboard at `path` (after the application's global prefix); fixed when the module is defined. */
  dashboard?: CheckpointDashboardOptions;
  useFactory?: (...args: any[]) => CheckpointServiceOptions | Promise<CheckpointServiceOptions>;
  inject?: FactoryProvider['inject'];
  useClass?: Type<CheckpointOptionsFactory>;
  useExisting?: Type<CheckpointOptionsFactory>;
}

/** The injection token of the resolved `CheckpointServiceOptions` inside one CheckpointModule. */
export const CHECKPOINT_SERVICE_OPTIONS = Symbol('CHECKPOINT_SERVICE_OPTIONS');
