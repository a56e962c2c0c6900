// The NestJS entry point (`typeorm-checkpoint/nestjs`), kept apart so the main entry never loads Nest.
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
