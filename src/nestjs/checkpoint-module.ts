import { type DynamicModule, Module, type ModuleMetadata, type Provider } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, Reflector } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { checkpointEntities } from '../../entities';
import { InvalidArgumentError } from '../core/errors';
import {
  CHECKPOINT_SERVICE_OPTIONS,
  type CheckpointModuleAsyncOptions,
  type CheckpointModuleOptions,
  type CheckpointModuleScope,
  type CheckpointOptionsFactory,
  type CheckpointServiceOptions,
} from './checkpoint-module-options';
import { CheckpointService } from './checkpoint-service';
import { getCheckpointServiceToken } from './checkpoint-service-token';
import {
  CHECKPOINT_DASHBOARD_DATA_SOURCE,
  CHECKPOINT_DASHBOARD_OPTIONS,
  checkDashboardOptions,
  CheckpointDashboardMount,
} from './dashboard-mount';
import { FileProcessorHost } from './file-processor-host';
import { checkRetentionOptions, RetentionHost } from './retention';

/**
 * Registers the checkpoint entities on a `TypeOrmModule` data source and provides
 * `CheckpointService` bound to it. The data source itself (with `checkpointMigrations`) stays the
 * application's `TypeOrmModule.forRoot`.
 */
@Module({})
export class CheckpointModule {
  /** The module for one data source, with fixed options. */
  static forRoot(options: CheckpointModuleOptions = {}): DynamicModule {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('CheckpointModule.forRoot(options): options must be an object.');
    }
    const { dataSource, isGlobal, dashboard, ...serviceOptions } = options;
    if (serviceOptions.retention !== undefined) checkRetentionOptions(serviceOptions.retention);
    return CheckpointModule.build(
      { dataSource, isGlobal },
      [],
      [{ provide: CHECKPOINT_SERVICE_OPTIONS, useValue: serviceOptions }, ...dashboardProviders(dashboard, dataSource)],
    );
  }

  /** The module for one data source, with the service options computed when the application starts (throws `INVALID_ARGUMENT` without `useFactory`, `useClass` or `useExisting`). */
  static forRootAsync(options: CheckpointModuleAsyncOptions): DynamicModule {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('CheckpointModule.forRootAsync(options): options must be an object.');
    }
    return CheckpointModule.build(options, options.imports ?? [], [
      ...optionsProviders(options),
      ...dashboardProviders(options.dashboard, options.dataSource),
    ]);
  }

  private static build(
    scope: CheckpointModuleScope,
    imports: NonNullable<ModuleMetadata['imports']>,
    providers: Provider[],
  ): DynamicModule {
    if (scope.dataSource !== undefined && (typeof scope.dataSource !== 'string' || scope.dataSource === '')) {
      throw new InvalidArgumentError('CheckpointModule: dataSource must be the name given to TypeOrmModule.forRoot.');
    }
    // forFeature adds the entities to the data source under autoLoadEntities and provides their repositories.
    const entities = TypeOrmModule.forFeature(checkpointEntities, scope.dataSource);
    const token = getCheckpointServiceToken(scope.dataSource);
    return {
      module: CheckpointModule,
      global: scope.isGlobal === true,
      imports: [...imports, entities, DiscoveryModule],
      providers: [
        ...providers,
        {
          provide: token,
          useFactory: (dataSource: DataSource, serviceOptions: CheckpointServiceOptions) =>
            new CheckpointService(dataSource, serviceOptions),
          inject: [getDataSourceToken(scope.dataSource), CHECKPOINT_SERVICE_OPTIONS],
        },
        {
          // Runs the application's @FileProcessor providers (their lifecycle follows the application's).
          provide: FileProcessorHost,
          useFactory: (discovery: DiscoveryService, reflector: Reflector, service: CheckpointService) =>
            new FileProcessorHost(discovery, reflector, service, scope.dataSource),
          inject: [DiscoveryService, Reflector, token],
        },
        {
          // Prunes on a timer under a lease when the options ask for retention.
          provide: RetentionHost,
          useFactory: (service: CheckpointService, serviceOptions: CheckpointServiceOptions) =>
            new RetentionHost(service, serviceOptions.retention),
          inject: [token, CHECKPOINT_SERVICE_OPTIONS],
        },
      ],
      exports: [token, entities],
    };
  }
}

/** The dashboard's mount (after the global prefix) on the module's data source, when asked for. */
function dashboardProviders(dashboard: unknown, dataSource: string | undefined): Provider[] {
  if (dashboard === undefined) return [];
  checkDashboardOptions(dashboard);
  return [
    { provide: CHECKPOINT_DASHBOARD_OPTIONS, useValue: dashboard },
    { provide: CHECKPOINT_DASHBOARD_DATA_SOURCE, useExisting: getDataSourceToken(dataSource) },
    CheckpointDashboardMount,
  ];
}

function optionsProviders(options: CheckpointModuleAsyncOptions): Provider[] {
  const fromFactory = (factory: CheckpointOptionsFactory) => factory.createCheckpointOptions();
  if (options.useFactory) {
    return [{ provide: CHECKPOINT_SERVICE_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] }];
  }
  if (options.useExisting) {
    return [{ provide: CHECKPOINT_SERVICE_OPTIONS, useFactory: fromFactory, inject: [options.useExisting] }];
  }
  if (options.useClass) {
    return [
      { provide: options.useClass, useClass: options.useClass },
      { provide: CHECKPOINT_SERVICE_OPTIONS, useFactory: fromFactory, inject: [options.useClass] },
    ];
  }
  throw new InvalidArgumentError('CheckpointModule.forRootAsync needs useFactory, useClass or useExisting.');
}
