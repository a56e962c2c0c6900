import { Inject } from '@nestjs/common';
import { CheckpointService } from './checkpoint-service';

/**
 * The token `CheckpointService` is provided under: the class itself for the default data source,
 * a per-name string otherwise (as `@nestjs/typeorm`'s `getDataSourceToken`), so one application
 * can hold a CheckpointModule per data source.
 */
export function getCheckpointServiceToken(dataSource?: string): typeof CheckpointService | string {
  return dataSource === undefined || dataSource === 'default' ? CheckpointService : `${dataSource}CheckpointService`;
}

/** Injects the `CheckpointService` of a named data source (`CheckpointModule.forRoot({ dataSource })`). */
export function InjectCheckpointService(dataSource?: string): PropertyDecorator & ParameterDecorator {
  return Inject(getCheckpointServiceToken(dataSource));
}
