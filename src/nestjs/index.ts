/**
 * The NestJS integration: {@link CheckpointModule} registers the entities on a `TypeOrmModule` data
 * source and provides {@link CheckpointService}; {@link FileProcessor} runs a claim worker per
 * provider. A separate entry point, so the main one never loads Nest.
 *
 * @module typeorm-checkpoint/nestjs
 */
export { CheckpointModule } from './checkpoint-module';
export {
  CHECKPOINT_SERVICE_OPTIONS,
  type CheckpointModuleAsyncOptions,
  type CheckpointModuleOptions,
  type CheckpointModuleScope,
  type CheckpointOptionsFactory,
  type CheckpointServiceOptions,
} from './checkpoint-module-options';
export { CheckpointService } from './checkpoint-service';
export { getCheckpointServiceToken, InjectCheckpointService } from './checkpoint-service-token';
export { type CheckpointDashboardOptions, CheckpointDashboardMount } from './dashboard-mount';
export { FileProcessor, type FileProcessorHandler, type FileProcessorOptions } from './file-processor';
export { type RetentionOptions } from './retention';
