import type { FactoryProvider, ModuleMetadata, Type } from '@nestjs/common';
import type { CheckpointManagerOptions } from '../claims/checkpoint-manager';
import type { CheckpointDashboardOptions } from './dashboard-mount';
import type { RetentionOptions } from './retention';

/** What `CheckpointService` is configured with (the part `forRootAsync`'s factory may compute). */
export interface CheckpointServiceOptions {
  /** Defaults for every `CheckpointService.createManager()` (workerId, maxRetries, leaseMs). */
  manager?: CheckpointManagerOptions;
  /**
   * Makes the injected DataSource the package default (`setDefaultDataSource`) while the module
   * lives, so `@Checkpointed` also works on classes without a `dataSource`/`manager` property. Default false.
   */
  setDefaultDataSource?: boolean;
  /**
   * Prunes (`prune`) every `everyMs` what ended more than `olderThanMs` ago, in one application
   * instance at a time (the holder of a lease in `checkpoint_leases`). Off by default.
   */
  retention?: RetentionOptions;
}

/** Which data source and scope the module binds to: fixed when the module is defined. */
export interface CheckpointModuleScope {
  /** The `name` given to `TypeOrmModule.forRoot`; omit for the default data source. */
  dataSource?: string;
  /** Registers the module globally, so every module can inject `CheckpointService`. Default false. */
  isGlobal?: boolean;
}

/** Options of {@link CheckpointModule.forRoot}. */
export interface CheckpointModuleOptions extends CheckpointServiceOptions, CheckpointModuleScope {
  /** Serves the dashboard at `path` (after the application's global prefix) on the HTTP adapter. */
  dashboard?: CheckpointDashboardOptions;
}

/** Implemented by a class given as `useClass`/`useExisting` to `CheckpointModule.forRootAsync`. */
export interface CheckpointOptionsFactory {
  /** Returns the options the module's `CheckpointService` is configured with. */
  createCheckpointOptions(): CheckpointServiceOptions | Promise<CheckpointServiceOptions>;
}

/** Options of {@link CheckpointModule.forRootAsync}: the scope and dashboard are fixed, the service options come from a factory, a class or an existing provider. */
export interface CheckpointModuleAsyncOptions extends CheckpointModuleScope, Pick<ModuleMetadata, 'imports'> {
  /** Serves the dashboard at `path` (after the application's global prefix); fixed when the module is defined. */
  dashboard?: CheckpointDashboardOptions;
  /** Computes the service options from the providers in `inject`. */
  useFactory?: (...args: any[]) => CheckpointServiceOptions | Promise<CheckpointServiceOptions>;
  /** The providers `useFactory` is called with, in order. */
  inject?: FactoryProvider['inject'];
  /** A class the module instantiates to create the options. */
  useClass?: Type<CheckpointOptionsFactory>;
  /** An existing provider (from `imports`) that creates the options. */
  useExisting?: Type<CheckpointOptionsFactory>;
}

/** The injection token of the resolved `CheckpointServiceOptions` inside one CheckpointModule. */
export const CHECKPOINT_SERVICE_OPTIONS = Symbol('CHECKPOINT_SERVICE_OPTIONS');
